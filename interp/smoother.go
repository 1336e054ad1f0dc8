package interp

import (
	"fmt"
	"math"
	"time"

	"github.com/archenet/archenet/components"
)

// SmootherConfig configures a [Smoother]. Every zero field means its
// documented default; negative, NaN and infinite settings are invalid:
// [NewSmoother] (and input.NewPlayer, which uses it) refuses them. A
// Smoother whose Config is set by hand with such values uses the defaults.
type SmootherConfig struct {
	// HalfLife is the time in which a correction offset halves. Zero means
	// 100 ms (about 93% gone after 400 ms).
	HalfLife time.Duration
	// SnapDistance is the position error, in metres, above which a correction
	// is a teleport and snaps at once instead of being smoothed. Zero means 4 m.
	SnapDistance float64
	// SnapAngle is the rotation error, in radians, above which the rotation
	// snaps at once. Zero means π/2.
	SnapAngle float64
}

// resolve returns c with its defaults filled in, or an error (wrapping
// [ErrInvalidConfig]) naming a negative, NaN or infinite setting.
func (c SmootherConfig) resolve() (SmootherConfig, error) {
	switch {
	case c.HalfLife < 0:
		return c, fmt.Errorf("%w: SmootherConfig.HalfLife %v is negative", ErrInvalidConfig, c.HalfLife)
	case !(c.SnapDistance >= 0) || math.IsInf(c.SnapDistance, 0):
		return c, fmt.Errorf("%w: SmootherConfig.SnapDistance %v is not a distance", ErrInvalidConfig, c.SnapDistance)
	case !(c.SnapAngle >= 0) || math.IsInf(c.SnapAngle, 0):
		return c, fmt.Errorf("%w: SmootherConfig.SnapAngle %v is not an angle", ErrInvalidConfig, c.SnapAngle)
	}
	return c.withDefaults(), nil
}

// withDefaults returns c with every zero (or, set by hand, invalid) field
// at its default: resolve's defaults, which a Smoother whose Config was
// set by hand also uses.
func (c SmootherConfig) withDefaults() SmootherConfig {
	if c.HalfLife <= 0 {
		c.HalfLife = 100 * time.Millisecond
	}
	if !(c.SnapDistance > 0) || math.IsInf(c.SnapDistance, 0) {
		c.SnapDistance = 4
	}
	if !(c.SnapAngle > 0) || math.IsInf(c.SnapAngle, 0) {
		c.SnapAngle = math.Pi / 2
	}
	return c
}

// NewSmoother returns a Smoother with no offset and configuration cfg, or
// an error (wrapping [ErrInvalidConfig]) naming a negative, NaN or infinite
// setting.
func NewSmoother(cfg SmootherConfig) (Smoother, error) {
	if _, err := cfg.resolve(); err != nil {
		return Smoother{}, err
	}
	return Smoother{Config: cfg}, nil
}

// Smoother hides prediction corrections of a locally predicted entity: after
// a reconciliation moves the predicted state, the drawn transform starts
// where it was and the difference decays exponentially, instead of snapping.
// It is a small value type usable as an arche component; its zero value has
// no offset and the default configuration.
//
// Drawn transform = offset ∘ predicted state: position = state + PosOffset,
// rotation = exp(RotOffset)·state rotation.
type Smoother struct {
	Config SmootherConfig
	// PosOffset is the position error still shown, in metres.
	PosOffset components.Vec3
	// RotOffset is the rotation error still shown, as a rotation vector
	// (unit axis × angle in radians), applied before the state's rotation.
	RotOffset components.Vec3
}

// Correct records a correction: oldVisual is what was drawn just before
// the reconciliation (the current [components.Visual]) and newState the
// corrected predicted state. The offset becomes oldVisual − newState, so the
// next [Smoother.Apply] draws exactly oldVisual again. Position and rotation
// snap independently when their error exceeds SnapDistance / SnapAngle (a
// teleport); Correct reports whether anything snapped. No allocation.
func (s *Smoother) Correct(oldVisual, newState components.Visual) (snapped bool) {
	s.PosOffset = oldVisual.Pos.Sub(newState.Pos)
	if s.PosOffset.Len() > s.Config.withDefaults().SnapDistance {
		s.PosOffset = components.Vec3{}
		snapped = true
	}
	s.RotOffset = rotationVector(oldVisual.Rot.Mul(newState.Rot.Conj()))
	if s.RotOffset.Len() > s.Config.withDefaults().SnapAngle {
		s.RotOffset = components.Vec3{}
		snapped = true
	}
	return snapped
}

// Decay shrinks the offsets by 2^(−dt/HalfLife). Offsets below 1 µm / 1 µrad
// become exactly zero. No allocation.
func (s *Smoother) Decay(dt time.Duration) {
	if dt <= 0 {
		return
	}
	f := math.Exp2(-dt.Seconds() / s.Config.withDefaults().HalfLife.Seconds())
	s.PosOffset = s.PosOffset.Scale(f)
	s.RotOffset = s.RotOffset.Scale(f)
	if s.PosOffset.Len() < 1e-6 {
		s.PosOffset = components.Vec3{}
	}
	if s.RotOffset.Len() < 1e-6 {
		s.RotOffset = components.Vec3{}
	}
}

// Apply returns the transform to draw for the predicted state. No allocation.
func (s *Smoother) Apply(state components.Visual) components.Visual {
	rot := state.Rot
	if s.RotOffset != (components.Vec3{}) {
		rot = quatFromRotationVector(s.RotOffset).Mul(rot).Normalize()
	}
	return components.Visual{Pos: state.Pos.Add(s.PosOffset), Rot: rot}
}

// rotationVector returns the rotation of unit quaternion q as axis × angle,
// angle in [0, π] (the shorter way round).
func rotationVector(q components.Quat) components.Vec3 {
	if q.W < 0 {
		q = components.Quat{X: -q.X, Y: -q.Y, Z: -q.Z, W: -q.W}
	}
	v := components.Vec3{X: q.X, Y: q.Y, Z: q.Z}
	sin := v.Len()
	if sin < 1e-12 {
		return v.Scale(2) // small-angle limit
	}
	angle := 2 * math.Atan2(sin, q.W)
	return v.Scale(angle / sin)
}

// quatFromRotationVector is the inverse of rotationVector.
func quatFromRotationVector(v components.Vec3) components.Quat {
	angle := v.Len()
	if angle < 1e-12 {
		return components.Quat{X: v.X / 2, Y: v.Y / 2, Z: v.Z / 2, W: 1}.Normalize()
	}
	return components.QuatAxisAngle(v.Scale(1/angle), angle)
}
