package interp_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/interp"
)

func TestClockConfig(t *testing.T) {
	c, err := interp.NewClock(interp.ClockConfig{TickInterval: 50 * time.Millisecond})
	require.NoError(t, err)
	assert.Equal(t, interp.ClockConfig{
		TickInterval: 50 * time.Millisecond, JitterFactor: 3, MaxTimeScale: 0.1,
		Convergence: 500 * time.Millisecond, MaxDelay: time.Second,
		ResetThreshold: time.Second, InitialJitter: 12500 * time.Microsecond,
	}, c.Config())
	for _, bad := range []interp.ClockConfig{
		{},
		{TickInterval: time.Millisecond, MaxTimeScale: 0.6},
		{TickInterval: time.Millisecond, JitterFactor: -1},
		{TickInterval: time.Millisecond, MinDelay: 2 * time.Second},
	} {
		_, err := interp.NewClock(bad)
		assert.ErrorIs(t, err, interp.ErrInvalidConfig, "%+v", bad)
	}
}

// steady feeds a clock ticks 0..n−1 at a perfect 20 Hz with 40 ms latency,
// skipping lost ticks, and advances a 60 Hz frame clock alongside.
func steady(c *interp.Clock, from, n uint32, lost func(uint32) bool, start time.Time) time.Time {
	const interval = 50 * time.Millisecond
	now := start
	for k := from; k < from+n; k++ {
		if !lost(k) {
			c.Observe(k, epoch.Add(time.Duration(k-from)*interval+40*time.Millisecond))
		}
		for range 3 {
			now = now.Add(interval / 3)
			c.Advance(now)
		}
	}
	return now
}

func TestClockSteadyState(t *testing.T) {
	c, err := interp.NewClock(interp.ClockConfig{TickInterval: 50 * time.Millisecond, InitialJitter: time.Nanosecond})
	require.NoError(t, err)
	assert.False(t, c.Ready())
	c.Advance(epoch)
	assert.False(t, c.Ready(), "no snapshot yet")
	assert.Equal(t, 0.0, c.ServerTick(epoch))

	now := steady(c, 1000, 200, func(uint32) bool { return false }, epoch.Add(40*time.Millisecond))
	assert.True(t, c.Ready())
	assert.Equal(t, 0.0, c.Loss())
	assert.Less(t, c.Jitter(), time.Microsecond, "no jitter measured")
	assert.InDelta(t, 0.100, c.TargetDelay().Seconds(), 1e-5, "2 × 50 ms with no jitter")
	assert.InDelta(t, 0.100, c.Delay().Seconds(), 1e-5)
	assert.InDelta(t, 1, c.TimeScale(), 1e-6)
	// The snapshot of tick 1199 arrived at now − 50ms·(1/3)… : server tick estimate.
	assert.InDelta(t, 1199+(now.Sub(epoch.Add(199*50*time.Millisecond+40*time.Millisecond))).Seconds()/0.05, c.ServerTick(now), 1e-6)
	assert.InDelta(t, c.ServerTick(now)-2, c.RenderTick(), 1e-4)
	assert.Equal(t, 50*time.Millisecond/3, c.FrameDelta())
}

func TestClockLossRaisesDelay(t *testing.T) {
	const interval = 50 * time.Millisecond
	for _, tc := range []struct {
		every int     // lose every n-th tick
		loss  float64 // over the 64-tick window
		m     float64 // send intervals reserved for losses
	}{
		{every: 0, loss: 0, m: 1},
		{every: 32, loss: 2.0 / 64, m: 1},                               // 3%: still two intervals
		{every: 4, loss: 16.0 / 64, m: math.Log(0.05) / math.Log(0.25)}, // 25%: 2.16
		{every: 2, loss: 32.0 / 64, m: math.Log(0.05) / math.Log(0.5)},  // 50%: 4.32 → 4
	} {
		c, err := interp.NewClock(interp.ClockConfig{TickInterval: interval, InitialJitter: time.Nanosecond})
		require.NoError(t, err)
		steady(c, 0, 128, func(k uint32) bool { return tc.every > 0 && k%uint32(tc.every) == 1 }, epoch)
		assert.InDelta(t, tc.loss, c.Loss(), 1e-12, "every %d", tc.every)
		m := min(tc.m, 4)
		assert.InDelta(t, (1+m)*0.05, c.TargetDelay().Seconds(), 1e-5, "every %d", tc.every)
	}
}

func TestClockReorderDuplicateWrap(t *testing.T) {
	c, err := interp.NewClock(interp.ClockConfig{TickInterval: 50 * time.Millisecond, InitialJitter: time.Nanosecond})
	require.NoError(t, err)
	base := uint32(math.MaxUint32 - 5) // the tick counter wraps during the test
	at := func(i int) time.Time { return epoch.Add(time.Duration(i)*50*time.Millisecond + 30*time.Millisecond) }
	order := []int{0, 1, 3, 2, 4, 4, 5, 6, 8, 7, 9, 10, 11}
	for _, i := range order {
		c.Observe(base+uint32(i), at(i))
	}
	assert.Equal(t, 0.0, c.Loss(), "reordered and duplicate snapshots are not losses")
	assert.Less(t, c.Jitter(), time.Microsecond)
	now := at(11)
	c.Advance(now)
	assert.InDelta(t, float64(base)+11, c.ServerTick(now), 1e-9, "serial arithmetic across the wrap")
	assert.Greater(t, c.ServerTick(now), float64(math.MaxUint32), "unwrapped render ticks")
}

func TestClockResetsOnDiscontinuity(t *testing.T) {
	c, err := interp.NewClock(interp.ClockConfig{TickInterval: 50 * time.Millisecond, InitialJitter: time.Nanosecond})
	require.NoError(t, err)
	now := steady(c, 100, 40, func(uint32) bool { return false }, epoch)
	before, jitter := c.RenderTick(), c.Jitter()

	// A packet 0.96 s late is a jitter sample, clipped to 4·jitter + T/4.
	c.Observe(120, now)
	// One 1.96 s late is an outlier: ignored.
	c.Observe(100, now)
	assert.InDelta(t, (jitter + (12500*time.Microsecond-jitter)/16).Seconds(), c.Jitter().Seconds(), 1e-9)
	now = now.Add(time.Second / 60)
	c.Advance(now)
	assert.InDelta(t, before+1.0/3, c.RenderTick(), 0.01, "the render time barely notices")
	assert.Zero(t, c.Resets())

	// The server restarts at tick 7: the third consecutive outlier (tick 8)
	// restarts the estimator and the render tick jumps (once) to the new
	// timeline.
	for k := uint32(7); k < 10; k++ {
		now = now.Add(50 * time.Millisecond)
		c.Observe(k, now)
		c.Advance(now)
	}
	assert.Equal(t, 1, c.Resets())
	assert.InDelta(t, 9, c.ServerTick(now), 1e-9)
	assert.InDelta(t, 9-c.TargetDelay().Seconds()/0.05, c.RenderTick(), 0.01)
}
