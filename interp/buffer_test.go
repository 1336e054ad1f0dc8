package interp_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/interp"
)

func vx(x float64) components.Vec3 { return components.Vec3{X: x} }

var yAxis = components.Vec3{Y: 1}

func ticks(b *interp.Buffer) []uint32 {
	var out []uint32
	for i := range b.Len() {
		out = append(out, b.At(i).Tick)
	}
	return out
}

func TestBufferPushOrderDuplicatesTooOld(t *testing.T) {
	var b interp.Buffer
	_, ok := b.Newest()
	assert.False(t, ok)
	id := components.QuatIdentity()
	assert.True(t, b.Push(10, vx(10), id))
	assert.True(t, b.Push(12, vx(12), id))
	assert.True(t, b.Push(11, vx(11), id)) // late, in between
	assert.True(t, b.Push(11, vx(11.5), id), "a tick held is replaced")
	assert.True(t, b.Push(8, vx(8), id)) // older than all, buffer not full: kept
	assert.Equal(t, []uint32{8, 10, 11, 12}, ticks(&b))
	assert.Equal(t, 11.5, b.At(2).Pos.X, "the newer copy of a tick is kept")

	for k := uint32(13); k < 13+interp.BufferSize; k++ {
		require.True(t, b.Push(k, vx(float64(k)), id))
	}
	assert.Equal(t, interp.BufferSize, b.Len())
	newest, _ := b.Newest()
	assert.Equal(t, uint32(28), newest)
	assert.Equal(t, uint32(13), b.At(0).Tick)
	assert.False(t, b.Push(12, vx(0), id), "too old for a full buffer")

	// Make a hole and fill it late in a full buffer: the oldest is dropped.
	b.Reset()
	for k := uint32(0); k < interp.BufferSize+1; k++ {
		if k != 10 {
			b.Push(k, vx(float64(k)), id)
		}
	}
	assert.Equal(t, uint32(0), b.At(0).Tick)
	assert.True(t, b.Push(10, vx(10), id))
	want := []uint32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	assert.Equal(t, want, ticks(&b))
	assert.Equal(t, interp.BufferSize, b.Len())
	for i := 1; i < b.Len(); i++ {
		assert.Equal(t, float64(b.At(i).Tick), b.At(i).Pos.X)
	}
}

func TestBufferTickWrapAround(t *testing.T) {
	var b interp.Buffer
	id := components.QuatIdentity()
	b.Push(math.MaxUint32-1, vx(0), id)
	b.Push(1, vx(3), id) // wrapped: 3 ticks later
	b.Push(math.MaxUint32, vx(1), id)
	assert.Equal(t, []uint32{math.MaxUint32 - 1, math.MaxUint32, 1}, ticks(&b))

	// Render ticks may be given unwrapped (2³² + 0.5 ≡ 0.5).
	pos, _, mode := b.Sample(float64(1<<32)+0.5, 0)
	assert.Equal(t, interp.ModeInterpolating, mode)
	assert.InDelta(t, 2.5, pos.X, 1e-9, "tick 0 missing: ¾ of the way from MaxUint32 to 1")
	pos, _, _ = b.Sample(float64(math.MaxUint32)-0.5, 0)
	assert.InDelta(t, 0.5, pos.X, 1e-9)
}

func TestBufferSampleModes(t *testing.T) {
	var b interp.Buffer
	pos, rot, mode := b.Sample(5, 3)
	assert.Equal(t, interp.ModeEmpty, mode)
	assert.Equal(t, components.Vec3{}, pos)
	assert.Equal(t, components.QuatIdentity(), rot)

	q := func(a float64) components.Quat { return components.QuatAxisAngle(yAxis, a) }
	b.Push(10, vx(0), q(0))
	pos, _, mode = b.Sample(12, 3)
	assert.Equal(t, interp.ModeHolding, mode, "one snapshot: nothing to extrapolate from")
	assert.Equal(t, 0.0, pos.X)

	b.Push(12, vx(2), q(0.2)) // 1 m and 0.1 rad per tick
	b.Push(13, vx(3), q(0.3))

	cases := []struct {
		tick    float64
		x, ang  float64
		mode    interp.Mode
		comment string
	}{
		{9, 0, 0, interp.ModeHolding, "before oldest"},
		{10, 0, 0, interp.ModeInterpolating, "on a snapshot"},
		{11.5, 1.5, 0.15, interp.ModeInterpolating, "across the gap of lost tick 11"},
		{12.25, 2.25, 0.225, interp.ModeInterpolating, ""},
		{13, 3, 0.3, interp.ModeInterpolating, "on the newest"},
		{14.5, 4.5, 0.45, interp.ModeExtrapolating, "1.5 ticks past"},
		{16, 6, 0.6, interp.ModeExtrapolating, "exactly at the limit"},
		{20, 6, 0.6, interp.ModeHolding, "held at the limit"},
	}
	for _, c := range cases {
		pos, rot, mode := b.Sample(c.tick, 3)
		assert.Equal(t, c.mode, mode, "tick %v %s", c.tick, c.comment)
		assert.InDelta(t, c.x, pos.X, 1e-9, "tick %v %s", c.tick, c.comment)
		assert.InDelta(t, 0, rot.AngleTo(q(c.ang)), 1e-6, "tick %v %s", c.tick, c.comment)
	}
	pos, _, mode = b.Sample(14, 0)
	assert.Equal(t, interp.ModeHolding, mode, "extrapolation disabled")
	assert.Equal(t, 3.0, pos.X)
}

func TestBufferSlerpLargeAngles(t *testing.T) {
	var b interp.Buffer
	// 120° per tick: Slerp keeps constant angular speed along the short arc.
	b.Push(0, vx(0), components.QuatAxisAngle(yAxis, 0))
	b.Push(1, vx(0), components.QuatAxisAngle(yAxis, 2*math.Pi/3))
	_, rot, _ := b.Sample(0.25, 0)
	assert.InDelta(t, 0, rot.AngleTo(components.QuatAxisAngle(yAxis, math.Pi/6)), 1e-9)
	_, rot, _ = b.Sample(0.5, 0)
	assert.InDelta(t, 0, rot.AngleTo(components.QuatAxisAngle(yAxis, math.Pi/3)), 1e-9)
}

func TestBufferNormalizesRotation(t *testing.T) {
	var b interp.Buffer
	b.Push(1, vx(0), components.Quat{}) // zero quaternion from a bad packet
	b.Push(2, vx(0), components.Quat{W: 2})
	assert.Equal(t, components.QuatIdentity(), b.At(0).Rot)
	assert.Equal(t, components.QuatIdentity(), b.At(1).Rot)
}

func TestModeString(t *testing.T) {
	assert.Equal(t, "empty", interp.ModeEmpty.String())
	assert.Equal(t, "interpolating", interp.ModeInterpolating.String())
	assert.Equal(t, "extrapolating", interp.ModeExtrapolating.String())
	assert.Equal(t, "holding", interp.ModeHolding.String())
	assert.Equal(t, "Mode(?)", interp.Mode(9).String())
}

func TestAngles(t *testing.T) {
	deg := math.Pi / 180
	assert.InDelta(t, 180*deg, math.Abs(interp.LerpAngle(170*deg, -170*deg, 0.5)), 1e-12)
	assert.InDelta(t, 175*deg, interp.LerpAngle(170*deg, -170*deg, 0.25), 1e-12)
	assert.InDelta(t, -175*deg, interp.LerpAngle(170*deg, -170*deg, 0.75), 1e-12)
	assert.InDelta(t, 20*deg, interp.AngleDiff(170*deg, -170*deg), 1e-12)
	assert.InDelta(t, -20*deg, interp.AngleDiff(-170*deg, 170*deg), 1e-12)
	assert.InDelta(t, 45*deg, interp.LerpAngle(0, 90*deg, 0.5), 1e-12)
	assert.Equal(t, -math.Pi, interp.WrapAngle(-math.Pi))
	assert.Equal(t, -math.Pi, interp.WrapAngle(math.Pi))
	assert.True(t, math.IsNaN(interp.WrapAngle(math.Inf(1))))
	assert.InDelta(t, 0.5, interp.WrapAngle(0.5+6*math.Pi), 1e-12)
	assert.InDelta(t, -160*deg, interp.LerpAngle(170*deg, -170*deg, 1.5), 1e-12, "extrapolates along the short arc")
}
