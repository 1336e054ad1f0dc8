package input

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The player's view of its inputs: cut off when the newest snapshot says
// the server applies the outage input, or when snapshots stop for Hold
// ticks less half the round trip (at least three net ticks); back with a
// snapshot that shows its inputs applied.
func TestStallWatch(t *testing.T) {
	t0 := time.Unix(100, 0)
	w := stallWatch{hold: 15, tick: time.Second / 60, net: time.Second / 30}
	rtt := 100 * time.Millisecond
	require.False(t, w.check(t0, rtt), "no snapshot yet")

	w.snapshot(t0, 600, 598, true)
	require.False(t, w.check(t0, rtt))
	// Snapshots stop: 250 ms of hold less 50 ms, the half round trip.
	require.False(t, w.check(t0.Add(199*time.Millisecond), rtt))
	require.True(t, w.check(t0.Add(201*time.Millisecond), rtt))
	// A long round trip: never less than three net ticks of quiet.
	require.False(t, w.check(t0.Add(99*time.Millisecond), time.Second))
	require.True(t, w.check(t0.Add(101*time.Millisecond), time.Second))

	// Snapshots again, but the server applies the outage input: still cut off.
	t1 := t0.Add(5 * time.Second)
	w.snapshot(t1, 900, 598, true)
	require.True(t, w.check(t1, rtt))
	// The server hears the client again.
	w.snapshot(t1.Add(time.Second/30), 902, 890, true)
	require.False(t, w.check(t1.Add(time.Second/30), rtt))
	// Ticks wrap.
	w.snapshot(t1, 5, 1<<32-20, true)
	require.True(t, w.check(t1, rtt))
	w.snapshot(t1, 5, 1<<32-5, true)
	require.False(t, w.check(t1, rtt))
	// No input applied yet: not cut off; a negative hold never is.
	w.snapshot(t1, 900, 0, false)
	require.False(t, w.check(t1, rtt))
	never := stallWatch{hold: -1, tick: time.Second / 60, net: time.Second / 30}
	never.snapshot(t0, 900, 10, true)
	require.False(t, never.check(t0.Add(time.Hour), rtt))
}
