package quant

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestClamped(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	s, err := NewScalarStep(0, 100, 1)
	require.NoError(t, err)
	for v, want := range map[float64]Clamp{0: ClampNone, 100: ClampNone, -0.49: ClampNone, 100.49: ClampNone,
		-0.51: ClampRange, 100.51: ClampRange, 300: ClampRange, nan: ClampNaN, inf: ClampInf, -inf: ClampInf} {
		require.Equal(t, want, s.Clamped(v), "%v", v)
		if want != ClampNone {
			q := s.Quantize(v)
			require.True(t, q == 0 || q == s.MaxQ(), "a clamp gives an end code")
		}
	}
	require.Equal(t, ClampNaN, s.Clamped(nan))

	w, err := NewGrid(0.001, 16)
	require.NoError(t, err)
	lim := float64(GridLimitSteps) * 0.001
	for v, want := range map[float64]Clamp{0: ClampNone, lim: ClampNone, -lim: ClampNone, 1e15: ClampRange, -1e15: ClampRange, inf: ClampInf, -inf: ClampInf} {
		require.Equal(t, want, w.Clamped(v), "%v", v)
		if want != ClampNone {
			require.Zero(t, w.Quantize(v)&(GridLimitSteps-1))
		}
	}
	require.Equal(t, ClampNaN, w.Clamped(nan))

	a, err := NewAngle(10)
	require.NoError(t, err)
	require.Equal(t, ClampNone, a.Clamped(1e300))
	require.Equal(t, ClampNaN, a.Clamped(nan))
	require.Equal(t, ClampInf, a.Clamped(-inf))

	r, err := NewInt(-5, 5)
	require.NoError(t, err)
	require.Equal(t, ClampNone, r.Clamped(5))
	require.Equal(t, ClampRange, r.Clamped(6))

	q, err := NewQuat(9)
	require.NoError(t, err)
	for _, tc := range []struct {
		x, y, z, w float64
		want       Clamp
	}{{0, 0, 0, 1, ClampNone}, {0, 0, 0, 0, ClampNone}, {1, 2, 3, 4, ClampNone}, {nan, 0, 0, 1, ClampNaN}, {0, -inf, 0, 1, ClampInf}, {inf, nan, 0, 0, ClampNaN}} {
		l, b, c, d, cl := q.QuantizeClamp(tc.x, tc.y, tc.z, tc.w)
		require.Equal(t, tc.want, cl)
		l2, b2, c2, d2 := q.Quantize(tc.x, tc.y, tc.z, tc.w)
		require.Equal(t, [4]uint64{l, b, c, d}, [4]uint64{l2, b2, c2, d2})
	}

	vel, err := NewVelocity(10, 0.01, 0)
	require.NoError(t, err)
	_, _, _, _, c := vel.QuantizeClamp(1, 2, 3)
	require.Equal(t, ClampNone, c)
	_, _, _, _, c = vel.QuantizeClamp(1, 20, 3)
	require.Equal(t, ClampRange, c)
	_, _, _, _, c = vel.QuantizeClamp(nan, 0, 0)
	require.Equal(t, ClampNaN, c)
	require.Equal(t, "out-of-range", ClampRange.String())
}
