package ecs

import arche "github.com/mlange-42/arche/ecs"

// System is a unit of game logic run by a [Scheduler] once per fixed tick.
//
// Initialize runs once before the first tick (or at once when the system is
// added to a scheduler that has already started), Update once per tick the
// system takes part in, and Finalize once when the scheduler closes.
//
// Systems read the current tick through the world resource [TickInfo]:
//
//	info := arche.GetResource[ecs.TickInfo](w)
//	if info.IsNetTick { ... }
//
// A system that must only run on network ticks can either check
// [TickInfo.IsNetTick] itself or be added with [Scheduler.AddNetSystem].
type System interface {
	Initialize(w *arche.World)
	Update(w *arche.World)
	Finalize(w *arche.World)
}

// Func adapts a function to a [System] whose Initialize and Finalize do
// nothing:
//
//	s.Sched.AddSystem(ecs.Func(s.coins)) // examples/topdown: func (s *Server) coins(w *arche.World)
type Func func(w *arche.World)

// Initialize does nothing.
func (f Func) Initialize(*arche.World) {}

// Update calls f.
func (f Func) Update(w *arche.World) { f(w) }

// Finalize does nothing.
func (f Func) Finalize(*arche.World) {}
