package interp

import (
	"time"

	arche "github.com/mlange-42/arche/ecs"
	"github.com/mlange-42/arche/generic"

	"github.com/archenet/archenet/components"
)

// DefaultMaxExtrapolation is the extrapolation limit of a [System] created
// with a zero limit.
const DefaultMaxExtrapolation = 100 * time.Millisecond

// Stats counts the entities of the last [System.Update] by [Mode].
type Stats struct {
	Interpolating, Extrapolating, Holding, Empty int
}

// System writes [components.Visual] for every entity with a [Buffer] and a
// Visual, sampling the buffer at the render tick of its [Clock]. It
// implements archenet's ecs.System.
//
// Run it once per rendered frame, right after [Clock.Advance]; it does not
// advance the clock itself. Entities whose buffer is empty keep their
// Visual; nothing is written before the clock is [Clock.Ready].
type System struct {
	clock     *Clock
	maxExtrap time.Duration
	filter    *generic.Filter2[Buffer, components.Visual]
	stats     Stats
}

// NewSystem returns an interpolation system sampling at clock's render
// tick, extrapolating at most maxExtrapolation past the newest snapshot
// (zero means [DefaultMaxExtrapolation], negative means never).
func NewSystem(clock *Clock, maxExtrapolation time.Duration) *System {
	if maxExtrapolation == 0 {
		maxExtrapolation = DefaultMaxExtrapolation
	}
	return &System{clock: clock, maxExtrap: maxExtrapolation}
}

// Initialize registers the system's cached query with w.
func (s *System) Initialize(w *arche.World) {
	s.filter = generic.NewFilter2[Buffer, components.Visual]()
	s.filter.Register(w)
}

// Update samples every interpolated entity at the render tick and writes
// its Visual. Allocation-free; O(entities).
func (s *System) Update(w *arche.World) {
	s.stats = Stats{}
	if !s.clock.Ready() {
		return
	}
	tick := s.clock.RenderTick()
	ext := s.maxExtrap.Seconds() / s.clock.t
	q := s.filter.Query(w)
	for q.Next() {
		buf, vis := q.Get()
		pos, rot, mode := buf.Sample(tick, ext)
		switch mode {
		case ModeInterpolating:
			s.stats.Interpolating++
		case ModeExtrapolating:
			s.stats.Extrapolating++
		case ModeHolding:
			s.stats.Holding++
		default:
			s.stats.Empty++
			continue
		}
		vis.Pos, vis.Rot = pos, rot
	}
}

// Finalize unregisters the cached query.
func (s *System) Finalize(w *arche.World) { s.filter.Unregister(w) }

// Stats returns the per-mode entity counts of the last Update.
func (s *System) Stats() Stats { return s.stats }

// FrameTimer reports the local time between the last two rendered frames.
// [*Clock] implements it.
type FrameTimer interface {
	FrameDelta() time.Duration
}

// SmoothSystem draws locally predicted entities: for every entity with a
// [Smoother], a [components.Visual] and the caller's authoritative/predicted
// transform component T, it decays the smoother by the frame time and writes
// Visual = smoother applied to the transform. Run it once per frame, after
// [Clock.Advance] (or whatever the FrameTimer is). On a reconciliation, call
// [Smoother.Correct] with the entity's current Visual and its corrected
// state; the system does the rest.
type SmoothSystem[T any] struct {
	frames    FrameTimer
	transform func(*T) components.Visual
	filter    *generic.Filter3[Smoother, components.Visual, T]
}

// NewSmoothSystem returns a smoothing system reading frame times from frames
// and the predicted state through transform, which converts the caller's
// transform component to a position and rotation (it must not allocate for
// the system to stay allocation-free).
func NewSmoothSystem[T any](frames FrameTimer, transform func(*T) components.Visual) *SmoothSystem[T] {
	return &SmoothSystem[T]{frames: frames, transform: transform}
}

// Initialize registers the system's cached query with w.
func (s *SmoothSystem[T]) Initialize(w *arche.World) {
	s.filter = generic.NewFilter3[Smoother, components.Visual, T]()
	s.filter.Register(w)
}

// Update decays every smoother and writes Visual. Allocation-free if
// transform is.
func (s *SmoothSystem[T]) Update(w *arche.World) {
	dt := s.frames.FrameDelta()
	q := s.filter.Query(w)
	for q.Next() {
		sm, vis, tr := q.Get()
		sm.Decay(dt)
		*vis = sm.Apply(s.transform(tr))
	}
}

// Finalize unregisters the cached query.
func (s *SmoothSystem[T]) Finalize(w *arche.World) { s.filter.Unregister(w) }
