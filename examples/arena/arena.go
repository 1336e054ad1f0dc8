package main

import (
	"fmt"
	"github.com/archenet/archenet/replication"
	"math"
	"strings"
	"time"

	"github.com/archenet/archenet/examples/arena/game"
	"github.com/archenet/archenet/replication/debugview"
)

// Arena runs a server and/or bots frame by frame on one goroutine. The
// clock is the caller's: wall time over QUIC, simulated time in tests.
type Arena struct {
	Server *game.ServerGame // nil when only bots run (-mode client)
	Bots   []*game.Bot
	// ReadyTimeout is how long a bot may take to receive the initial world
	// before Frame fails. Zero: 5 s.
	ReadyTimeout time.Duration
	// Debug, if set, is sampled after the server's ticks of every frame
	// and told their time (the mean over the ticks of each frame).
	Debug *debugview.Recorder

	start    time.Time
	prev     sample
	clientS  float64   // client-seconds (clients × elapsed), for per-client rates
	botS     float64   // bot-seconds
	tick0    uint64    // the tick before the first one seen
	tick0At  time.Time // when the first tick was seen
	rttSum   time.Duration
	rttN     int
	maxConns int
}

// sample is the cumulative counters at one status line.
type sample struct {
	at          time.Time
	tick        uint64
	bytes       uint64 // bytes down (server: sent; client mode: received by the bots)
	corrections uint64
}

// Status is one status line's figures.
type Status struct {
	Tick     uint64
	Clients  int
	Down     float64 // KB/s per client over the last interval
	RTT      time.Duration
	CorrRate float64 // corrections per second per bot; NaN without bots
	Entities int
}

func (s Status) String() string {
	corr := "-"
	if !math.IsNaN(s.CorrRate) {
		corr = fmt.Sprintf("%.1f/s", s.CorrRate)
	}
	return fmt.Sprintf("tick %d clients %d down %.1f KB/s/client rtt %.1f ms corrections %s entities %d",
		s.Tick, s.Clients, s.Down, float64(s.RTT.Microseconds())/1000, corr, s.Entities)
}

// Frame runs the server, then every bot, at now. It fails when a bot is
// disconnected or not ready within ReadyTimeout.
func (a *Arena) Frame(now time.Time) error {
	if a.start.IsZero() {
		a.start = now
		a.prev = a.sample(now)
	}
	if a.Server != nil {
		t0, tick0 := time.Now(), a.Server.Tick()
		a.Server.Frame(now)
		if n := a.Server.Tick() - tick0; n > 0 && a.Debug != nil {
			a.Debug.TickTime(time.Since(t0) / time.Duration(n))
			a.Debug.Sample()
		}
	}
	timeout := a.ReadyTimeout
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	for i, b := range a.Bots {
		if err := b.Frame(now); err != nil {
			return fmt.Errorf("bot %d: %w", i+1, err)
		}
		// (A bot resuming its seat is connecting for a round trip; a resume
		// that fails closes it, and that fails here.)
		resuming := b.Client().Stats.Resumes > 0 && b.Client().State() == replication.StateConnecting
		if !b.Client().Ready() && !resuming && now.Sub(a.start) > timeout {
			return fmt.Errorf("bot %d: not connected after %v (state %v)", i+1, timeout, b.Client().State())
		}
	}
	if a.tick0At.IsZero() {
		if t := a.sample(now).tick; t > 0 {
			a.tick0, a.tick0At = t-1, now
		}
	}
	return nil
}

func (a *Arena) sample(now time.Time) sample {
	s := sample{at: now}
	if a.Server != nil {
		s.tick = a.Server.Tick()
		snap, spawn := a.Server.BytesDown()
		s.bytes = snap + spawn + a.Server.MessageBytes()
	} else if len(a.Bots) > 0 {
		c := a.Bots[0].Client()
		s.tick = c.SimTick(c.ServerTick())
	}
	for _, b := range a.Bots {
		if a.Server == nil {
			s.bytes += b.BytesIn()
		}
		s.corrections += b.Stats().Corrections
	}
	return s
}

func (a *Arena) clients() int {
	if a.Server != nil {
		return a.Server.ConnectedClients()
	}
	n := 0
	for _, b := range a.Bots {
		if b.Client().Ready() {
			n++
		}
	}
	return n
}

// rtt is the bots' view of the transport RTT when there are bots: the
// server's QUIC RTT estimate includes the clients' delayed ACKs (a client
// receives one datagram per 33 ms, so QUIC acknowledges it late), which reads
// 5–8 ms on loopback where the bots measure 0.2 ms.
func (a *Arena) rtt() time.Duration {
	if a.Server != nil && len(a.Bots) == 0 {
		return a.Server.RTT()
	}
	var sum time.Duration
	n := 0
	for _, b := range a.Bots {
		if r := b.RTT(); r > 0 {
			sum += r
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / time.Duration(n)
}

// Status returns the figures since the previous call and accumulates them
// for the summary.
func (a *Arena) Status(now time.Time) Status {
	cur := a.sample(now)
	dt := cur.at.Sub(a.prev.at).Seconds()
	st := Status{Tick: cur.tick, Clients: a.clients(), RTT: a.rtt(), CorrRate: math.NaN()}
	a.maxConns = max(a.maxConns, st.Clients)
	if dt > 0 {
		if st.Clients > 0 {
			st.Down = float64(cur.bytes-a.prev.bytes) / 1024 / dt / float64(st.Clients)
		}
		a.clientS += float64(st.Clients) * dt
		if len(a.Bots) > 0 {
			st.CorrRate = float64(cur.corrections-a.prev.corrections) / dt / float64(len(a.Bots))
			a.botS += float64(len(a.Bots)) * dt
		}
	}
	if st.RTT > 0 {
		a.rttSum += st.RTT
		a.rttN++
	}
	if a.Server != nil {
		st.Entities = a.Server.Entities()
	} else if len(a.Bots) > 0 {
		st.Entities = a.Bots[0].Client().Mirrors()
	}
	a.prev = cur
	return st
}

// Summary is the figures of a whole run.
type Summary struct {
	Elapsed       time.Duration
	Ticks         uint64  // simulation ticks run (observed, in -mode client)
	TickRate      float64 // per second
	Clients       int     // most clients connected at once
	Down          float64 // KB/s per connected client, whole run
	RTT           time.Duration
	Bots          int
	Corrections   uint64
	CorrRate      float64 // per second per bot
	Matches       uint64
	MaxCorrection float64 // metres the largest correction moved a predicted avatar
	InputTicks    uint64  // sampled by the bots
	Spawned, Gone uint64  // projectiles on the server
	Hits          uint64
	// PlayerShots and PlayerHits: projectiles players fired and those that
	// hit another player (lag-compensated).
	PlayerShots, PlayerHits uint64
	// ShotLatency is the mean time from a bot firing to its projectile on
	// its own screen (0 with predicted shots), over ShotsMeasured shots.
	ShotLatency    time.Duration
	ShotsMeasured  int
	MirrorSpawns   uint64 // summed over bots
	MirrorDespawns uint64
	InputReceived  uint64 // server: ticks consumed with the client's frame
	InputMissing   uint64
	InputLate      uint64
	SnapshotBytes  uint64
	SpawnBytes     uint64
	// FeedLines is the hit-feed events the server sent and MessageBytes
	// the bytes of the game messages that carried them to the clients.
	FeedLines, MessageBytes uint64
}

// Summary closes the accounting at now (call Status first for the last
// interval) and returns the run's figures.
func (a *Arena) Summary(now time.Time) Summary {
	a.Status(now)
	s := Summary{Elapsed: now.Sub(a.start), Clients: a.maxConns, Bots: len(a.Bots)}
	cur := a.prev
	if !a.tick0At.IsZero() {
		s.Ticks = cur.tick - a.tick0
		if d := now.Sub(a.tick0At).Seconds(); d > 0 {
			s.TickRate = float64(s.Ticks) / d
		}
	}
	if a.clientS > 0 {
		s.Down = float64(cur.bytes) / 1024 / a.clientS
	}
	if a.rttN > 0 {
		s.RTT = a.rttSum / time.Duration(a.rttN)
	}
	for _, b := range a.Bots {
		st := b.Stats()
		s.Corrections += st.Corrections
		s.Matches += st.Matches
		s.MaxCorrection = max(s.MaxCorrection, st.MaxCorrection)
		s.InputTicks += st.InputTicks
		s.MirrorSpawns += b.Client().Stats.Spawns
		s.MirrorDespawns += b.Client().Stats.Despawns
		l, n := b.SpawnLatency()
		s.ShotLatency += l * time.Duration(n)
		s.ShotsMeasured += n
	}
	if s.ShotsMeasured > 0 {
		s.ShotLatency /= time.Duration(s.ShotsMeasured)
	}
	if a.botS > 0 {
		s.CorrRate = float64(s.Corrections) / a.botS
	}
	if a.Server != nil {
		st := a.Server.Stats()
		s.Spawned, s.Gone, s.Hits = st.ProjectilesSpawned, st.ProjectilesGone, st.Hits
		s.PlayerShots, s.PlayerHits = st.PlayerShots, st.PlayerHits
		s.InputReceived, s.InputMissing, s.InputLate = st.InputReceived, st.InputMissing, st.InputLate
		s.SnapshotBytes, s.SpawnBytes = a.Server.BytesDown()
		s.FeedLines, s.MessageBytes = st.FeedLines, a.Server.MessageBytes()
	}
	return s
}

func (s Summary) String() string {
	var b strings.Builder
	secs := s.Elapsed.Seconds()
	fmt.Fprintf(&b, "summary: %.1f s, %d ticks (%.1f/s), %d clients\n", secs, s.Ticks, s.TickRate, s.Clients)
	fmt.Fprintf(&b, "  down        %.2f KB/s per client", s.Down)
	if s.SnapshotBytes+s.SpawnBytes > 0 {
		fmt.Fprintf(&b, " (snapshots %d B, spawn/despawn messages %d B in total)", s.SnapshotBytes, s.SpawnBytes)
	}
	fmt.Fprintf(&b, "\n  rtt         %.2f ms (mean of the status lines)\n", float64(s.RTT.Microseconds())/1000)
	if s.Bots > 0 {
		fmt.Fprintf(&b, "  prediction  %d corrections (%.2f/s per client), %d exact matches, largest %.3f m (smoothed); %d input ticks sent\n",
			s.Corrections, s.CorrRate, s.Matches, s.MaxCorrection, s.InputTicks)
		fmt.Fprintf(&b, "  mirrors     %d spawns, %d despawns seen by %d bots\n", s.MirrorSpawns, s.MirrorDespawns, s.Bots)
	}
	if s.Spawned > 0 || s.InputReceived+s.InputMissing > 0 {
		fmt.Fprintf(&b, "  projectiles %d spawned, %d despawned, %d hits on avatars\n", s.Spawned, s.Gone, s.Hits)
		if s.PlayerShots > 0 {
			fmt.Fprintf(&b, "  shots       players fired %d, %d hit a player (%.1f%%, lag-compensated); on the shooter's screen after %v (%d measured)\n",
				s.PlayerShots, s.PlayerHits, 100*float64(s.PlayerHits)/float64(s.PlayerShots), s.ShotLatency.Round(time.Millisecond), s.ShotsMeasured)
		}
		fmt.Fprintf(&b, "  inputs      %d ticks received, %d missing (last input repeated), %d late frames\n",
			s.InputReceived, s.InputMissing, s.InputLate)
		if s.FeedLines > 0 && secs > 0 && s.Clients > 0 {
			fmt.Fprintf(&b, "  hit feed    %d lines, %d B of messages (%.1f B/s per client)\n",
				s.FeedLines, s.MessageBytes, float64(s.MessageBytes)/secs/float64(s.Clients))
		}
	}
	return b.String()
}
