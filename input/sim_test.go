package input

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/input/internal/frames"
	"github.com/archenet/archenet/input/internal/inputlog"
	"github.com/archenet/archenet/input/internal/predict"
	"github.com/archenet/archenet/replication/bitio"
	"github.com/archenet/archenet/replication/schema"
	"github.com/archenet/archenet/transport/sim"
)

// inputScript is a deterministic player: keys held for seconds at a time,
// a mouse that moves smoothly with noise.
type inputScript struct {
	rng *rand.Rand
	in  fpsInput
}

func (s *inputScript) next() fpsInput {
	if s.rng.IntN(90) == 0 {
		s.in.Keys = uint16(s.rng.IntN(32))
	}
	if s.rng.IntN(40) == 0 {
		s.in.Buttons = uint8(s.rng.IntN(2))
	}
	s.in.DX = 0.9*s.in.DX + float32(s.rng.NormFloat64()*2)
	s.in.DY = 0.8*s.in.DY + float32(s.rng.NormFloat64())
	return s.in
}

type simResult struct {
	ticks, received, missing int // measured window
	warmMissing              int
	maxLead, minLead         float64
	maxDepth                 int
	corrections, matches     int
	unexplained              int
	maxError                 uint64
	finalCompared            int
	bytes, datagrams         int
	resyncs                  int
}

// runSim plays a server and a client over a sim link for the given number
// of server ticks. Every disturbEvery ticks the server pushes the player
// (something the client cannot predict).
func runSim(t *testing.T, seed uint64, link sim.Link, ticks, warm, disturbEvery int) simResult {
	t.Helper()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	net := sim.NewNetwork(int64(seed), start)
	ln := net.Listen("server")
	cconn, err := net.Dial("server", link)
	require.NoError(t, err)
	sconnT, ok := ln.PollAccept()
	require.True(t, ok)
	sconn := sconnT.(*sim.Conn)

	codec, err := frames.New[fpsInput](frames.Config{})
	require.NoError(t, err)
	reg := schema.NewRegistry()
	plan := schema.MustRegister[player](reg)
	const dt = 1.0 / 60
	tickDur := func(n int) time.Duration { return time.Duration(n) * time.Second / 60 }

	// Server.
	log, err := inputlog.New(codec, inputlog.Config{})
	require.NoError(t, err)
	rounder, err := predict.NewRounder[player](plan)
	require.NoError(t, err)
	var srv player
	srvLanes := map[uint32][]uint64{}
	disturbed := map[uint32]bool{}
	missingAt := map[uint32]bool{}

	// Client.
	sync, err := NewTickSync(SyncConfig{})
	require.NoError(t, err)
	sender := frames.NewSender(codec)
	pred, err := predict.New(plan, stepPlayer, predict.Config{})
	require.NoError(t, err)
	script := inputScript{rng: rand.New(rand.NewPCG(seed, 99))}
	lastReconciled := uint32(0)

	var res simResult
	res.minLead = 1e9
	var sw, cw bitio.Writer
	var in fpsInput
	nextServer := 1
	for now := start; ; now = now.Add(time.Millisecond) {
		net.AdvanceTo(now)
		// Server tick(s) due.
		for !now.Before(start.Add(tickDur(nextServer))) {
			tick := uint32(nextServer)
			for {
				d, ok := sconn.PollDatagram()
				if !ok {
					break
				}
				_, err := log.Receive(bitio.NewReader(d), tick)
				require.NoError(t, err, "honest client rejected")
			}
			st := log.Consume(tick, &in)
			measured := nextServer > warm && nextServer <= ticks
			if st != inputlog.Received {
				missingAt[tick] = true
			}
			if st == inputlog.Missing {
				if measured {
					res.missing++
				} else {
					res.warmMissing++
				}
			}
			if measured && st == inputlog.Received {
				res.received++
			}
			if measured {
				res.ticks++
			}
			stepPlayer(&srv, &in, dt)
			if disturbEvery > 0 && nextServer%disturbEvery == 0 && nextServer < ticks-200 {
				srv.VX += 4
				srv.VY -= 3
				disturbed[tick] = true
			}
			rounder.Round(&srv)
			lanes := make([]uint64, plan.NumLanes())
			schema.QuantizeValue(plan, &srv, lanes)
			srvLanes[tick] = lanes

			fb := log.Feedback()
			if fb.HasAck && measured {
				res.maxDepth = max(res.maxDepth, fb.Depth)
			}
			last, _ := log.LastApplied()
			sw.Reset(sw.Bytes()[:0])
			sw.WriteBits(uint64(tick), 32)
			sw.WriteBits(uint64(last), 32)
			inputlog.AppendFeedback(&sw, fb)
			plan.Write(&sw, lanes, true)
			require.NoError(t, sconn.SendDatagram(append([]byte(nil), sw.Bytes()...)))
			nextServer++
		}
		if nextServer > ticks {
			break
		}

		// Client: snapshots.
		for {
			d, ok := cconn.PollDatagram()
			if !ok {
				break
			}
			r := bitio.NewReader(d)
			tick := uint32(r.ReadBits(32))
			last := uint32(r.ReadBits(32))
			newest, _ := sender.Newest()
			fb, err := inputlog.ReadFeedback(r, newest)
			require.NoError(t, err)
			var lanes = make([]uint64, plan.NumLanes())
			require.NoError(t, plan.Read(r, lanes, true))
			var auth player
			schema.DequantizeValue(plan, lanes, &auth)

			sync.ObserveSnapshot(tick, now)
			sync.ObserveRTT(cconn.Stats().RTT)
			if fb.HasAck {
				sync.ObserveFeedback(fb.Depth)
				sender.Ack(fb.Ack)
			}
			c := pred.Reconcile(tick, last, &auth)
			if int(tick) <= warm {
				c.Status = predict.Stale // not counted: start-up
			}
			switch c.Status {
			case predict.Match:
				res.matches++
			case predict.Corrected:
				res.corrections++
				res.maxError = max(res.maxError, c.MaxError)
				explained := false
				for x := lastReconciled + 1; int32(x-tick) <= 0; x++ {
					if disturbed[x] || missingAt[x] {
						explained = true
					}
				}
				if !explained && lastReconciled != 0 {
					res.unexplained++
					t.Logf("unexplained correction at tick %d (last reconciled %d)", tick, lastReconciled)
				}
			}
			if tk, ok := pred.Reconciled(); ok {
				lastReconciled = tk
			}
		}
		// Client: input ticks.
		first, n := sync.Advance(now)
		for i := 0; i < n; i++ {
			tk := first + uint32(i)
			in := script.next()
			sender.Push(tk, &in)
			pred.Predict(tk, &in)
		}
		if n > 0 {
			cw.Reset(cw.Bytes()[:0])
			sender.AppendFrames(&cw)
			b := append([]byte(nil), cw.Bytes()...)
			require.NoError(t, cconn.SendDatagram(b))
			if now.After(start.Add(tickDur(warm))) {
				res.bytes += len(b)
				res.datagrams++
				lead := sync.Lead()
				res.maxLead = max(res.maxLead, lead)
				res.minLead = min(res.minLead, lead)
			}
		}
	}
	res.resyncs = sync.Resyncs()

	// After the last disturbance, everything the client predicted for ticks
	// the server has simulated must equal the server's rounded state exactly.
	// (StateAt gives the recorded lanes dequantized; quantizing them again
	// gives the same lanes, as for every rounded state.)
	predicted := make([]uint64, plan.NumLanes())
	var at player
	for tk := pred.Tick() - uint32(pred.History()) + 1; int32(tk-pred.Tick()) <= 0; tk++ {
		sl, ok := srvLanes[tk]
		if !pred.StateAt(tk, &at) || !ok || int(tk) < ticks-150 || int32(tk-lastReconciled) > 0 && !ok {
			continue
		}
		if int32(tk-lastReconciled) > 0 {
			// Not yet confirmed by a snapshot: the prediction must still
			// match, since the server had every input.
			if missingAt[tk] {
				continue
			}
		}
		schema.QuantizeValue(plan, &at, predicted)
		require.Equal(t, sl, predicted, "tick %d", tk)
		res.finalCompared++
	}
	return res
}

// TestSimLossyLink: 150 ms RTT, ±10 ms jitter and 10% loss in both
// directions, 60 Hz, 3600 ticks (one minute).
func TestSimLossyLink(t *testing.T) {
	cond := sim.Conditions{Latency: 70 * time.Millisecond, Jitter: 10 * time.Millisecond, Loss: 0.10}
	res := runSim(t, 1, sim.Link{Up: cond, Down: cond}, 3600, 180, 97)
	pct := 100 * float64(res.received) / float64(res.ticks)
	t.Logf("ticks %d: input received %.3f%% (missing %d; %d during warm-up); lead %.2f..%.2f ticks; max server depth %d; resyncs %d",
		res.ticks, pct, res.missing, res.warmMissing, res.minLead, res.maxLead, res.maxDepth, res.resyncs)
	t.Logf("reconcile: %d match, %d corrected (%d unexplained), max correction %d steps; %d final ticks compared; %.1f bytes/datagram",
		res.matches, res.corrections, res.unexplained, res.maxError, res.finalCompared, float64(res.bytes)/float64(res.datagrams))
	require.GreaterOrEqual(t, pct, 99.9)
	require.Less(t, res.maxLead, 20.0)
	require.Greater(t, res.minLead, 0.0)
	require.LessOrEqual(t, res.maxDepth, 16)
	require.Zero(t, res.unexplained, "corrections without a disturbance or a missing input mean drift")
	require.GreaterOrEqual(t, res.corrections, (3600-180-200)/97-1, "every disturbance is corrected")
	require.Greater(t, res.matches, 10*res.corrections)
	require.Greater(t, res.finalCompared, 100)
	require.LessOrEqual(t, res.resyncs, 1)
}

// TestSimJitteryLink: 100 ms RTT with 40 ms of jitter per direction and 5%
// bursty loss: the lead grows with the measured jitter.
func TestSimJitteryLink(t *testing.T) {
	cond := sim.Conditions{Latency: 40 * time.Millisecond, Jitter: 40 * time.Millisecond, Loss: 0.03,
		Burst: sim.GilbertElliott{PGoodToBad: 0.01, PBadToGood: 0.5}}
	res := runSim(t, 2, sim.Link{Up: cond, Down: cond}, 3600, 300, 0)
	pct := 100 * float64(res.received) / float64(res.ticks)
	t.Logf("ticks %d: input received %.3f%% (missing %d); lead %.2f..%.2f ticks; max server depth %d; corrections %d (%d unexplained)",
		res.ticks, pct, res.missing, res.minLead, res.maxLead, res.maxDepth, res.corrections, res.unexplained)
	require.GreaterOrEqual(t, pct, 99.5)
	require.Less(t, res.maxLead, 20.0)
	require.Zero(t, res.unexplained)
	require.LessOrEqual(t, res.corrections, res.missing+1)
}
