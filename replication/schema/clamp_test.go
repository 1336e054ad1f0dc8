package schema

import (
	"math"
	"testing"
	"unsafe"

	"github.com/archenet/archenet/components"
	"github.com/stretchr/testify/require"
)

type clampee struct {
	HP    float32    `net:"range=0:100,step=1"`
	Level int16      `net:"range=0:60"`
	Big   uint64     `net:"range=0:1000"`
	Yaw   float64    `net:"angle,bits=10"`
	X     float64    `net:"world,step=0.001"`
	Rot   [4]float32 `net:"quat,bits=9"`
	Vel   [3]float64 `net:"vel,max=50,step=0.01"`
	Score int64      // varint: never clamps
	Raw   float64    `net:"raw"`
	Pad   [2]float64 `net:"range=-1:1,bits=8"`
}

func clampReg(t *testing.T) (*Registry, *Plan) {
	t.Helper()
	reg := NewRegistry()
	p, err := Register[clampee](reg, WithName("Clampee"))
	require.NoError(t, err)
	return reg, p
}

func quantizeClampee(p *Plan, v clampee) {
	lanes := make([]uint64, p.NumLanes())
	QuantizeValue(p, &v, lanes)
}

func TestClampNoneForRepresentableValues(t *testing.T) {
	reg, p := clampReg(t)
	for _, v := range []clampee{
		{},
		{HP: 100, Level: 60, Big: 1000, Yaw: 100, X: -1e9, Rot: [4]float32{0, 0, 0, 1}, Vel: [3]float64{50, -50, 0}, Score: math.MinInt64, Raw: math.NaN(), Pad: [2]float64{-1, 1}},
		{HP: 100.4, Level: 1, Yaw: -3, X: 1e-300, Rot: [4]float32{1, 2, 3, 4}, Vel: [3]float64{math.Copysign(0, -1), 1e-9, 0}},
		{HP: -0.4, Yaw: 1e300, Vel: [3]float64{50.004, 0, 0}},
	} {
		quantizeClampee(p, v)
	}
	require.Empty(t, reg.Clamps())
	require.Zero(t, reg.ClampGeneration())
}

func TestClampKinds(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	for _, tc := range []struct {
		name  string
		v     clampee
		field string
		want  ClampCount // OutOfRange, NaN, Inf
	}{
		{"scalar above", clampee{HP: 300}, "HP", ClampCount{OutOfRange: 1}},
		{"scalar below", clampee{HP: -1}, "HP", ClampCount{OutOfRange: 1}},
		{"scalar NaN", clampee{HP: float32(nan)}, "HP", ClampCount{NaN: 1}},
		{"scalar +Inf", clampee{HP: float32(inf)}, "HP", ClampCount{Inf: 1}},
		{"scalar -Inf", clampee{HP: float32(-inf)}, "HP", ClampCount{Inf: 1}},
		{"int above", clampee{Level: 61}, "Level", ClampCount{OutOfRange: 1}},
		{"int below", clampee{Level: -1}, "Level", ClampCount{OutOfRange: 1}},
		{"uint64 huge", clampee{Level: 1, Big: math.MaxUint64}, "Big", ClampCount{OutOfRange: 1}},
		{"angle NaN", clampee{Level: 1, Yaw: nan}, "Yaw", ClampCount{NaN: 1}},
		{"angle Inf", clampee{Level: 1, Yaw: -inf}, "Yaw", ClampCount{Inf: 1}},
		{"world far", clampee{Level: 1, X: 1e15}, "X", ClampCount{OutOfRange: 1}},
		{"world NaN", clampee{Level: 1, X: nan}, "X", ClampCount{NaN: 1}},
		{"world Inf", clampee{Level: 1, X: -inf}, "X", ClampCount{Inf: 1}},
		{"quat NaN", clampee{Level: 1, Rot: [4]float32{0, float32(nan), 0, 1}}, "Rot", ClampCount{NaN: 1}},
		{"quat Inf", clampee{Level: 1, Rot: [4]float32{0, float32(inf), 0, 1}}, "Rot", ClampCount{Inf: 1}},
		{"quat NaN and Inf", clampee{Level: 1, Rot: [4]float32{float32(inf), float32(nan), 0, 1}}, "Rot", ClampCount{NaN: 1}},
		{"vel above", clampee{Level: 1, Vel: [3]float64{0, 80, 0}}, "Vel", ClampCount{OutOfRange: 1}},
		{"vel NaN at rest", clampee{Level: 1, Vel: [3]float64{nan, 0, 0}}, "Vel", ClampCount{NaN: 1}},
		{"vel NaN moving", clampee{Level: 1, Vel: [3]float64{nan, 80, inf}}, "Vel", ClampCount{NaN: 1}},
		{"array element", clampee{Level: 1, Pad: [2]float64{0, 2}}, "Pad[1]", ClampCount{OutOfRange: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg, p := clampReg(t)
			quantizeClampee(p, tc.v)
			quantizeClampee(p, tc.v)
			want := tc.want
			want.Type, want.Field = "Clampee", tc.field
			want.OutOfRange, want.NaN, want.Inf = 2*want.OutOfRange, 2*want.NaN, 2*want.Inf
			require.Equal(t, []ClampCount{want}, reg.Clamps())
			require.Equal(t, uint64(2), reg.ClampGeneration())
			require.Equal(t, reg.Clamps(), p.Clamps())
		})
	}
}

func TestClampSeveralFields(t *testing.T) {
	reg, p := clampReg(t)
	quantizeClampee(p, clampee{HP: 300, Level: 99, X: math.NaN()})
	quantizeClampee(p, clampee{HP: float32(math.Inf(1)), Level: 1})
	require.Equal(t, []ClampCount{
		{Type: "Clampee", Field: "HP", OutOfRange: 1, Inf: 1},
		{Type: "Clampee", Field: "Level", OutOfRange: 1},
		{Type: "Clampee", Field: "X", NaN: 1},
	}, reg.Clamps())
	require.Equal(t, uint64(4), reg.ClampGeneration())
}

// The pose kernel (transform-shaped plans) counts like the interpreter.
func TestClampPoseKernel(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	reg := NewRegistry()
	p, err := Register[transform](reg, WithName("T"))
	require.NoError(t, err)
	require.NotNil(t, p.pose)
	lanes := make([]uint64, p.NumLanes())
	q := func(v transform) { p.quantize(unsafe.Pointer(&v), lanes) }
	q(transform{})                                              // origin, zero rotation: no clamp
	q(transform{Pos: components.Vec3{X: 1.125899906842624e12}}) // exactly the limit
	require.Empty(t, reg.Clamps())
	q(transform{Pos: components.Vec3{X: 1e15, Y: -inf, Z: nan}})
	q(transform{Rot: components.Quat{X: nan, W: 1}})
	q(transform{Rot: components.Quat{Z: inf, W: 1}})
	require.Equal(t, []ClampCount{
		{Type: "T", Field: "Pos.X", OutOfRange: 1},
		{Type: "T", Field: "Pos.Y", Inf: 1},
		{Type: "T", Field: "Pos.Z", NaN: 1},
		{Type: "T", Field: "Rot", NaN: 1, Inf: 1},
	}, reg.Clamps())
	require.Equal(t, uint64(5), reg.ClampGeneration())
}

// Concurrent quantization with one plan counts every clamp (run with -race).
func TestClampConcurrent(t *testing.T) {
	reg, p := clampReg(t)
	done := make(chan struct{})
	for range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for range 100 {
				quantizeClampee(p, clampee{HP: 300, Level: 1})
			}
		}()
	}
	for range 4 {
		<-done
	}
	require.Equal(t, []ClampCount{{Type: "Clampee", Field: "HP", OutOfRange: 400}}, reg.Clamps())
}
