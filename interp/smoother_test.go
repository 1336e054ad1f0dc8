package interp_test

import (
	"math"
	"testing"
	"time"

	arche "github.com/mlange-42/arche/ecs"
	"github.com/mlange-42/arche/generic"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/ecs"
	"github.com/archenet/archenet/interp"
)

var (
	_ ecs.System = (*interp.System)(nil)
	_ ecs.System = (*interp.SmoothSystem[components.Visual])(nil)
)

func yaw(a float64) components.Quat { return components.QuatAxisAngle(yAxis, a) }

func TestSmootherDecaysSmallCorrection(t *testing.T) {
	s := interp.Smoother{Config: interp.SmootherConfig{HalfLife: 100 * time.Millisecond}}
	old := components.Visual{Pos: components.Vec3{X: 1.5, Y: 2}, Rot: yaw(0.5)}
	corrected := components.Visual{Pos: components.Vec3{X: 1, Y: 2}, Rot: yaw(0.3)}

	assert.False(t, s.Correct(old, corrected))
	got := s.Apply(corrected)
	assert.InDelta(t, 0, got.Pos.Sub(old.Pos).Len(), 1e-12, "no visible snap at the correction")
	assert.InDelta(t, 0, got.Rot.AngleTo(old.Rot), 1e-9)

	s.Decay(100 * time.Millisecond) // one half-life
	got = s.Apply(corrected)
	assert.InDelta(t, 1.25, got.Pos.X, 1e-12)
	assert.InDelta(t, 0, got.Rot.AngleTo(yaw(0.4)), 1e-9)

	s.Decay(200 * time.Millisecond) // two more
	got = s.Apply(corrected)
	assert.InDelta(t, 1.0625, got.Pos.X, 1e-12)
	assert.InDelta(t, 0, got.Rot.AngleTo(yaw(0.325)), 1e-9)

	s.Decay(3 * time.Second) // 2⁻³⁰ of 0.0625 m < 1 µm: exactly zero
	assert.Equal(t, components.Vec3{}, s.PosOffset)
	assert.Equal(t, components.Vec3{}, s.RotOffset)
	assert.Equal(t, corrected, s.Apply(corrected))

	s.Decay(-time.Second) // no time: no change, no panic
}

func TestSmootherSnapsTeleport(t *testing.T) {
	var s interp.Smoother // defaults: 4 m, π/2
	old := components.Visual{Pos: components.Vec3{X: 0}, Rot: yaw(0)}
	teleported := components.Visual{Pos: components.Vec3{X: 50}, Rot: yaw(0.1)}
	assert.True(t, s.Correct(old, teleported))
	got := s.Apply(teleported)
	assert.Equal(t, teleported.Pos, got.Pos, "position snaps at once")
	assert.InDelta(t, 0, got.Rot.AngleTo(yaw(0)), 1e-9, "the small rotation error is still smoothed")

	// A 3 m error is below the default 4 m threshold: smoothed.
	assert.False(t, s.Correct(components.Visual{Pos: components.Vec3{X: 47}, Rot: yaw(0.1)}, teleported))
	assert.InDelta(t, 3, s.PosOffset.Len(), 1e-12)

	// A 170° turn snaps the rotation only.
	assert.True(t, s.Correct(teleported, components.Visual{Pos: teleported.Pos, Rot: yaw(0.1 + 170*math.Pi/180)}))
	assert.Equal(t, components.Vec3{}, s.RotOffset)
}

type predicted struct {
	Pos components.Vec3
	Rot components.Quat
}

type fixedFrames time.Duration

func (f fixedFrames) FrameDelta() time.Duration { return time.Duration(f) }

func TestSmoothSystem(t *testing.T) {
	w := arche.NewWorld()
	m := generic.NewMap3[interp.Smoother, components.Visual, predicted](&w)
	e := m.NewWith(&interp.Smoother{}, &components.Visual{}, &predicted{Rot: components.QuatIdentity()})
	sys := interp.NewSmoothSystem(fixedFrames(time.Second/60), func(p *predicted) components.Visual {
		return components.Visual{Pos: p.Pos, Rot: p.Rot}
	})
	sys.Initialize(&w)
	defer sys.Finalize(&w)

	sm, vis, pr := m.Get(e)
	// The predicted entity walks at 6 m/s; at frame 30 a reconciliation
	// moves it back by 0.6 m. The drawn position must not jump.
	var prev float64
	var maxStep float64
	for n := 1; n <= 120; n++ {
		pr.Pos.X += 0.1
		if n == 30 {
			sm.Correct(*vis, components.Visual{Pos: components.Vec3{X: pr.Pos.X - 0.6}, Rot: pr.Rot})
			pr.Pos.X -= 0.6
		}
		sys.Update(&w)
		if n > 1 {
			maxStep = max(maxStep, math.Abs(vis.Pos.X-prev))
		}
		prev = vis.Pos.X
	}
	// The correction at frame 30 is taken against the frame-29 drawing, so
	// the offset is 0.6 − 0.1 (that frame's walk) = 0.5 m, and the frame-30
	// step is only its decay, 0.5·(1 − 2^(−1/6)) ≈ 0.055 m, backwards.
	assert.InDelta(t, 0.1, maxStep, 1e-9, "no frame moves more than the walk itself")
	// 91 frames of decay since the correction: 0.5 m · 2^(−91/60/0.1).
	frame := (time.Second / 60).Seconds()
	assert.InDelta(t, 0.5*math.Exp2(-91*frame/0.1), vis.Pos.X-pr.Pos.X, 1e-12)

	// A teleport snaps in the same frame.
	sm.Correct(*vis, components.Visual{Pos: components.Vec3{X: 100}, Rot: pr.Rot})
	pr.Pos.X = 100
	sys.Update(&w)
	assert.Equal(t, 100.0, vis.Pos.X)
	require.Equal(t, components.Vec3{}, sm.PosOffset)
}

func TestNewSmootherRefusesBadSettings(t *testing.T) {
	for _, bad := range []interp.SmootherConfig{
		{HalfLife: -time.Millisecond},
		{SnapDistance: -1},
		{SnapDistance: math.NaN()},
		{SnapAngle: math.Inf(1)},
		{SnapAngle: -0.1},
	} {
		_, err := interp.NewSmoother(bad)
		require.ErrorIs(t, err, interp.ErrInvalidConfig, "%+v", bad)
	}
	s, err := interp.NewSmoother(interp.SmootherConfig{HalfLife: 50 * time.Millisecond})
	require.NoError(t, err)
	require.Equal(t, 50*time.Millisecond, s.Config.HalfLife)
}
