package encode

import (
	"math/rand/v2"
	"testing"
	"time"
	"unsafe"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/internal/baseline"
	"github.com/archenet/archenet/replication/internal/entity"
	"github.com/archenet/archenet/replication/internal/receive"
	"github.com/archenet/archenet/replication/internal/store"
	"github.com/archenet/archenet/replication/internal/wire"
	"github.com/archenet/archenet/replication/schema"
	"github.com/archenet/archenet/transport/sim"
	"github.com/stretchr/testify/require"
)

type walker struct {
	Pos components.Vec3 `net:"world,step=0.01"`
}

// expectedView rebuilds, from the server's record of what it sent, the
// state client c holds after decoding tick S: members at frame S's value,
// deferred ones at their older frame's value. ok is false if a needed frame
// left the ring (nothing to compare with).
func expectedView(w *store.Ring, c *baseline.Tracker, S uint32) (slots []uint32, lanes [][]uint64, ok bool) {
	v := c.At(S)
	if v == nil {
		return nil, nil, false
	}
	bi, behind := 0, c.Behind(v)
	for wi, word := range c.Members(v) {
		for word != 0 {
			slot := uint32(wi*64 + tz(word))
			word &= word - 1
			src := S
			for bi < len(behind) && behind[bi].Slot < slot {
				bi++
			}
			if bi < len(behind) && behind[bi].Slot == slot {
				src = behind[bi].Src
			}
			f := w.Frame(src)
			if f == nil {
				return nil, nil, false
			}
			i := f.Lookup(slot)
			if i < 0 {
				return nil, nil, false
			}
			slots = append(slots, slot)
			lanes = append(lanes, f.EntityLanes(i))
		}
	}
	return slots, lanes, true
}

// walkTick moves 10% of the walkers by up to ±2 cm on x and z and commits
// the frame of tick.
func walkTick(w *store.Ring, rng *rand.Rand, ents []walker, tick uint32) {
	for i := range ents {
		if rng.IntN(10) == 0 {
			ents[i].Pos.X += rng.Float64()*0.04 - 0.02
			ents[i].Pos.Z += rng.Float64()*0.04 - 0.02
		}
	}
	ptrs := []unsafe.Pointer{nil}
	w.Begin(tick)
	for i := range ents {
		ptrs[0] = unsafe.Pointer(&ents[i])
		w.Put(uint32(i), entity.Meta{Set: 1}, ptrs)
	}
	w.Commit()
}

func tz(w uint64) int {
	n := 0
	for w&1 == 0 {
		w >>= 1
		n++
	}
	return n
}

// TestConvergenceUnderLoss: 1000 random walkers (10% move each tick), 30 Hz,
// 20% loss both ways, 100 ms latency, 30 ms jitter, 600 ticks; then loss
// stops. Ticks go out in datagrams of at most 300 bytes, so most take
// several, and loss and jitter hit them one by one. Whenever the server
// takes in an ack, every view it names must be exactly what the server now
// believes the client holds (never a wrong baseline), and from 3 ticks
// after the loss stops every decoded view equals the server's quantized
// frame.
func TestConvergenceUnderLoss(t *testing.T) {
	const (
		entities = 1000
		lossy    = 600
		total    = 660
		dt       = time.Second / 30
		mtu      = 300
	)
	reg := schema.NewRegistry()
	schema.MustRegister[walker](reg)
	w := store.New(reg, 0)
	enc := newEncoder(w)
	c := baseline.NewTracker(0, 0)
	rcv := receive.NewReceiver(reg, 0, 0)

	net := sim.NewNetwork(42, time.Unix(0, 0))
	l := net.Listen("server")
	cond := sim.Conditions{Latency: 100 * time.Millisecond, Jitter: 30 * time.Millisecond, Loss: 0.2}
	cc, err := net.Dial("server", sim.Link{Up: cond, Down: cond})
	require.NoError(t, err)
	sc, ok := l.PollAccept()
	require.True(t, ok)

	rng := rand.New(rand.NewPCG(7, 7))
	ents := make([]walker, entities)
	for i := range ents {
		ents[i].Pos = components.Vec3{X: rng.Float64()*1000 - 500, Z: rng.Float64()*1000 - 500}
	}
	var pk Packets
	decoded, sent, checked, partial, converged, bytesSent := 0, 0, 0, 0, 0, 0
	seen := map[uint32]bool{}
	var maxBytes int
	for tick := uint32(1); tick <= total; tick++ {
		if tick == lossy+1 {
			calm := cond
			calm.Loss = 0
			cc.SetConditions(calm, calm)
		}
		walkTick(w, rng, ents, tick)
		info := enc.Build(c, BuildOptions{Budget: mtu}, &pk)
		bytesSent += info.Bytes
		maxBytes = max(maxBytes, info.Bytes)
		for i := range pk.Len() {
			require.LessOrEqual(t, len(pk.At(i)), mtu)
			require.NoError(t, sc.SendDatagram(pk.At(i)))
			sent++
		}
		w.EndTick()

		net.Advance(dt)

		for {
			d, ok := cc.PollDatagram()
			if !ok {
				break
			}
			S, err := rcv.Decode(d)
			if err != nil {
				continue // missing baseline / duplicate: dropped, never guessed
			}
			decoded++
			if got, count := rcv.Parts(S); S >= lossy+3 && got == count {
				// Every part of the tick is in (some maybe after sealing):
				// what the client shows is the server's frame.
				requireSameView(t, w.Frame(S), rcv.View(S))
				converged++
			}
		}
		a := rcv.Ack()
		require.NoError(t, cc.SendDatagram(a.Append(nil)))
		for {
			d, ok := sc.PollDatagram()
			if !ok {
				break
			}
			a, n, err := wire.ParseAck(d)
			require.NoError(t, err)
			require.Equal(t, len(d), n)
			c.Ack(&a)
			// Every view the ack names is now a baseline the server may code
			// against: the client must hold exactly what the server thinks.
			for i := uint32(0); i < wire.AckWindow; i++ {
				S := a.Newest - i
				if (i > 0 && a.Mask>>(i-1)&1 == 0) || seen[S] {
					continue
				}
				got := rcv.Exact(S)
				slots, lanes, ok := expectedView(w, c, S)
				if got == nil || !ok {
					continue
				}
				seen[S] = true
				checked++
				if _, all := a.Holds(S); !all {
					partial++
				}
				require.Equal(t, slots, got.Slots, "tick %d", S)
				for i := range slots {
					require.Equal(t, lanes[i], got.EntityLanes(i), "tick %d slot %d", S, slots[i])
				}
			}
		}
	}
	t.Logf("decoded %d of %d datagrams; %d acked views checked against the server's model (%d lacking parts); %d views converged after loss; mean %d B/tick, max %d B",
		decoded, sent, checked, partial, converged, bytesSent/total, maxBytes)
	require.Greater(t, sent, 2*total, "ticks went out in several datagrams")
	require.Greater(t, checked, 300)
	require.Greater(t, partial, 30)
	require.Greater(t, converged, 40)
}
