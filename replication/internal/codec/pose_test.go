package codec

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/bitio"
	"github.com/archenet/archenet/replication/internal/wire"
	"github.com/archenet/archenet/replication/schema"
	"github.com/stretchr/testify/require"
)

type poseT struct {
	Pos components.Vec3 `net:"world,step=0.001"`
	Rot components.Quat `net:"quat,bits=10"`
}

// The pose reader reads the same values, the same bits and the same
// errors as Predict (or PlainOrders) and ReadDeltaBody, on random views near
// and past every bound (the extrapolation limits, a changed quaternion
// index, every number of views), under random codings, from streams of
// small residuals, of residuals past the lanes' ranges, and of random bits,
// whole or cut short.
func TestReadPoseBodyMatchesGeneral(t *testing.T) {
	reg := schema.NewRegistry()
	schema.MustRegister[poseT](reg)
	schema.MustRegister[components.Transform](reg)
	plans := reg.Plans()
	rng := rand.New(rand.NewPCG(11, 12))
	lane := func(base uint64) uint64 {
		switch rng.IntN(10) {
		case 0:
			return rng.Uint64() // anything: past every limit
		case 1:
			return base + uint64(int64(1<<40)-2+rng.Int64N(5)) // at the extrapolation bound
		case 2:
			return base - uint64(int64(1<<40)-2+rng.Int64N(5))
		case 3, 4, 5:
			return base // unchanged
		default:
			return base + uint64(rng.Int64N(2001)-1000)
		}
	}
	vals := func(base []uint64) []uint64 {
		v := make([]uint64, PoseLanes)
		for l := range v {
			v[l] = lane(base[l])
		}
		v[3] = base[3] // the quaternion index: mostly kept
		if rng.IntN(4) == 0 {
			v[3] = rng.Uint64N(4)
		}
		return v
	}
	outcomes := map[string]int{}
	for i := range 40000 {
		id := rng.IntN(len(plans))
		p := plans[id]
		require.True(t, IsPose(p))
		cod := wire.Coding{
			Off:   [wire.NumClasses]int8{int8(wire.MinCodeOff + rng.IntN(wire.MaxCodeOff-wire.MinCodeOff+1)), int8(wire.MinCodeOff + rng.IntN(wire.MaxCodeOff-wire.MinCodeOff+1))},
			Cap:   [wire.NumClasses]uint8{uint8(rng.IntN(wire.MaxCodeCap + 1)), uint8(rng.IntN(wire.MaxCodeCap + 1))},
			Plain: [wire.NumClasses]uint8{uint8(rng.IntN(wire.MaxCodeCap + 1)), uint8(rng.IntN(wire.MaxCodeCap + 1))},
		}
		origin := make([]uint64, PoseLanes)
		for l := range origin {
			origin[l] = uint64(rng.Int64N(1<<30) - 1<<29)
		}
		origin[3] = rng.Uint64N(4)
		v := Views{Third: vals(origin)}
		v.Prev = vals(v.Third)
		v.Base = vals(v.Prev)
		switch rng.IntN(3) {
		case 0:
			v.Prev, v.Third = nil, nil
		case 1:
			v.Third = nil
		}
		x := Extrap{Num: 1 + rng.Int64N(8), Den: 1 + rng.Int64N(6)}
		if rng.IntN(20) == 0 {
			x.Num = 250 + rng.Int64N(10)
		}
		if v.Prev != nil {
			require.Equal(t, ChangedGroups(p, v.Prev, v.Base, true), PoseGroups(v.Prev, v.Base), "case %d", i)
		}
		gm := rng.Uint64N(16)
		// The stream.
		var w bitio.Writer
		switch rng.IntN(3) {
		case 0: // small residuals at random orders
			for range 2 * PoseLanes {
				w.WriteRice(rng.Uint64N(64), uint(rng.IntN(8)))
			}
		case 1: // residuals of every size
			for range 2 * PoseLanes {
				w.WriteRice(rng.Uint64()>>(2+rng.UintN(62)), uint(rng.IntN(8)))
			}
		default:
			for range 16 {
				w.WriteBits(rng.Uint64(), 64)
			}
		}
		stream := w.Bytes()
		if rng.IntN(4) == 0 {
			stream = stream[:rng.IntN(len(stream)+1)]
		}

		// The general path.
		sh := Shape{Set: 1 << id, Masks: []uint64{gm}}
		pred := LanePred{Lanes: append([]uint64(nil), v.Base...), Orders: make([]uint8, PoseLanes)}
		if v.Prev != nil {
			Predict(plans, &sh, &v, x, &cod, &pred)
		} else {
			PlainOrders(plans, sh.Set, &cod, pred.Orders)
		}
		var r1 bitio.Reader
		r1.Reset(stream)
		want := append([]uint64(nil), v.Base...)
		err1 := ReadDeltaBody(&r1, plans, &sh, want, &pred)

		var r2 bitio.Reader
		r2.Reset(stream)
		got := append([]uint64(nil), v.Base...)
		err2 := ReadPoseBody(&r2, p, gm, &v, x, &cod, got)

		require.Equal(t, fmt.Sprint(err1), fmt.Sprint(err2), "case %d", i)
		require.Equal(t, r1.BitPos(), r2.BitPos(), "case %d", i)
		require.Equal(t, want, got, "case %d", i)
		outcome := "ok"
		if err1 != nil {
			outcome = err1.Error()[:10]
		}
		outcomes[outcome]++
	}
	require.Greater(t, outcomes["ok"], 10000, "most records were read: %v", outcomes)
	require.Greater(t, len(outcomes), 2, "corrupt and short records were tried: %v", outcomes)
}
