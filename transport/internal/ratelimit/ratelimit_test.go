package ratelimit

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestTokenBucket(t *testing.T) {
	t0 := time.Unix(0, 0)
	b := New(100, 10, t0)
	for i := range 10 {
		require.True(t, b.Allow(t0), "burst %d", i)
	}
	require.False(t, b.Allow(t0), "burst exhausted")
	require.True(t, b.Allow(t0.Add(10*time.Millisecond)), "one token refilled after 1/rate")
	require.False(t, b.Allow(t0.Add(10*time.Millisecond)))
	require.True(t, b.Allow(t0.Add(time.Hour)))
	n := 0
	for b.Allow(t0.Add(time.Hour)) {
		n++
	}
	require.Equal(t, 9, n, "refill is capped at the burst")

	unlimited := New(-1, 1, t0)
	for range 1000 {
		require.True(t, unlimited.Allow(t0))
	}
}
