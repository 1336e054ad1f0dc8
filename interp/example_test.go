package interp_test

import (
	"fmt"
	"time"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/interp"
)

func ExampleBuffer_Sample() {
	var b interp.Buffer // the zero value is empty; use it as an arche component
	id := components.QuatIdentity()
	b.Push(10, components.Vec3{X: 0}, id)
	b.Push(13, components.Vec3{X: 3}, id) // arrives before 11
	b.Push(11, components.Vec3{X: 1}, id) // late: sorted in
	b.Push(11, components.Vec3{X: 1}, id) // tick 11 again (a later datagram of it): replaces
	// Tick 12 was lost.

	const maxExtrap = 3 // ticks (100 ms at 30 Hz)
	for _, tick := range []float64{10.5, 12, 14, 20} {
		pos, _, mode := b.Sample(tick, maxExtrap)
		fmt.Printf("tick %4.1f: x=%.1f %v\n", tick, pos.X, mode)
	}
	// Output:
	// tick 10.5: x=0.5 interpolating
	// tick 12.0: x=2.0 interpolating
	// tick 14.0: x=4.0 extrapolating
	// tick 20.0: x=6.0 holding
}

func ExampleClock() {
	clock, err := interp.NewClock(interp.ClockConfig{TickInterval: 50 * time.Millisecond}) // 20 Hz snapshots
	if err != nil {
		panic(err)
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// Snapshots of ticks 100… arrive every 50 ms (no jitter here).
	for i := range 100 {
		now := start.Add(time.Duration(i) * 50 * time.Millisecond)
		clock.Observe(uint32(100+i), now)
		clock.Advance(now) // once per frame (here one frame per snapshot)
	}
	fmt.Printf("server tick %.2f, render tick %.2f\n", clock.ServerTick(start.Add(99*50*time.Millisecond)), clock.RenderTick())
	fmt.Printf("delay %v (target %v), jitter %v, loss %.0f%%\n",
		clock.Delay().Round(time.Millisecond), clock.TargetDelay().Round(time.Millisecond),
		clock.Jitter().Round(time.Millisecond), 100*clock.Loss())
	// Output:
	// server tick 199.00, render tick 197.00
	// delay 100ms (target 100ms), jitter 0s, loss 0%
}
