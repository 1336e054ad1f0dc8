package browser_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/archenet/archenet/tests/internal/pagegame"
	"github.com/stretchr/testify/require"
)

// A WASM client in headless Chromium joins a native server beside a native player:
// it receives the spawns (every mover and both players' bodies) and the snapshots,
// predicts its own body with input.Player (the same code as the native player), and
// once everyone lets go of the keys and the movers stop, replicationtest.Converged
// run in the page on its world against the server's state holds, as it does for the
// native player.
func TestBrowserPlayerPredictsAndConverges(t *testing.T) {
	m := newBrowserMatch(t, true)
	var stop atomic.Bool
	native := m.dialNative(pagegame.Wander(3, stop.Load))
	ctx, cancel := context.WithTimeout(m.browser, 2*time.Minute)
	defer cancel()
	m.open(ctx, "play")
	r := m.waitPage(ctx, "3 s of play", func(r pageReport) bool { return r.InputTicks >= 180 })
	require.Equal(t, browserMovers+2, r.Mirrors, "the page mirrors every mover and both players' bodies")
	require.True(t, r.Predicted, "the page predicts its body")
	r, _ = m.still(ctx, &stop)
	t.Logf("page: client %d, %d snapshots, %d mirrors; prediction: %d input ticks, %d matches, %d corrections, %d resets; converged after %d checks; %.3f ms CPU per frame",
		r.ID, r.Snapshots, r.Mirrors, r.InputTicks, r.Matches, r.Corrections, r.Resets, r.Checks, r.FrameMs)
	require.True(t, r.Converged, r.ConvergeError)
	require.Greater(t, r.Snapshots, 60)
	require.Greater(t, r.Matches, uint64(30), "the page's predictions match the server's states")
	require.Equal(t, uint64(1), r.Resets, "the predictor starts once, from the first state")
	require.LessOrEqual(t, r.Corrections, uint64(2), "nothing the page cannot predict happens to its body")
	var st struct{ inputTicks, matches uint64 }
	m.do(func() {
		ps := native.Player.Stats()
		st.inputTicks, st.matches = ps.InputTicks, ps.Matches
	})
	t.Logf("native player: %d input ticks, %d matches", st.inputTicks, st.matches)
	require.Greater(t, st.matches, uint64(30))
}
