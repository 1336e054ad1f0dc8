package quant_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/interp"
	"github.com/archenet/archenet/replication/internal/quant"
)

// The game's quaternion slerp (components.Slerp, which cannot import this
// package) gives the same bits as the one replication applies to quaternion
// lanes, so a game that interpolates its own copies draws what replication
// would.
func TestSlerpAgreesWithComponents(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	randQuat := func() components.Quat {
		return components.Quat{X: rng.NormFloat64(), Y: rng.NormFloat64(), Z: rng.NormFloat64(), W: rng.NormFloat64()}.Normalize()
	}
	cases := [][2]components.Quat{
		{components.QuatIdentity(), components.QuatIdentity()},
		{components.QuatIdentity(), {W: -1}},
		{{}, {}},
		{{X: math.NaN()}, components.QuatIdentity()},
	}
	for range 2000 {
		a := randQuat()
		b := randQuat()
		cases = append(cases, [2]components.Quat{a, b})
		// Nearly equal ones take the linear branch.
		near := components.Quat{X: a.X + 1e-4*rng.NormFloat64(), Y: a.Y, Z: a.Z, W: a.W}.Normalize()
		cases = append(cases, [2]components.Quat{a, near})
	}
	for i, c := range cases {
		for _, f := range []float64{0, 0.25, 0.5, 0.9, 1, 1.5, -0.5} {
			a, b := c[0], c[1]
			want := quant.Slerp([4]float64{a.X, a.Y, a.Z, a.W}, [4]float64{b.X, b.Y, b.Z, b.W}, f)
			got := components.Slerp(a, b, f)
			require.Equal(t, [4]uint64{math.Float64bits(want[0]), math.Float64bits(want[1]), math.Float64bits(want[2]), math.Float64bits(want[3])},
				[4]uint64{math.Float64bits(got.X), math.Float64bits(got.Y), math.Float64bits(got.Z), math.Float64bits(got.W)}, "case %d at %v", i, f)
		}
	}
}

// Every angle a replicated field decodes to is its own wrap (interp.WrapAngle),
// so interpolation never sees a jump of 2π between equal angles.
func TestDecodedAnglesAreWrapped(t *testing.T) {
	a, err := quant.NewAngle(9)
	require.NoError(t, err)
	for q := range uint64(512) {
		v := a.Dequantize(q)
		require.Equal(t, v, interp.WrapAngle(v), "code %d", q)
	}
}
