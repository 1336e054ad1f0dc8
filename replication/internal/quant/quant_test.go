package quant

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

var specials = []float64{math.NaN(), math.Inf(1), math.Inf(-1), math.MaxFloat64, -math.MaxFloat64, math.SmallestNonzeroFloat64, math.Copysign(0, -1)}

func TestScalarStepErrorBound(t *testing.T) {
	s, err := NewScalarStep(-2048, 2048, 1.0/256)
	require.NoError(t, err)
	// [−2048, 2048] inclusive at 1/256 m is 2^20 + 1 values: 21 bits.
	require.Equal(t, uint(21), s.Bits())
	require.Equal(t, uint64(1<<20), s.MaxQ())
	s20, err := NewScalarBits(-2048, 2048, 20) // one bit less, a hair coarser
	require.NoError(t, err)
	require.Less(t, s20.Step(), 1.0/256*1.000001)
	require.Equal(t, 0.0, s.Round(0)) // 0 is exact when min is a multiple of step
	rng := rand.New(rand.NewPCG(7, 7))
	for i := 0; i < 100_000; i++ {
		v := -2048 + 4096*rng.Float64()
		require.LessOrEqual(t, math.Abs(s.Round(v)-v), s.MaxError()*(1+1e-9), "v=%v", v)
	}
	require.Equal(t, uint64(0), s.Quantize(-5000))
	require.Equal(t, s.MaxQ(), s.Quantize(5000))
	require.Equal(t, 2048.0, s.Max())
}

func TestScalarBits(t *testing.T) {
	s, err := NewScalarBits(0, 1, 8)
	require.NoError(t, err)
	require.Equal(t, uint64(255), s.MaxQ())
	require.Equal(t, 0.0, s.Dequantize(0))
	require.Equal(t, 1.0, s.Dequantize(255))
	require.Equal(t, uint64(128), s.Quantize(0.5)) // 127.5 rounds up
	require.InDelta(t, 1.0/510, s.MaxError(), 1e-15)
	rng := rand.New(rand.NewPCG(1, 1))
	for i := 0; i < 10000; i++ {
		v := rng.Float64()
		require.LessOrEqual(t, math.Abs(s.Round(v)-v), s.MaxError()*(1+1e-9))
	}
	require.Equal(t, 1.0, s.Dequantize(1000)) // corrupt codes clamp
}

func TestScalarSpecials(t *testing.T) {
	s, err := NewScalarStep(-10, 30, 0.5)
	require.NoError(t, err)
	require.Equal(t, 0.0, s.Round(math.NaN()), "NaN is treated as 0")
	require.Equal(t, s.Max(), s.Round(math.Inf(1)))
	require.Equal(t, s.Min(), s.Round(math.Inf(-1)))
	pos, err := NewScalarStep(5, 10, 0.5)
	require.NoError(t, err)
	require.Equal(t, 5.0, pos.Round(math.NaN()), "NaN → 0 clamped into range")
	for _, v := range specials {
		q := s.Quantize(v)
		require.LessOrEqual(t, q, s.MaxQ())
	}
}

func TestScalarBadParams(t *testing.T) {
	for _, f := range []func() error{
		func() error { _, err := NewScalarStep(1, 1, 0.1); return err },
		func() error { _, err := NewScalarStep(0, 1, 0); return err },
		func() error { _, err := NewScalarStep(0, math.Inf(1), 1); return err },
		func() error { _, err := NewScalarStep(0, 1e12, 1e-3); return err },
		func() error { _, err := NewScalarBits(0, 1, 0); return err },
		func() error { _, err := NewScalarBits(0, 1, 33); return err },
		func() error { _, err := NewScalarBits(math.NaN(), 1, 8); return err },
		func() error { _, err := NewSymmetric(-1, 0.1); return err },
		func() error { _, err := NewSymmetricBits(1, 1); return err },
		func() error { _, err := NewAngle(1); return err },
		func() error { _, err := NewQuat(3); return err },
		func() error { _, err := NewQuat(21); return err },
		func() error { _, err := NewGrid(0, 16); return err },
		func() error { _, err := NewGrid(0.001, 0); return err },
		func() error { _, err := NewInt(5, 4); return err },
		func() error { _, err := NewVelocity(10, 0.01, math.NaN()); return err },
	} {
		require.ErrorIs(t, f(), ErrBadParams)
	}
}

func TestSymmetricZeroExact(t *testing.T) {
	for _, c := range []struct{ limit, step float64 }{{50, 0.01}, {1, 0.3}, {3.3, 1}} {
		s, err := NewSymmetric(c.limit, c.step)
		require.NoError(t, err)
		require.Equal(t, 0.0, s.Round(0))
		require.Equal(t, 0.0, s.Dequantize(s.MaxQ()/2))
		require.GreaterOrEqual(t, s.Max(), c.limit)
		require.LessOrEqual(t, s.Min(), -c.limit)
	}
	s, err := NewSymmetricBits(10, 12)
	require.NoError(t, err)
	require.Equal(t, 0.0, s.Round(0))
	require.Equal(t, 10.0, s.Max())
	require.Equal(t, uint(12), s.Bits())
}

func TestAngleWrap(t *testing.T) {
	a, err := NewAngle(9)
	require.NoError(t, err)
	require.Equal(t, uint64(0), a.Quantize(2*math.Pi))
	require.Equal(t, a.Quantize(0.1), a.Quantize(0.1+4*math.Pi))
	require.Equal(t, a.Quantize(-0.1), a.Quantize(2*math.Pi-0.1))
	require.Equal(t, -math.Pi, a.Dequantize(256))
	rng := rand.New(rand.NewPCG(2, 2))
	for i := 0; i < 100_000; i++ {
		th := (rng.Float64() - 0.5) * 40
		d := math.Abs(wrapAngle(a.Dequantize(a.Quantize(th)) - th))
		require.LessOrEqual(t, d, a.MaxError()*(1+1e-9), "θ=%v", th)
	}
	require.Equal(t, int64(2), a.Delta(511, 1))
	require.Equal(t, int64(-2), a.Delta(1, 511))
	for _, v := range specials {
		require.Less(t, a.Quantize(v), uint64(512))
	}
}

func randomUnitQuat(rng *rand.Rand) (x, y, z, w float64) {
	for {
		x, y, z, w = rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()
		n := math.Sqrt(x*x + y*y + z*z + w*w)
		if n > 1e-6 {
			return x / n, y / n, z / n, w / n
		}
	}
}

func worstQuatErrorDeg(t *testing.T, bits uint, count int) float64 {
	qc, err := NewQuat(bits)
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(42, uint64(bits)))
	worst := 0.0
	for i := 0; i < count; i++ {
		x, y, z, w := randomUnitQuat(rng)
		l, a, b, c := qc.Quantize(x, y, z, w)
		x2, y2, z2, w2 := qc.Dequantize(l, a, b, c)
		require.InDelta(t, 1.0, x2*x2+y2*y2+z2*z2+w2*w2, 1e-12)
		worst = math.Max(worst, QuatAngle(x, y, z, w, x2, y2, z2, w2)*180/math.Pi)
	}
	return worst
}

func TestQuatErrorPublishedFigures(t *testing.T) {
	w9 := worstQuatErrorDeg(t, 9, 100_000)
	w10 := worstQuatErrorDeg(t, 10, 100_000)
	t.Logf("smallest-three worst error over 100k: 9 bits %.3f°, 10 bits %.3f°", w9, w10)
	require.LessOrEqual(t, w9, 0.49) // published figure for plain rounding
	require.LessOrEqual(t, w10, 0.23)
	require.LessOrEqual(t, w9, 0.30) // ours, with error-minimizing rounding
	require.LessOrEqual(t, w10, 0.15)
	w7 := worstQuatErrorDeg(t, 7, 20_000)
	w15 := worstQuatErrorDeg(t, 15, 20_000)
	require.Greater(t, w7, w9)
	require.Less(t, w15, 0.01)
}

func TestQuatSignAndTieBreak(t *testing.T) {
	qc, err := NewQuat(10)
	require.NoError(t, err)
	// q and −q encode identically.
	l1, a1, b1, c1 := qc.Quantize(0.1, -0.7, 0.2, 0.6)
	l2, a2, b2, c2 := qc.Quantize(-0.1, 0.7, -0.2, -0.6)
	require.Equal(t, [4]uint64{l1, a1, b1, c1}, [4]uint64{l2, a2, b2, c2})
	require.Equal(t, uint64(1), l1)
	// Each component can be the largest, including negative ones.
	for i := 0; i < 4; i++ {
		v := [4]float64{0.1, 0.1, 0.1, 0.1}
		v[i] = -0.95
		l, a, b, c := qc.Quantize(v[0], v[1], v[2], v[3])
		require.Equal(t, uint64(i), l)
		x, y, z, w := qc.Dequantize(l, a, b, c)
		n := math.Sqrt(0.95*0.95 + 3*0.01)
		require.Less(t, QuatAngle(v[0]/n, v[1]/n, v[2]/n, v[3]/n, x, y, z, w), 0.005)
	}
	// Exact ties drop the lowest index.
	h := math.Sqrt2 / 2
	l, _, _, _ := qc.Quantize(0, h, 0, h)
	require.Equal(t, uint64(1), l)
	l, _, _, _ = qc.Quantize(0.5, 0.5, 0.5, 0.5)
	require.Equal(t, uint64(0), l)
	// Degenerate input encodes as the identity.
	for _, v := range specials {
		l, a, b, c := qc.Quantize(v, 0, 0, 0)
		x, y, z, w := qc.Dequantize(l, a, b, c)
		for _, f := range []float64{x, y, z, w} {
			require.False(t, math.IsNaN(f) || math.IsInf(f, 0))
		}
	}
	l, a, b, c := qc.Quantize(0, 0, 0, 0)
	x, y, z, w := qc.Dequantize(l, a, b, c)
	require.Less(t, QuatAngle(0, 0, 0, 1, x, y, z, w), 1e-7) // identity is exact
	// Corrupt codes still decode to a finite unit quaternion.
	x, y, z, w = qc.Dequantize(7, 1<<20, 1<<20, 1<<20)
	require.InDelta(t, 1.0, x*x+y*y+z*z+w*w, 1e-12)
}

func TestGridPrecisionEverywhere(t *testing.T) {
	g, err := NewGrid(0.001, 16)
	require.NoError(t, err)
	require.InDelta(t, 65.536, g.CellSize(), 1e-12)
	rng := rand.New(rand.NewPCG(9, 9))
	for _, center := range []float64{0, 1e3, -1e3, 1e6, -1e6, 123456789.0} {
		worst := 0.0
		for i := 0; i < 20_000; i++ {
			v := center + (rng.Float64()-0.5)*200
			e := math.Abs(g.Dequantize(g.Quantize(v)) - v)
			worst = math.Max(worst, e)
		}
		require.LessOrEqual(t, worst, g.MaxError()*(1+1e-6), "center %v", center)
	}
	// Split/Join round trip, including negative coordinates.
	for _, v := range []float64{-1e6, -0.0005, 0, 65.5359, 65.536, 1e6} {
		q := g.Quantize(v)
		c, off := g.Split(q)
		q2, ok := g.Join(c, off)
		require.True(t, ok)
		require.Equal(t, q, q2)
		require.InDelta(t, g.Origin(c)+float64(off)*g.Step(), g.Dequantize(q), 1e-9)
	}
	_, ok := g.Join(1<<40, 0)
	require.False(t, ok)
	_, ok = g.Join(0, 1<<16)
	require.False(t, ok)
	require.Equal(t, int64(0), g.Quantize(math.NaN()))
	require.Equal(t, GridLimitSteps, g.Quantize(math.Inf(1)))
	require.Equal(t, -GridLimitSteps, g.Quantize(math.Inf(-1)))
	require.Equal(t, GridLimitSteps, g.Quantize(1e300))
}

func TestVelocityRest(t *testing.T) {
	v, err := NewVelocity(50, 0.01, 0.02)
	require.NoError(t, err)
	rest, qx, qy, qz := v.Quantize(0.01, -0.015, 0)
	require.True(t, rest)
	x, y, z := v.Dequantize(rest, qx, qy, qz)
	require.Equal(t, [3]float64{0, 0, 0}, [3]float64{x, y, z})
	rest, qx, qy, qz = v.Quantize(3.14159, 0, -60)
	require.False(t, rest)
	x, y, z = v.Dequantize(rest, qx, qy, qz)
	require.InDelta(t, 3.14159, x, v.MaxError()+1e-12)
	require.Equal(t, 0.0, y)
	require.InDelta(t, -50, z, 1e-9) // clamped
	rest, _, _, _ = v.Quantize(math.NaN(), math.NaN(), 0)
	require.True(t, rest)
	d, err := NewVelocityBits(20, 10, 0)
	require.NoError(t, err)
	require.InDelta(t, d.Axis().Step()/2, d.Rest(), 1e-15)
}

func TestIntRange(t *testing.T) {
	r, err := NewInt(-3, 4)
	require.NoError(t, err)
	require.Equal(t, uint(3), r.Bits())
	require.Equal(t, uint64(0), r.Quantize(-100))
	require.Equal(t, uint64(7), r.Quantize(100))
	require.Equal(t, int64(2), r.Dequantize(r.Quantize(2)))
	require.Equal(t, int64(4), r.Dequantize(99))
	one, err := NewInt(5, 5)
	require.NoError(t, err)
	require.Equal(t, uint(0), one.Bits())
	full, err := NewInt(math.MinInt64, math.MaxInt64)
	require.NoError(t, err)
	require.Equal(t, uint(64), full.Bits())
	require.Equal(t, int64(math.MinInt64), full.Dequantize(full.Quantize(math.MinInt64)))
	require.Equal(t, int64(-1), full.Dequantize(full.Quantize(-1)))
	b, err := NewInt(0, 255)
	require.NoError(t, err)
	require.Equal(t, uint(8), b.Bits())
	e, err := NewInt(0, 5) // a 6-value enum
	require.NoError(t, err)
	require.Equal(t, uint(3), e.Bits())
}

// Quantizing a dequantized rotation again gives the same codes (a server
// that rounds its state every tick does not drift; mirrors compare equal).
func TestQuatRequantizeStable(t *testing.T) {
	for _, bits := range []uint{9, 10, 12} {
		qc, err := NewQuat(bits)
		require.NoError(t, err)
		check := func(x, y, z, w float64) {
			l, a, b, c := qc.Quantize(x, y, z, w)
			x2, y2, z2, w2 := qc.Dequantize(l, a, b, c)
			l2, a2, b2, c2 := qc.Quantize(x2, y2, z2, w2)
			require.Equal(t, [4]uint64{l, a, b, c}, [4]uint64{l2, a2, b2, c2}, "bits %d q %v %v %v %v", bits, x, y, z, w)
		}
		// A yaw sweep crosses |y| = |w| (the case that used to flip index).
		for i := 0; i < 200_000; i++ {
			s, c := math.Sincos(float64(i) * 2 * math.Pi / 200_000 / 2)
			check(0, s, 0, c)
		}
		rng := rand.New(rand.NewPCG(5, uint64(bits)))
		for i := 0; i < 100_000; i++ {
			check(randomUnitQuat(rng))
		}
	}
}

// Quaternions far from unit length, tiny or huge, encode like their
// normalized selves; normalizing them once is enough.
func TestQuatNonUnitInput(t *testing.T) {
	qc, err := NewQuat(10)
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(9, 9))
	for i := 0; i < 2000; i++ {
		x, y, z, w := randomUnitQuat(rng)
		l, a, b, c := qc.Quantize(x, y, z, w)
		for _, k := range []float64{1e-300, 1e-160, 1e-5, 0.999, 1.001, 3, 1e150, 1e300} {
			l2, a2, b2, c2 := qc.Quantize(x*k, y*k, z*k, w*k)
			x2, y2, z2, w2 := qc.Dequantize(l2, a2, b2, c2)
			require.Less(t, QuatAngle(x, y, z, w, x2, y2, z2, w2)*180/math.Pi, 0.15, "scale %g", k)
			if k > 1e-5 && k < 1e5 {
				require.Equal(t, [4]uint64{l, a, b, c}, [4]uint64{l2, a2, b2, c2}, "scale %g", k)
			}
		}
	}
	for _, c := range []struct{ in, want [4]float64 }{
		{[4]float64{math.SmallestNonzeroFloat64, 0, 0, 0}, [4]float64{1, 0, 0, 0}},
		{[4]float64{0, 0, 0, math.MaxFloat64}, [4]float64{0, 0, 0, 1}},
		{[4]float64{math.MaxFloat64, math.MaxFloat64, -math.MaxFloat64, math.MaxFloat64}, [4]float64{0.5, 0.5, -0.5, 0.5}},
	} {
		l, a, b, cc := qc.Quantize(c.in[0], c.in[1], c.in[2], c.in[3])
		l2, a2, b2, c2 := qc.Quantize(c.want[0], c.want[1], c.want[2], c.want[3])
		require.Equal(t, [4]uint64{l2, a2, b2, c2}, [4]uint64{l, a, b, cc}, "%v", c.in)
	}
}

// wrapAngle returns θ wrapped into [−π, π) (interp.WrapAngle for users).
func wrapAngle(theta float64) float64 {
	return theta - 2*math.Pi*math.Floor((theta+math.Pi)/(2*math.Pi))
}
