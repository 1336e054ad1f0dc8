package acceptance

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/archenet/archenet/transport/webtransport/webtransporttest"
)

// Size budget of the browser build (-trimpath -ldflags='-s -w', as examples/arena -web
// builds it): measured 13.8 MB raw, 3.27 MB gzipped. Ebitengine is most of it: an
// empty Ebitengine v2.8.8 game is 9.8 MB raw, 2.42 MB gzipped, and its shaders'
// text/template makes the linker keep every exported method of every type in an
// interface.
const (
	wasmBudgetRaw  = 14 << 20
	wasmBudgetGzip = 13 << 18 // 3.25 MiB
)

var updateBrowser = os.Getenv("ARENA_BROWSER_PNG") != ""

// TestBrowserPlayer is the acceptance run: the documented command
// (examples/arena -web, server + 2 native bots) serves the page, headless Chromium
// plays the scripted avatar over WebTransport with the same client code as the native
// build, and the test checks the budget, the figures the page publishes and the
// pixels: the own avatar, NPCs and the bots' avatars are drawn.
//
// ARENA_BROWSER_PNG=1 go test ./acceptance -run BrowserPlayer rewrites
// ../browser.png, the README's picture.
func TestBrowserPlayer(t *testing.T) {
	ctx := webtransporttest.Chromium(t)
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	wasm := filepath.Join(dir, "arenaview.wasm")
	build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", wasm, ".")
	build.Dir = ".."
	build.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the browser client: %v\n%s", err, b)
	}
	raw, err := os.ReadFile(wasm)
	if err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	_, _ = zw.Write(raw)
	_ = zw.Close()
	t.Logf("browser build: %d bytes raw, %d gzipped (budget %d, %d)", len(raw), gz.Len(), wasmBudgetRaw, wasmBudgetGzip)
	if len(raw) > wasmBudgetRaw || gz.Len() > wasmBudgetGzip {
		t.Fatalf("browser build over budget: %d raw (budget %d), %d gzipped (budget %d)", len(raw), wasmBudgetRaw, gz.Len(), wasmBudgetGzip)
	}

	arena := filepath.Join(dir, "arena")
	build = exec.Command("go", "build", "-o", arena, "./examples/arena")
	build.Dir = root
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building examples/arena: %v\n%s", err, b)
	}
	srv := exec.Command(arena, "-web", "127.0.0.1:0", "-wasm", wasm, "-clients", "2", "-duration", "3m")
	srv.Dir = root
	out, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	srv.Stderr = &stderr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = srv.Process.Signal(os.Interrupt)
		_ = srv.Wait()
		t.Logf("arena stderr:\n%s", stderr.String())
	}()
	lines := make(chan string, 256)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var url string
	deadline := time.After(2 * time.Minute)
	for url == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("arena exited before serving the page: %s", stderr.String())
			}
			t.Log(l)
			if m := regexp.MustCompile(`open (http://\S+) in Chromium`).FindStringSubmatch(l); m != nil {
				url = m[1]
			}
		case <-deadline:
			t.Fatal("the arena did not serve the page within 2 minutes")
		}
	}
	go func() {
		for l := range lines {
			if strings.HasPrefix(l, "tick ") || strings.HasPrefix(l, "summary") || strings.HasPrefix(l, "  down") {
				t.Log(l)
			}
		}
	}()

	// Over WebTransport, then over the WebSocket fallback (as for a browser
	// without WebTransport, or a network without UDP).
	for _, via := range []string{"webtransport", "websocket"} {
		q := "?script&overlay"
		if via == "websocket" {
			q += "&transport=websocket"
		}
		t.Run(via, func(t *testing.T) { playPage(t, ctx, url+q, via) })
	}
	// ARENA_NAV_RUNS=7: navigation → first snapshot, that many loads of the page
	// over each transport in a fresh tab each (the browser's caches warm, as for a
	// returning player), for the median the issue asks of a quiet machine.
	if n, _ := strconv.Atoi(os.Getenv("ARENA_NAV_RUNS")); n > 0 {
		// The first tab's page would go on drawing beside the loads.
		if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
			t.Fatal(err)
		}
		for _, via := range []string{"webtransport", "websocket"} {
			var ms []float64
			for range n {
				ms = append(ms, firstSnapshot(t, ctx, url+"?transport="+via))
			}
			slices.Sort(ms)
			t.Logf("navigation → first snapshot over %s, %d loads: median %.0f ms (min %.0f, max %.0f): %v", via, n, ms[len(ms)/2], ms[0], ms[len(ms)-1], ms)
		}
	}
}

// firstSnapshot loads pageURL in a new tab and returns when its first snapshot
// came, in milliseconds from the navigation.
func firstSnapshot(t *testing.T, ctx context.Context, pageURL string) float64 {
	tab, closeTab := chromedp.NewContext(ctx)
	defer closeTab()
	rctx, cancel := context.WithTimeout(tab, time.Minute)
	defer cancel()
	if err := chromedp.Do(rctx, chromedp.Navigate(pageURL)); err != nil {
		t.Fatal(err)
	}
	ms, err := chromedp.Run(rctx, chromedp.Poll[float64](`window.archenet && window.archenet.firstSnapshotMs`,
		chromedp.WithPollingInterval(20*time.Millisecond), chromedp.WithPollingTimeout(30*time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

// playPage plays the arena page at pageURL in the browser of ctx until its
// avatar has been drawn 300 frames, over the transport via, and checks the
// figures the page publishes and the pixels.
func playPage(t *testing.T, ctx context.Context, pageURL, via string) {
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := chromedp.Do(rctx, chromedp.Navigate(pageURL)); err != nil {
		t.Fatal(err)
	}
	// 300 frames with the own avatar (5 s at 60 TPS), or an error in the page.
	state, err := chromedp.Run(rctx, chromedp.Poll[string](
		`window.archenet && (window.archenet.state == "error" || window.archenet.avatarFrames >= 300) && window.archenet.state`,
		chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(90*time.Second)))
	if err != nil {
		status, _ := chromedp.Run(rctx, chromedp.Evaluate[string](`JSON.stringify(window.archenet || {})`))
		t.Fatalf("waiting for play: %v (window.archenet = %s)", err, status)
	}
	stats, err := chromedp.Run(rctx, chromedp.Evaluate[map[string]any](`window.archenet`))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("page: %v", stats)
	if state != "playing" {
		t.Fatalf("page state %q: %v", state, stats["error"])
	}
	if stats["via"] != via {
		t.Fatalf("the page plays over %v, not %s", stats["via"], via)
	}
	shot, err := chromedp.Run(rctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatal(err)
	}
	c := census(img)
	t.Logf("screenshot census: %+v", c)
	if updateBrowser && via == "webtransport" {
		if err := os.WriteFile(filepath.Join("..", "browser.png"), shot, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	num := func(k string) float64 {
		v, _ := stats[k].(float64)
		return v
	}
	first := num("firstSnapshotMs")
	bytesPerTick := num("bytesIn") / num("secondsPlaying") / 30
	t.Logf("page load → WebAssembly client started %.0f ms → session open %.0f ms → Welcome %.0f ms → first snapshot %.0f ms → first game update %.0f ms", num("startMs"), num("connectedMs"), num("welcomeMs"), first, num("firstUpdateMs"))
	t.Logf("figures: page load → first snapshot %.0f ms; CPU %.2f ms per client tick (Update), %.2f ms per drawn frame (Draw); %.0f payload bytes per snapshot tick (30 Hz); %v datagrams received, %v dropped in the page's queue",
		first, num("updateMs"), num("drawMs"), bytesPerTick, stats["datagramsReceived"], stats["datagramsDropped"])
	if c.own.n < 60 || c.npc.n < 60*5 || c.remote.n < 60 {
		t.Fatalf("the arena is not drawn: own %d, NPC %d, remote avatars %d pixels", c.own.n, c.npc.n, c.remote.n)
	}
	if first <= 0 || first > 10000 {
		t.Fatalf("first snapshot at %.0f ms after the page started loading", first)
	}
	if num("datagramsDropped") != 0 {
		t.Fatalf("%v datagrams dropped in the page's receive queue", stats["datagramsDropped"])
	}
}
