package input

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// syncWorld drives a TickSync with a perfect server clock and a link with
// fixed delay plus uniform jitter, and measures when stamped inputs would
// arrive at the server.
func TestTickSyncConverges(t *testing.T) {
	ts, err := NewTickSync(SyncConfig{})
	require.NoError(t, err)
	start := time.Unix(1000, 0)
	tick := time.Second / 60
	rng := rand.New(rand.NewPCG(1, 2))
	down, up := 60*time.Millisecond, 60*time.Millisecond
	const serverStart = 5000 // the server's tick at start
	serverTickAt := func(at time.Time) float64 { return serverStart + float64(at.Sub(start))/float64(tick) }

	type snap struct {
		tick uint32
		at   time.Time
	}
	var pending []snap
	lastTick := uint32(0)
	prevScale := 1.0
	minDepth := math.Inf(1)
	for ms := 0; ms < 20000; ms++ {
		now := start.Add(time.Duration(ms) * time.Millisecond)
		if st := uint32(serverTickAt(now)); st != lastTick {
			lastTick = st
			pending = append(pending, snap{st, now.Add(down + time.Duration(rng.Int64N(int64(10*time.Millisecond))))})
		}
		for len(pending) > 0 && !pending[0].at.After(now) {
			ts.ObserveSnapshot(pending[0].tick, now)
			ts.ObserveRTT(up + down + 5*time.Millisecond)
			pending = pending[1:]
		}
		first, n := ts.Advance(now)
		if ms > 0 && ts.Ready() {
			require.LessOrEqual(t, math.Abs(ts.Scale()-1), 0.05+1e-12)
		}
		for i := 0; i < n; i++ {
			// The input for tick first+i arrives at now+up; the server
			// consumes it at its tick first+i.
			arrive := serverTickAt(now.Add(up + time.Duration(rng.Int64N(int64(10*time.Millisecond)))))
			depth := float64(first+uint32(i)) - arrive
			if ms > 3000 {
				minDepth = min(minDepth, depth)
			}
			if ms%17 == 0 {
				ts.ObserveFeedback(int(math.Floor(depth)))
			}
		}
		if ms > 3000 {
			require.InDelta(t, ts.TargetLead(), ts.Lead(), 1.5, "at %d ms", ms)
			require.LessOrEqual(t, math.Abs(ts.Scale()-prevScale), 0.05)
		}
		prevScale = ts.Scale()
	}
	require.Zero(t, ts.Resyncs())
	t.Logf("lead %.2f target %.2f jitter %v rtt %v min depth %.2f", ts.Lead(), ts.TargetLead(), ts.Jitter(), ts.RTT(), minDepth)
	require.Greater(t, minDepth, 0.5, "inputs always arrive before their tick")
	require.Less(t, ts.Lead(), 12.0)
	require.InDelta(t, serverTickAt(start.Add(20*time.Second))-1, ts.ServerTick(start.Add(20*time.Second)), 1.5)
}

func TestTickSyncMonotonicAndResync(t *testing.T) {
	ts, err := NewTickSync(SyncConfig{})
	require.NoError(t, err)
	start := time.Unix(0, 0)
	first, n := ts.Advance(start)
	require.Zero(t, n, "nothing before the first snapshot")
	_ = first
	ts.ObserveSnapshot(100, start)
	var next uint32
	seen := 0
	lastN := 0
	check := func(now time.Time) {
		f, n := ts.Advance(now)
		lastN = n
		if n == 0 {
			return
		}
		if seen > 0 {
			require.True(t, int32(f-next) >= 0, "tick %d after %d", f, next)
		}
		next = f + uint32(n)
		seen += n
		require.LessOrEqual(t, n, 8)
	}
	now := start
	for i := 0; i < 120; i++ {
		now = now.Add(time.Second / 60)
		ts.ObserveSnapshot(uint32(100+i+1), now)
		check(now)
	}
	require.Zero(t, ts.Resyncs())
	// The server restarts 500 ticks back: after three outliers the estimator
	// restarts, the clock jumps back, and it waits instead of repeating ticks.
	for i := 0; i < 120; i++ {
		now = now.Add(time.Second / 60)
		ts.ObserveSnapshot(uint32(100+i-380), now)
		check(now)
	}
	require.Equal(t, 1, ts.Resyncs())
	// A 10 s stall of the client: no resync (the estimate is still right),
	// but at most MaxCatchUp ticks at once; the rest are skipped.
	before := next
	now = now.Add(10 * time.Second)
	ts.ObserveSnapshot(uint32(100+120-380+600), now)
	ts.ObserveSnapshot(uint32(100+120-380+601), now)
	ts.ObserveSnapshot(uint32(100+120-380+602), now)
	check(now)
	require.Equal(t, 1, ts.Resyncs())
	require.Equal(t, 8, lastN)
	require.Greater(t, int32(next-before), int32(100), "ticks were skipped")

	_, err = NewTickSync(SyncConfig{MaxScale: 1})
	require.ErrorIs(t, err, ErrInvalidConfig)
	_, err = NewTickSync(SyncConfig{Safety: -1})
	require.ErrorIs(t, err, ErrInvalidConfig)
}
