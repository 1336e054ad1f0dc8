package schema

import (
	"math"
	"testing"
	"unsafe"

	"github.com/archenet/archenet/components"
	"github.com/stretchr/testify/require"
)

type blend struct {
	X     float64         `net:"range=-100:100,step=0.01"`
	Yaw   float32         `net:"angle,bits=12"`
	Where components.Vec3 `net:"world,step=0.001"`
	Rot   components.Quat `net:"quat,bits=10"`
	HP    int16           `net:"range=0:100"`
	Alive bool
	Raw   float64 `net:"raw"`
}

func quantized(t *testing.T, p *Plan, v blend) []uint64 {
	t.Helper()
	l := make([]uint64, p.NumLanes())
	p.quantize(unsafe.Pointer(&v), l)
	return l
}

// Plan.Interpolate blends each field by its kind between two quantized
// states: floats and positions linearly (extrapolating past 1), angles the
// short way round, quaternions by slerp, integers and bools stepping at 1.
func TestPlanInterpolate(t *testing.T) {
	reg := NewRegistry()
	p := MustRegister[blend](reg)
	require.True(t, p.Interpolable())
	rot := func(a float64) components.Quat { return components.QuatAxisAngle(components.Vec3{Y: 1}, a) }
	a := quantized(t, p, blend{X: -10, Yaw: 3.0, Where: components.Vec3{X: 1000, Y: 1, Z: -5}, Rot: rot(0.2), HP: 10, Alive: true, Raw: 1})
	b := quantized(t, p, blend{X: 10, Yaw: -3.0, Where: components.Vec3{X: 1002, Y: 1, Z: -7}, Rot: rot(0.6), HP: 90, Alive: false, Raw: 3})
	var got blend
	at := func(f float64) blend {
		p.interpolate(a, b, f, unsafe.Pointer(&got))
		return got
	}
	mid := at(0.5)
	require.InDelta(t, 0, mid.X, 1e-9)
	require.InDelta(t, math.Pi, math.Abs(float64(mid.Yaw)), 2e-3, "3.0 → −3.0 passes through ±π, not 0")
	require.InDelta(t, 1001, mid.Where.X, 1e-9)
	require.InDelta(t, -6, mid.Where.Z, 1e-9)
	require.InDelta(t, 0.4, 2*math.Acos(math.Min(1, math.Abs(mid.Rot.W))), 2e-3, "slerp halfway")
	require.Equal(t, int16(10), mid.HP, "integers hold until 1")
	require.True(t, mid.Alive)
	require.Equal(t, 2.0, mid.Raw)

	quarter := at(0.25)
	require.InDelta(t, -5, quarter.X, 1e-9, "not snapped to the 0.01 grid: exactly a quarter")

	end := at(1)
	require.Equal(t, int16(90), end.HP)
	require.False(t, end.Alive)
	require.InDelta(t, 10, end.X, 1e-9)

	ext := at(1.5)
	require.InDelta(t, 20, ext.X, 1e-9, "extrapolates")
	require.InDelta(t, 1003, ext.Where.X, 1e-9)
	require.InDelta(t, math.Remainder(3.0+(2*math.Pi-6.0)*1.5, 2*math.Pi), float64(ext.Yaw), 5e-3, "the angle keeps turning and wraps")
	require.GreaterOrEqual(t, float64(ext.Yaw), -math.Pi)
	require.Less(t, float64(ext.Yaw), math.Pi)

	zero := at(0)
	var want blend
	p.dequantize(a, unsafe.Pointer(&want))
	require.Equal(t, want, zero, "f = 0 is a's dequantized value")
}

// A component of only integers and bools has nothing to blend.
func TestPlanInterpolableNeedsAContinuousField(t *testing.T) {
	type counters struct {
		N  uint16 `net:"range=0:1000"`
		On bool
	}
	reg := NewRegistry()
	require.False(t, MustRegister[counters](reg).Interpolable())
}
