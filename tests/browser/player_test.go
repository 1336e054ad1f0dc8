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
// native player. Its prediction starts once and is corrected at most twice, plus once
// for each frame the page was late by more than its input lead (the browser starved of
// the processor on a busy machine: its inputs reach the server late, or the server's
// states overtake its prediction).
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
	t.Logf("page: client %d, %d snapshots, %d mirrors; prediction: %d input ticks, %d matches, %d corrections, %d resets; converged after %d checks; %.3f ms CPU per frame; %d frames later than the input lead",
		r.ID, r.Snapshots, r.Mirrors, r.InputTicks, r.Matches, r.Corrections, r.Resets, r.Checks, r.FrameMs, r.Stalls)
	require.True(t, r.Converged, r.ConvergeError)
	require.Greater(t, r.Snapshots, 60)
	require.Greater(t, r.Matches, uint64(30), "the page's predictions match the server's states")
	require.GreaterOrEqual(t, r.Resets, uint64(1), "the predictor starts from the first state")
	require.LessOrEqual(t, r.Resets, uint64(1+r.Stalls),
		"the predictor starts once, from the first state, and restarts only after the page stalled longer than its input lead (%d times: a busy machine)", r.Stalls)
	require.LessOrEqual(t, r.Corrections, uint64(2+r.Stalls),
		"nothing the page cannot predict happens to its body (but an input sent late by a stalled page: %d stalls)", r.Stalls)
	var st struct{ inputTicks, matches uint64 }
	m.do(func() {
		ps := native.Player.Stats()
		st.inputTicks, st.matches = ps.InputTicks, ps.Matches
	})
	t.Logf("native player: %d input ticks, %d matches", st.inputTicks, st.matches)
	require.Greater(t, st.matches, uint64(30))
}
