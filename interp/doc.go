// Package interp turns late, lossy, jittery snapshots into smooth drawn
// transforms: snapshot interpolation at an adaptive render time for remote
// entities, and correction smoothing for locally predicted ones.
//
// # Outline
//
//   - [Buffer]: per-entity ring of the last [BufferSize] authoritative
//     [Snapshot]s, a fixed-size arche component. [Buffer.Push] takes
//     snapshots in any order (duplicates and too-old ticks ignored);
//     [Buffer.Sample] interpolates (linear position, slerp rotation),
//     extrapolates up to a limit, then holds, and reports the [Mode].
//   - [Clock]: the render clock. [Clock.Observe] each snapshot's tick and
//     arrival time; [Clock.Advance] once per frame; sample at
//     [Clock.RenderTick] = estimated server tick − delay. The target delay
//     ([Clock.TargetDelay]) is (1+m)·T + k·jitter, adapting to measured
//     [Clock.Jitter] and [Clock.Loss]; the render time follows it by time
//     scaling within ±10% and never jumps (except at start and on a reset).
//   - [System]: archenet ecs.System writing [components.Visual] from every
//     [Buffer] at the render tick; [Stats] counts modes.
//   - [Smoother], [SmootherConfig]: hides prediction corrections
//     ([NewSmoother] checks the configuration; the zero Smoother has the
//     defaults); [Smoother.Correct] on reconciliation, [Smoother.Decay] and
//     [Smoother.Apply] each frame; teleports snap. [SmoothSystem] does the
//     per-frame part for entities with a Smoother, a Visual and the caller's
//     transform component.
//   - [LerpAngle], [AngleDiff], [WrapAngle]: plain angles with wrap-around.
//
// The renderer reads only [components.Visual], never the authoritative state.
//
// # Frame order on a client
//
//	on each snapshot:  buffer.Push(tick, pos, rot); clock.Observe(tick, arrival)
//	each frame:        clock.Advance(now); interpSystem.Update(w); smoothSystem.Update(w); draw Visual
//	on reconcile:      smoother.Correct(currentVisual, correctedState)
//
// # Task → API
//
//	store an authoritative state               Buffer.Push
//	where is the entity at render time          Buffer.Sample, System
//	turn an angle with wrap-around              LerpAngle
//	when to sample (render time)                Clock.Advance, Clock.RenderTick
//	how far behind / how bad is the network     Clock.Delay, Clock.TargetDelay, Clock.Jitter, Clock.Loss
//	hide a prediction correction                Smoother.Correct, SmoothSystem
//	respawn or teleport of a remote entity      Buffer.Reset
//
// # Accuracy
//
// Linear interpolation of a path with acceleration bounded by M across a
// snapshot gap g errs by at most M·g²/8; extrapolating e past the newest
// snapshot, by (M/2)·e·(e+g). TestScenarioCircle checks both on a 10 m circle
// at 1 rad/s with 30 Hz snapshots, ±20 ms jitter and 5% loss (measured:
// mean 1.3 mm, max 12.5 mm against the bound 12.5 mm for two lost ticks in
// a row; target delay ≈ 97–104 ms).
//
// # Costs
//
// Buffer is 1 KiB; Push is O(1) in order and never allocates. Sample,
// System.Update, Clock.Observe and Clock.Advance are allocation-free
// (go test -bench . ./interp/): about 24 ns per entity for System.Update over
// 10,000 entities on the reference machine.
package interp
