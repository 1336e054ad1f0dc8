//go:build !js

package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	arche "github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/replication/replicationtest"

	"github.com/archenet/archenet/transport/webtransport/webtransporttest"
)

// pageBudgetGzip bounds the page's WebAssembly (-trimpath -ldflags='-s -w',
// gzip -9): measured 1.32 MB (4.77 MB raw). An empty page that prints with fmt
// is 0.77 MB of it.
const pageBudgetGzip = 1363148 // 1.3 MiB

// TestBrowserWebgame builds the page, serves the game, and plays it in
// headless Chromium over each transport: the page mirrors the 8 dots, a
// click on it gets a ninth from the server, and its mirrors are the server's
// quantized state at their state tick while everything moves (the live check;
// one value off by a step fails it). The page weighed is the game's build; the
// one played adds the check's hook (-tags archenet_check).
func TestBrowserWebgame(t *testing.T) {
	ctx := webtransporttest.Chromium(t)
	dir := t.TempDir()
	build := func(name string, flags ...string) []byte {
		out := filepath.Join(dir, name)
		require.NoError(t, webtransporttest.Build("", ".", out, append([]string{"-trimpath", "-ldflags=-s -w"}, flags...)...))
		b, err := os.ReadFile(out)
		require.NoError(t, err)
		return b
	}
	bin := build("webgame.wasm")
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	_, _ = zw.Write(bin)
	require.NoError(t, zw.Close())
	t.Logf("page: %d bytes of WebAssembly, %d gzipped (budget %d)", len(bin), gz.Len(), pageBudgetGzip)
	require.LessOrEqual(t, gz.Len(), pageBudgetGzip, "the page's WebAssembly, gzipped, is over budget")
	checked := build("webgame-check.wasm", "-tags", "archenet_check")
	var mu sync.Mutex // the server's history, recorded after each Send on run's goroutine
	history := replicationtest.NewHistory(Registry(), 64)
	serverDots := 0 // the server's dots after its last Send
	sent := func(w *arche.World, srv *replication.Server) {
		mu.Lock()
		defer mu.Unlock()
		require.NoError(t, history.Record(w, srv.NetID, srv.Tick()))
		q := w.Query(arche.All(arche.ComponentID[Dot](w)))
		serverDots = q.Count()
		q.Close()
	}
	dotsNow := func() int {
		mu.Lock()
		defer mu.Unlock()
		return serverDots
	}
	urls, stop, done := make(chan string, 1), make(chan struct{}), make(chan error, 1)
	go func() { done <- run("127.0.0.1:0", checked, func(u string) { urls <- u }, stop, sent) }()
	var url string
	select {
	case url = <-urls:
	case err := <-done:
		t.Fatal(err)
	}
	defer func() {
		close(stop)
		require.NoError(t, <-done)
	}()
	for _, via := range []string{"webtransport", "websocket"} {
		t.Run(via, func(t *testing.T) {
			tab, closeTab := chromedp.NewContext(ctx)
			defer closeTab()
			rctx, cancel := context.WithTimeout(tab, time.Minute)
			defer cancel()
			require.NoError(t, chromedp.Do(rctx, chromedp.Navigate(url+"?transport="+via)))
			wait := func(want string) string {
				t.Helper()
				for {
					s, err := chromedp.Run(rctx, chromedp.Evaluate[string](`String(window.webgame || "")`))
					require.NoError(t, err)
					require.False(t, strings.HasPrefix(s, "error"), s)
					if strings.Contains(s, want) {
						return s
					}
					require.NoError(t, rctx.Err(), "waiting for %q; page: %q", want, s)
					time.Sleep(50 * time.Millisecond) // (polling the page)
				}
			}
			s := wait("dots")
			require.Contains(t, s, "playing over "+via)
			n := dotsNow() // no dots come but by a click: the page shows them all first
			before := wait(fmt.Sprintf(": %d dots", n))
			require.NoError(t, chromedp.Do(rctx, chromedp.MouseClickXY(200, 150)))
			after := wait(fmt.Sprintf(": %d dots", n+1))
			t.Logf("%s → %s", before, after)
			capture := func() replicationtest.ClientCapture {
				h, err := chromedp.Run(rctx, chromedp.Evaluate[string](`window.webgameCapture()`))
				require.NoError(t, err)
				b, err := hex.DecodeString(h)
				require.NoError(t, err)
				var c replicationtest.ClientCapture
				require.NoError(t, c.UnmarshalBinary(b))
				return c
			}
			compared := 0
			for range 10 { // the live check, while the dots move
				c := capture()
				mu.Lock()
				r, err := history.CheckCapture(c, false)
				mu.Unlock()
				require.NoError(t, err)
				compared += r.Compared
				time.Sleep(50 * time.Millisecond) // (a few ticks apart)
			}
			require.GreaterOrEqual(t, compared, 10*(n+1), "every dot compared each time")
			c := capture() // one value off by one step fails it
			c.Mirrors[0].Lanes[0]++
			mu.Lock()
			_, err := history.CheckCapture(c, false)
			mu.Unlock()
			require.ErrorContains(t, err, "differs from the server's by 1 steps")
			t.Logf("live check: %d mirrors compared with the server's state at their tick; off by a step: %v", compared, err)
		})
	}
}
