package input_test

import (
	"fmt"
	"time"

	"github.com/archenet/archenet/input"
)

// The client clock: observe snapshots, then each frame ask which input
// ticks to sample.
func ExampleTickSync() {
	ts, _ := input.NewTickSync(input.SyncConfig{})
	start := time.Unix(0, 0)
	ts.ObserveRTT(100 * time.Millisecond)
	// Snapshots of ticks 500, 501, ... arrive 50 ms after the server ran them.
	for i := 0; i < 60; i++ {
		ts.ObserveSnapshot(uint32(500+i), start.Add(time.Duration(i)*time.Second/60+50*time.Millisecond))
	}
	now := start.Add(time.Second + 50*time.Millisecond)
	first, n := ts.Advance(now)
	fmt.Printf("server ≈ %.0f, stamp input tick %d (%d tick), lead %.1f ticks\n", ts.ServerTick(now), first, n, ts.Lead())
	// Output:
	// server ≈ 563, stamp input tick 568 (1 tick), lead 5.0 ticks
}
