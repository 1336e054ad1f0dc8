package browser_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/archenet/archenet/tests/internal/pagegame"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// A page that cannot use WebTransport (forced here: transport=websocket, as
// when the browser has none or the network blocks UDP) plays over the
// WebSocket fallback, mounted on the page's own HTTP server, beside a
// WebTransport page in another tab and a native player over QUIC: all
// three predict their bodies, receive the match's game messages, and
// converge on the server's state.
func TestBrowserWebSocketFallback(t *testing.T) {
	m := newMatch(t, pagegame.ServerOptions{Movers: browserMovers, Players: true, Messages: true})
	var stop atomic.Bool
	native := m.dialNativeWith(pagegame.Wander(3, stop.Load), true)
	ctxWS, cancel := context.WithTimeout(m.browser, 2*time.Minute)
	defer cancel()
	tabWT, closeTab := chromedp.NewContext(m.browser)
	defer closeTab()
	ctxWT, cancelWT := context.WithTimeout(tabWT, 2*time.Minute)
	defer cancelWT()
	m.open(ctxWS, "play&messages=1&transport=websocket")
	m.open(ctxWT, "play&messages=1")
	ws := m.waitPage(ctxWS, "3 s over the WebSocket", func(r pageReport) bool { return r.InputTicks >= 180 && r.Msgs.Reliable >= 60 })
	wt := m.waitPage(ctxWT, "the WebTransport page playing", func(r pageReport) bool { return r.InputTicks >= 60 })
	require.Equal(t, "websocket", ws.Via)
	require.Equal(t, "webtransport", wt.Via)
	require.True(t, ws.Predicted)
	require.Empty(t, ws.Msgs.Err)
	require.Greater(t, ws.Msgs.Unreliable, ws.Msgs.Reliable/2, "unreliable events over the WebSocket")

	// Still: every client converges.
	m.do(func() { m.srv.Still = true })
	stop.Store(true)
	for _, ctx := range []context.Context{ctxWS, ctxWT} {
		_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.pageStop = true`))
		require.NoError(t, err)
	}
	ws = m.waitPage(ctxWS, "the WebSocket page to converge", func(r pageReport) bool { return r.State == "converged" })
	wt = m.waitPage(ctxWT, "the WebTransport page to converge", func(r pageReport) bool { return r.State == "converged" })
	t.Logf("WebSocket page: client %d, %d snapshots, %d mirrors; %d input ticks, %d matches, %d corrections; events %d reliable, %d unreliable, %d about movers; %.3f ms CPU per frame; transport %v",
		ws.ID, ws.Snapshots, ws.Mirrors, ws.InputTicks, ws.Matches, ws.Corrections, ws.Msgs.Reliable, ws.Msgs.Unreliable, ws.Msgs.Scoped, ws.FrameMs, ws.Transport)
	t.Logf("WebTransport page: client %d, %d snapshots; %d corrections", wt.ID, wt.Snapshots, wt.Corrections)
	require.True(t, ws.Converged, ws.ConvergeError)
	require.True(t, wt.Converged, wt.ConvergeError)
	require.Empty(t, ws.Msgs.Err)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var err error
		m.do(func() {
			s, e := m.srv.State()
			require.NoError(t, e)
			err = native.Converged(s)
		})
		if err == nil {
			break
		}
		require.True(t, time.Now().Before(deadline), "the native player did not converge: %v", err)
		time.Sleep(20 * time.Millisecond) // (polling the match)
	}
	var pokes, wrong int
	m.do(func() { pokes, wrong = m.srv.Pokes[uint8(ws.ID)], m.srv.PokesWrong[uint8(ws.ID)] })
	require.Greater(t, pokes, 30, "the WebSocket page's pokes reached the server")
	require.Zero(t, wrong)
}
