package lagcomp

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRewindBound(t *testing.T) {
	r, err := NewRewinds(Limits{})
	require.NoError(t, err)
	// 20 ms RTT: 20 + 100 + 150 ms.
	require.Equal(t, 270*time.Millisecond, r.Bound(20*time.Millisecond))
	// Past MaxLatency the RTT counts as 250 ms.
	require.Equal(t, 500*time.Millisecond, r.Bound(time.Second))
	require.Equal(t, 250*time.Millisecond, r.Bound(-time.Second))

	_, err = NewRewinds(Limits{Margin: -1})
	require.ErrorIs(t, err, ErrInvalidConfig)
}

// A client at 20 ms RTT claiming a second of view lag is judged at its
// bound (270 ms = 8.1 net ticks at 30 Hz), an honest claim as it is; both
// are counted.
func TestRewindJudge(t *testing.T) {
	r, err := NewRewinds(Limits{NetRate: 30})
	require.NoError(t, err)
	rtt := 20 * time.Millisecond
	at := 1000.0
	require.InDelta(t, at-8.1, r.Judge(3, at, at-30, rtt), 1e-9, "1 s claimed, 270 ms allowed")
	s := r.Stats(3)
	require.Equal(t, RewindStats{Claims: 1, Clamped: 1, LastClaim: time.Second, LastBound: 270 * time.Millisecond, MaxClaim: time.Second}, s)

	require.Equal(t, at-4.5, r.Judge(3, at, at-4.5, rtt), "150 ms: within the bound")
	s = r.Stats(3)
	require.Equal(t, uint64(2), s.Claims)
	require.Equal(t, uint64(1), s.Clamped)
	require.Equal(t, 150*time.Millisecond, s.LastClaim)
	require.Equal(t, time.Second, s.MaxClaim)

	require.Equal(t, at, r.Judge(3, at, at+5, rtt), "never after the present")
	require.InDelta(t, at-8.1, r.Judge(3, at, math.NaN(), rtt), 1e-9)
	require.InDelta(t, at-8.1, r.Judge(3, at, math.Inf(-1), rtt), 1e-9)
	require.Equal(t, 24*time.Hour, r.Stats(3).MaxClaim, "a NaN claim counts as a day")
	// Ticks wrap at 2³²: a claim just before the wrap is close behind.
	require.Equal(t, -1.0, r.Judge(4, 2, 1<<32-1, rtt), "three ticks back, across the wrap")
	require.Equal(t, 100*time.Millisecond, r.Stats(4).LastClaim)
	require.Zero(t, r.Stats(5).Claims)
	r.Reset(3)
	require.Zero(t, r.Stats(3).Claims)
}
