package timing

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const tick = time.Second / 30

// TestArrivalsTracksTheSchedule: with latency and uniform jitter, the
// estimate settles on the tick whose snapshot arrives on average, across a
// tick-number wrap, and the jitter on the mean absolute deviation.
func TestArrivalsTracksTheSchedule(t *testing.T) {
	a := NewArrivals(tick, time.Second, tick/4)
	t0 := time.Unix(1000, 0)
	rng := rand.New(rand.NewPCG(3, 4))
	first := uint32(math.MaxUint32 - 200) // the numbers wrap mid-run
	const latency, jitter = 50 * time.Millisecond, 20 * time.Millisecond
	var now time.Time
	for k := range 1000 {
		sent := t0.Add(time.Duration(k) * tick)
		now = sent.Add(latency + time.Duration(rng.Int64N(int64(jitter))))
		a.Observe(first+uint32(k), now)
	}
	// At now, the snapshot arriving on average was sent 60 ms ago.
	want := float64(first) + float64(now.Sub(t0)-latency-jitter/2)/float64(tick)
	require.InDelta(t, want, a.ServerTick(now), 0.1)
	require.InDelta(t, float64(jitter/4), float64(a.Jitter()), float64(2*time.Millisecond), "uniform [0, J): mean absolute deviation J/4")
	require.Zero(t, a.Loss())
	require.Zero(t, a.Restarts())
}

// TestArrivalsLossDuplicatesAndOutliers: missing ticks count as loss until
// they arrive, duplicates are not received twice, one late straggler moves
// nothing much, and a run of outliers (a server restart) restarts the
// estimator on the new schedule.
func TestArrivalsLossDuplicatesAndOutliers(t *testing.T) {
	a := NewArrivals(tick, time.Second, tick/4)
	t0 := time.Unix(1000, 0)
	at := func(k int) time.Time { return t0.Add(time.Duration(k)*tick + 40*time.Millisecond) }
	for k := range 64 {
		if k%8 == 3 {
			continue // lost
		}
		a.Observe(uint32(100+k), at(k))
	}
	require.InDelta(t, 8.0/64, a.Loss(), 1e-12)
	a.Observe(100+59, at(63)) // late, and reordered: not lost any more
	a.Observe(100+60, at(63)) // duplicate
	require.InDelta(t, 7.0/64, a.Loss(), 1e-12)
	before := a.ServerTick(at(64))
	a.Observe(100+64, at(64).Add(500*time.Millisecond)) // one very late straggler
	require.InDelta(t, before, a.ServerTick(at(64)), 0.1)
	// The server restarts at tick 5 two seconds later.
	for k := range 5 {
		a.Observe(uint32(5+k), at(200+k))
	}
	require.Equal(t, 1, a.Restarts())
	// (The extended numbering continues across the restart.)
	require.InDelta(t, a.ServerTick(at(204)), a.ServerTick(at(203))+1, 1e-9)
	require.True(t, a.Observed())
}
