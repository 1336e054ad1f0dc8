package browser_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/archenet/archenet/replication/replicationtest"
	"github.com/stretchr/testify/require"
)

// A native client (QUIC) and a browser client (WebTransport in Chromium) watch the
// same match: both see every entity (no interest, neither owns one), so for every
// snapshot tick that the server coded against the same view for both (baseline,
// prediction views, no input extension), their bytes are the same: one codec on both
// transports. Both converge on the server's state.
func TestBrowserAndNativeGetTheSameBytes(t *testing.T) {
	m := newBrowserMatch(t, false)
	native := m.dialNative(nil)
	ctx, cancel := context.WithTimeout(m.browser, 2*time.Minute)
	defer cancel()
	m.open(ctx, "watch")
	m.waitPage(ctx, "4 s of snapshots", func(r pageReport) bool { return r.Snapshots >= 120 })
	var stop atomic.Bool
	r, stillAt := m.still(ctx, &stop)
	require.True(t, r.Converged, r.ConvergeError)
	require.Equal(t, browserMovers, r.Mirrors)
	var mine []replicationtest.TickRecord
	m.do(func() { mine = native.Recorder.Records() })

	byTick := map[uint32]replicationtest.TickRecord{}
	for _, rec := range mine {
		byTick[rec.Tick] = rec
	}
	// The first second after the page's join is left out: each client's
	// spawns bring the movers' state and their first changes come as full
	// records, in flight until acked, at ticks that depend on when each
	// joined; after that both hold every mover in their views.
	var joined uint32
	for _, p := range r.Records {
		if joined == 0 || int32(p.Tick-joined) < 0 {
			joined = p.Tick
		}
	}
	common, same, bytes, moving, movingBytes := 0, 0, 0, 0, 0
	for _, p := range r.Records {
		n, ok := byTick[p.Tick]
		if !ok || int32(p.Tick-joined) < 30 {
			continue
		}
		common++
		if n.View != p.View {
			continue
		}
		same++
		bytes += p.Bytes
		require.Equal(t, n.Digest, p.Digest, "tick %d, view %q: %d bytes to the page, %d to the native client", p.Tick, p.View, p.Bytes, n.Bytes)
		require.Equal(t, n.Bytes, p.Bytes)
		if p.Tick < stillAt { // records of the moving entities
			moving++
			movingBytes += p.Bytes
		}
	}
	t.Logf("%d ticks recorded by both, %d of them coded against the same view for both: byte-identical, %.0f bytes per tick (%d ticks while the movers moved: %.0f bytes per tick)",
		common, same, float64(bytes)/float64(max(same, 1)), moving, float64(movingBytes)/float64(max(moving, 1)))
	require.GreaterOrEqual(t, common, 60)
	require.GreaterOrEqual(t, same, common/2, "most ticks are coded against the same view for both")
	require.GreaterOrEqual(t, moving, 30, "ticks with the movers' records were compared")
}
