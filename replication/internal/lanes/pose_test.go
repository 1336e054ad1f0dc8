package lanes

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/internal/codec"
	"github.com/archenet/archenet/replication/internal/wire"
	"github.com/archenet/archenet/replication/schema"
	"github.com/stretchr/testify/require"
)

// The pose kernel finds the same changed groups and writes the same body
// bits, and measures the same things, as the general lane loop, on random
// poses near and past every bound: the linear and quadratic extrapolation
// limits (2^40 steps, 256 ticks), the residual limit (2^62), a changed
// quaternion index, every number of views and both quad settings, under
// random codings, for owners and others, with bit accounting on. Records
// of one pose take the kernel's shortcuts; records of a pose and a
// velocity go through the component loop, which calls it; poses with
// owner-only groups take the general masks.
func TestPoseBodyMatchesGeneral(t *testing.T) {
	t.Run("pose", func(t *testing.T) { checkPoseKernel[benchTransform](t, false) })
	t.Run("pose+velocity", func(t *testing.T) { checkPoseKernel[benchTransform](t, true) })
	t.Run("owner-only rotation", func(t *testing.T) { checkPoseKernel[poseOwnRot](t, false) })
	t.Run("owner-only position", func(t *testing.T) { checkPoseKernel[poseOwnPos](t, true) })
}

type poseOwnRot struct {
	Pos components.Vec3 `net:"world,step=0.001"`
	Rot components.Quat `net:"quat,bits=10,owner"`
}

type poseOwnPos struct {
	Pos components.Vec3 `net:"world,step=0.001,owner"`
	Rot components.Quat `net:"quat,bits=9"`
}

// Plans that look like a pose but are not one do not take the kernel.
func TestNearPosesAreNotPoses(t *testing.T) {
	type scalars struct {
		Pos [3]float64      `net:"range=-100:100,step=0.01"`
		Rot components.Quat `net:"quat,bits=10"`
	}
	type angles struct {
		Yaw, Pitch, Roll float64         `net:"angle,bits=12"`
		Rot              components.Quat `net:"quat,bits=10"`
	}
	type posVel struct {
		Pos components.Vec3 `net:"world,step=0.001"`
		Vel components.Vec3 `net:"vel,max=100,step=0.01"`
	}
	type rotFirst struct {
		Rot components.Quat `net:"quat,bits=10"`
		Pos components.Vec3 `net:"world,step=0.001"`
	}
	reg := schema.NewRegistry()
	schema.MustRegister[benchTransform](reg)
	schema.MustRegister[scalars](reg)
	schema.MustRegister[angles](reg)
	schema.MustRegister[posVel](reg)
	schema.MustRegister[rotFirst](reg)
	schema.MustRegister[components.Velocity](reg)
	e := newTestCoder(reg)
	require.True(t, e.ops[0].pose)
	for i, po := range e.ops[1:] {
		require.False(t, po.pose, "plan %d", i+1)
	}
	// The receiver's pose reader takes the same plans.
	for i, p := range reg.Plans() {
		require.Equal(t, e.ops[i].pose, codec.IsPose(p), "plan %d", i)
	}
}

func checkPoseKernel[P any](t *testing.T, withVel bool) {
	reg := schema.NewRegistry()
	schema.MustRegister[P](reg)
	set := uint64(1)
	if withVel {
		schema.MustRegister[components.Velocity](reg)
		set = 3
	}
	e := newTestCoder(reg)
	e.Account = true
	require.True(t, e.ops[0].pose, "a pose")
	nl := poseLanes
	if withVel {
		require.False(t, e.ops[1].pose)
		nl += e.ops[1].n
	}
	rng := rand.New(rand.NewPCG(7, 8))
	lane := func(base uint64) uint64 {
		switch rng.IntN(10) {
		case 0:
			return rng.Uint64() // anything: past every limit
		case 1:
			return base + uint64(int64(1<<40)-2+rng.Int64N(5)) // at the extrapolation bound
		case 2:
			return base - uint64(int64(1<<40)-2+rng.Int64N(5))
		case 3:
			return base + uint64(int64(1<<61)-2+rng.Int64N(5)) // at the residual bound
		case 4, 5, 6:
			return base // unchanged
		default:
			return base + uint64(rng.Int64N(2001)-1000)
		}
	}
	vals := func(base []uint64) []uint64 {
		v := make([]uint64, nl)
		for l := range v {
			v[l] = lane(base[l])
		}
		v[3] = base[3] // the quaternion index: mostly kept
		if rng.IntN(4) == 0 {
			v[3] = rng.Uint64N(4)
		}
		return v
	}
	run := func(pose bool, gms []uint64, b, c, v2, v3 []uint64, quad bool, num, den int64) (string, Result, Stats, bool) {
		e.ops[0].pose = pose
		e.gmasks = append(e.gmasks[:0], gms...)
		e.Arena.Reset(nil)
		var st Stats
		r, ok := e.testBody(set, codec.Views{Base: b, Prev: v2, Third: v3, Cur: c}, codec.Extrap{Num: num, Den: den, Quad: quad}, &st)
		n := e.Arena.BitLen()
		return fmt.Sprint(n, e.Arena.Bytes(), e.compBody), r, st, ok
	}
	masks := func(pose, owner bool, b, c, v2 []uint64) string {
		e.ops[0].pose = pose
		e.Arena.Reset(nil)
		mask, pred := e.DeltaMasks(set, b, v2, c, owner)
		n := e.Arena.BitLen()
		return fmt.Sprint(mask, pred, e.gmasks, n, e.Arena.Bytes())
	}
	fails := 0
	for i := range 40000 {
		e.SetCoding(wire.Coding{
			Off:   [wire.NumClasses]int8{int8(wire.MinCodeOff + rng.IntN(wire.MaxCodeOff-wire.MinCodeOff+1)), int8(wire.MinCodeOff + rng.IntN(wire.MaxCodeOff-wire.MinCodeOff+1))},
			Cap:   [wire.NumClasses]uint8{uint8(rng.IntN(wire.MaxCodeCap + 1)), uint8(rng.IntN(wire.MaxCodeCap + 1))},
			Plain: [wire.NumClasses]uint8{uint8(rng.IntN(wire.MaxCodeCap + 1)), uint8(rng.IntN(wire.MaxCodeCap + 1))},
		}, false)
		origin := make([]uint64, nl)
		for l := range origin {
			origin[l] = rng.Uint64() >> rng.UintN(64)
		}
		origin[3] = rng.Uint64N(4)
		w3 := vals(origin)
		v2 := vals(w3)
		b := vals(v2)
		c := vals(b)
		switch rng.IntN(3) {
		case 0:
			v2, w3 = nil, nil
		case 1:
			w3 = nil
		}
		for _, pair := range [][2][]uint64{{b, c}, {w3, v2}} {
			if pair[0] != nil {
				require.Equal(t, e.ops[0].groupsOf(laneDiff(pair[0][:poseLanes], pair[1][:poseLanes])), codec.PoseGroups(pair[0], pair[1]), "case %d", i)
			}
		}
		owner := rng.IntN(2) == 0
		require.Equal(t, masks(false, owner, b, c, v2), masks(true, owner, b, c, v2), "case %d", i)
		gms := []uint64{rng.Uint64N(16)}
		if !owner {
			gms[0] &= e.ops[0].visible // (deltaMasks leaves owner-only groups out)
		}
		if withVel {
			gms = append(gms, rng.Uint64()&e.ops[1].allGroups)
		}
		quad := rng.IntN(2) == 0
		num, den := 1+rng.Int64N(8), 1+rng.Int64N(6)
		if rng.IntN(20) == 0 { // around the quadratic extrapolation's bound
			num = 250 + rng.Int64N(10)
		}
		if rng.IntN(20) == 0 {
			den = 250 + rng.Int64N(10)
		}
		wantBits, wantR, wantSt, wantOK := run(false, gms, b, c, v2, w3, quad, num, den)
		gotBits, gotR, gotSt, gotOK := run(true, gms, b, c, v2, w3, quad, num, den)
		require.Equal(t, wantOK, gotOK, "case %d", i)
		if !wantOK {
			fails++ // (the same partial body, truncated by the caller)
		}
		require.Equal(t, wantBits, gotBits, "case %d", i)
		require.Equal(t, wantR, gotR, "case %d", i)
		require.Equal(t, wantSt, gotSt, "case %d", i)
	}
	require.Greater(t, fails, 400, "residuals past the limit were tried")
	require.Less(t, fails, 30000, "most cases were coded")
}

// A record without components (which no decoder takes, but a world may
// hold) encodes empty masks and body rather than panicking.
func TestDeltaOfNoComponents(t *testing.T) {
	reg := schema.NewRegistry()
	schema.MustRegister[benchTransform](reg)
	e := newTestCoder(reg)
	var st Stats
	mask, pred := e.DeltaMasks(0, nil, nil, nil, false)
	require.Zero(t, mask)
	require.False(t, pred)
	_, ok := e.testBody(0, codec.Views{}, codec.Extrap{Num: 1, Den: 1, Quad: false}, &st)
	require.True(t, ok)
	require.Zero(t, e.Arena.BitLen())
}

// testBody runs deltaBody on views v with prediction x.
func (e *Coder) testBody(set uint64, v codec.Views, x codec.Extrap, st *Stats) (Result, bool) {
	c := bodyCtx{Extrap: x, st: st}
	ok := e.deltaBody(set, &v, &c)
	return c.res, ok
}

// newTestCoder returns a lane coder for reg's components.
func newTestCoder(reg *schema.Registry) *Coder {
	lc := New(reg.Plans())
	return &lc
}

type benchTransform struct {
	Pos components.Vec3 `net:"world,step=0.001"`
	Rot components.Quat `net:"quat,bits=10"`
}
