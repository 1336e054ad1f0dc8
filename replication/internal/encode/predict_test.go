package encode

import (
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/internal/baseline"
	"github.com/archenet/archenet/replication/internal/codec"
	"github.com/archenet/archenet/replication/internal/entity"
	"github.com/archenet/archenet/replication/internal/receive"
	"github.com/archenet/archenet/replication/internal/store"
	"github.com/archenet/archenet/replication/internal/wire"
	"github.com/archenet/archenet/replication/schema"
	"github.com/stretchr/testify/require"
)

type pose struct {
	Pos components.Vec3 `net:"world,step=0.001"`
	Rot components.Quat `net:"quat,bits=10"`
}

// smoothRun replicates entities moving on smooth curves (constant speed,
// slowly turning) for n ticks with acks lag ticks late and returns the mean
// datagram size; every decoded view must equal the server's view model.
func smoothRun(t *testing.T, noPred bool, lag int) (float64, int) {
	reg := schema.NewRegistry()
	schema.MustRegister[pose](reg)
	w := store.New(reg, 0)
	enc := newEncoder(w)
	enc.NoPrediction = noPred
	c := baseline.NewTracker(0, 0)
	rcv := receive.NewReceiver(reg, 0, 0)
	rng := rand.New(rand.NewPCG(2, 2))
	type mover struct{ heading, speed, turn float64 }
	ents := make([]pose, 300)
	ms := make([]mover, len(ents))
	for i := range ents {
		ents[i].Pos = components.Vec3{X: rng.Float64() * 500, Z: rng.Float64() * 500}
		ms[i] = mover{heading: rng.Float64() * 6, speed: 1 + rng.Float64()*4, turn: (rng.Float64() - 0.5) * 0.5}
	}
	ptr := make([]unsafe.Pointer, 1)
	var acks []wire.Ack
	total, n := 0, 0
	predicted := 0
	for tick := uint32(1); tick <= 240; tick++ {
		for i := range ents {
			m := &ms[i]
			m.heading += m.turn / 30
			ents[i].Pos.X += math.Cos(m.heading) * m.speed / 30
			ents[i].Pos.Z += math.Sin(m.heading) * m.speed / 30
			ents[i].Rot = components.QuatAxisAngle(components.Vec3{Y: 1}, m.heading)
		}
		w.Begin(tick)
		for i := range ents {
			ptr[0] = unsafe.Pointer(&ents[i])
			w.Put(uint32(i), entity.Meta{Set: 1}, ptr)
		}
		w.Commit()
		dg, _ := buildOne(t, enc, c, BuildOptions{Budget: 8 << 10})
		predicted += enc.cache.Predicted
		w.EndTick()
		_, err := rcv.Decode(dg)
		require.NoError(t, err)
		slots, lanes, ok := expectedView(w, c, tick)
		require.True(t, ok)
		v := rcv.View(tick)
		require.Equal(t, slots, v.Slots)
		for i := range slots {
			require.Equal(t, lanes[i], v.EntityLanes(i), "tick %d slot %d", tick, slots[i])
		}
		acks = append(acks, rcv.Ack())
		if len(acks) > lag {
			c.Ack(&acks[len(acks)-1-lag])
		}
		if tick > 60 {
			total += len(dg)
			n++
		}
	}
	return float64(total) / float64(n), predicted
}

func TestPredictorWinsOnSmoothMotion(t *testing.T) {
	for _, lag := range []int{0, 3, 6} {
		plain, _ := smoothRun(t, true, lag)
		pred, used := smoothRun(t, false, lag)
		t.Logf("300 bodies on smooth curves, acks %d ticks late: %.0f B/tick plain, %.0f B/tick predicted (%.0f%%), %d records predicted",
			lag, plain, pred, 100*pred/plain, used)
		require.Greater(t, used, 1000)
		require.Less(t, pred, plain*0.8, "prediction must win on smooth motion")
	}
}

func TestDivRound(t *testing.T) {
	for _, c := range []struct{ a, b, want int64 }{{7, 2, 4}, {-7, 2, -4}, {5, 3, 2}, {-5, 3, -2}, {4, 3, 1}, {-4, 3, -1}, {0, 5, 0}} {
		require.Equal(t, c.want, codec.DivRound(c.a, c.b), "%d/%d", c.a, c.b)
	}
	// Powers of two take a shift: the same quotients as the division, at
	// the ties and on random values of every size below 2^62.
	ref := func(a, b int64) int64 {
		if a >= 0 {
			return (a + b/2) / b
		}
		return -((-a + b/2) / b)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for b := int64(1); b <= 600; b++ { // every divisor a prediction can take, powers of two or not
		for range 200 {
			a := rng.Int64N(1<<62) >> rng.UintN(62)
			if rng.IntN(2) == 0 {
				a = -a
			}
			require.Equal(t, ref(a, b), codec.DivRound(a, b), "%d/%d", a, b)
		}
	}
	for s := range 40 {
		b := int64(1) << s
		for _, a := range []int64{0, 1, -1, b / 2, -b / 2, b/2 - 1, -(b/2 - 1), b/2 + 1, -(b/2 + 1), 3 * b / 2, -3 * b / 2, 1<<62 - 1, -(1<<62 - 1)} {
			require.Equal(t, ref(a, b), codec.DivRound(a, b), "%d/%d", a, b)
		}
		for range 2000 {
			a := rng.Int64N(1<<62) >> rng.UintN(62)
			if rng.IntN(2) == 0 {
				a = -a
			}
			require.Equal(t, ref(a, b), codec.DivRound(a, b), "%d/%d", a, b)
			require.Equal(t, ref(a, b+3), codec.DivRound(a, b+3), "%d/%d", a, b+3)
		}
	}
}

// Bodies thrown under gravity, acks 3 ticks late: the encoder turns the
// quadratic extrapolation of positions on (its measured saving), every
// decoded view equals the server's, and it takes fewer bytes than the
// linear extrapolation alone.
func TestQuadraticPredictionOnBallisticMotion(t *testing.T) {
	run := func(allowQuad bool) (float64, bool) {
		reg := schema.NewRegistry()
		schema.MustRegister[pose](reg)
		w := store.New(reg, 0)
		enc := newEncoder(w)
		c := baseline.NewTracker(0, 0)
		rcv := receive.NewReceiver(reg, 0, 0)
		rng := rand.New(rand.NewPCG(3, 3))
		ents := make([]pose, 200)
		vel := make([]components.Vec3, len(ents))
		for i := range ents {
			ents[i].Pos = components.Vec3{X: rng.Float64() * 100, Y: 50, Z: rng.Float64() * 100}
			vel[i] = components.Vec3{X: rng.Float64()*4 - 2, Y: rng.Float64() * 10, Z: rng.Float64()*4 - 2}
			ents[i].Rot = components.QuatIdentity()
		}
		ptr := make([]unsafe.Pointer, 1)
		var acks []wire.Ack
		total, n, quadUsed := 0, 0, false
		for tick := uint32(1); tick <= 150; tick++ {
			for i := range ents {
				vel[i].Y -= 9.81 / 60
				ents[i].Pos = ents[i].Pos.Add(vel[i].Scale(1.0 / 60))
			}
			w.Begin(tick)
			for i := range ents {
				ptr[0] = unsafe.Pointer(&ents[i])
				w.Put(uint32(i), entity.Meta{Set: 1}, ptr)
			}
			w.Commit()
			if !allowQuad {
				enc.g.BeginTick()
				enc.g.codes.quad = false
			}
			var pk Packets
			enc.Build(c, BuildOptions{}, &pk)
			quadUsed = quadUsed || enc.pc.quad
			w.EndTick()
			for j := range pk.Len() {
				_, err := rcv.Decode(pk.At(j))
				require.NoError(t, err)
			}
			slots, lanes, ok := expectedView(w, c, tick)
			require.True(t, ok)
			v := rcv.View(tick)
			require.Equal(t, slots, v.Slots)
			for i := range slots {
				require.Equal(t, lanes[i], v.EntityLanes(i), "tick %d slot %d", tick, slots[i])
			}
			acks = append(acks, rcv.Ack())
			if len(acks) > 3 {
				c.Ack(&acks[len(acks)-4])
			}
			if tick > 60 {
				total += pk.Bytes()
				n++
			}
		}
		return float64(total) / float64(n), quadUsed
	}
	lin, usedLin := run(false)
	quad, used := run(true)
	t.Logf("200 ballistic bodies, acks 3 ticks late: %.0f B/tick linear, %.0f B/tick quadratic", lin, quad)
	require.False(t, usedLin)
	require.True(t, used, "the quadratic extrapolation must be chosen")
	require.Less(t, quad, lin*0.9)
}

// TestValueTickAt: lookups in any order (mostly ascending, some going
// back) find what a search of the whole list finds.
func TestValueTickAt(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var behind []baseline.Behind
	for slot := uint32(0); slot < 500; slot++ {
		if rng.IntN(3) == 0 {
			behind = append(behind, baseline.Behind{Slot: slot, Src: 1000 + slot})
		}
	}
	want := func(slot uint32) uint32 {
		for _, b := range behind {
			if b.Slot == slot {
				return b.Src
			}
		}
		return 7
	}
	at := 0
	slot := uint32(0)
	for range 5000 {
		switch rng.IntN(10) {
		case 0:
			slot = uint32(rng.IntN(520)) // back or far ahead
		default:
			slot += uint32(rng.IntN(4))
		}
		require.Equal(t, want(slot), valueTickAt(7, behind, slot, &at), "slot %d", slot)
	}
	at = 0
	require.Equal(t, uint32(7), valueTickAt(7, nil, 3, &at))
}
