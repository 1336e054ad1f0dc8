//go:build !js

package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/transport/webtransport/webtransporttest"
)

// pageBudgetGzip bounds the page's WebAssembly (-trimpath -ldflags='-s -w',
// gzip -9): measured 1.30 MB (4.7 MB raw). An empty page that prints with fmt
// is 0.77 MB of it.
const pageBudgetGzip = 1363148 // 1.3 MiB

// TestBrowserWebgame builds the page, serves the game, and plays it in
// headless Chromium over each transport: the page mirrors the 8 dots, and
// a click on it gets a ninth from the server.
func TestBrowserWebgame(t *testing.T) {
	ctx := webtransporttest.Chromium(t)
	wasm := filepath.Join(t.TempDir(), "webgame.wasm")
	build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", wasm, ".")
	build.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	bin, err := os.ReadFile(wasm)
	require.NoError(t, err)
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	_, _ = zw.Write(bin)
	require.NoError(t, zw.Close())
	t.Logf("page: %d bytes of WebAssembly, %d gzipped (budget %d)", len(bin), gz.Len(), pageBudgetGzip)
	require.LessOrEqual(t, gz.Len(), pageBudgetGzip, "the page's WebAssembly, gzipped, is over budget")
	urls, stop, done := make(chan string, 1), make(chan struct{}), make(chan error, 1)
	go func() { done <- run("127.0.0.1:0", bin, func(u string) { urls <- u }, stop) }()
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
			before := wait(" dots")
			require.NoError(t, chromedp.Do(rctx, chromedp.MouseClickXY(200, 150)))
			after := func() string {
				for {
					s := wait(" dots")
					if s != before {
						return s
					}
				}
			}()
			t.Logf("%s → %s", before, after)
		})
	}
}
