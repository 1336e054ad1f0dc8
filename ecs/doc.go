// Package ecs is archenet's glue to the arche ECS: a fixed-step [Scheduler]
// that runs [System]s with a network tick clock, and a [Listeners] fan-out so
// several listeners can share one arche world.
//
// Import arche under another name, since this package is also called ecs:
//
//	import arche "github.com/mlange-42/arche/ecs"
//
// # Outline
//
//   - [System]: Initialize / Update / Finalize over an arche world.
//   - [Scheduler]: fixed-step tick loop. [New] with a [Config] (tick rate,
//     network divisor, catch-up limit); [Scheduler.AddSystem],
//     [Scheduler.AddNetSystem]; [Scheduler.Step] runs one tick,
//     [Scheduler.Advance] converts elapsed time into ticks and returns the
//     render alpha, [Scheduler.Run] runs in real time until its context ends;
//     [Scheduler.Close] finalizes.
//   - [TickInfo]: the current tick (number, network tick, dt, simulated
//     time), kept in the world as a resource and returned by [Scheduler.Info].
//   - [Clock], [RealClock], [ManualClock]: injectable time for [Scheduler.Run].
//   - [Listeners], [AddListener], [RemoveListener], [InstallListeners]: event
//     fan-out. An arche world holds one listener and cannot report it, so in
//     archenet nobody calls World.SetListener directly; everyone calls
//     [AddListener].
//
// # Network ticks
//
// With [Config.NetDivisor] = N every N-th simulation tick is a network tick
// ([TickInfo.IsNetTick]); the send rate is TickRate/N. A system that only
// does work on network ticks (snapshot building, sending) is added with
// [Scheduler.AddNetSystem]; a system that does some work on every tick and
// some on network ticks reads [TickInfo.IsNetTick] itself.
//
// # Task → API
//
//	run one tick (tests, lockstep)            Scheduler.Step
//	drive from a render loop                  ticks, alpha := Scheduler.Advance(frameTime)
//	run a headless server                     Scheduler.Run(ctx, ecs.RealClock{})
//	test Run deterministically                NewManualClock, ManualClock.Advance, ManualClock.BlockUntilWaiters
//	read tick number / dt / net tick          arche.GetResource[ecs.TickInfo](w) or Scheduler.Info
//	system that runs at the send rate         Scheduler.AddNetSystem
//	how much time was dropped after a stall   Scheduler.DroppedTicks
//	listen to world events next to archenet   AddListener(w, l); RemoveListener(w, id)
//
// # Costs
//
// [Scheduler.Step] and [Scheduler.Advance] do not allocate (see
// scheduler_benchmark_test.go). [Listeners.Notify] adds one indirection and a
// per-sub-listener subscription check to every event.
package ecs
