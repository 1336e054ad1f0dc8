package main

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/replication/debugview"
	"github.com/archenet/archenet/transport/sim"
)

// TestDebugViewChromium loads the network debugger page of a running arena
// (server and 3 bots over transport/sim, simulated time kept moving while
// the browser polls) in headless Chromium, and checks that the charts show
// live, non-zero series: through the values the page writes into the DOM,
// and through the pixels of a screenshot. Skipped without chromium (.ci/run
// installs it).
//
// ARENA_DEBUGVIEW_PNG=debugview.png go test ./examples/arena -run DebugViewChromium
// rewrites the README's screenshot (examples/arena/debugview.png).
func TestDebugViewChromium(t *testing.T) {
	browser, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium not installed (apt-get install -y chromium)")
	}
	s := newSimArena(t, 7, 3, sim.Link{Up: sim.Conditions{Latency: 15 * time.Millisecond}, Down: sim.Conditions{Latency: 15 * time.Millisecond, Loss: 0.02}}, 0)
	rec := attachDebugger(s.arena, debugview.Options{Interval: 250 * time.Millisecond, Window: 30 * time.Second, Now: s.net.Now})
	s.run(6 * time.Second)
	require.GreaterOrEqual(t, len(rec.Stats(0).Samples), 20)

	// Keep the arena running (simulated time at about wall speed) while the
	// browser loads the page: the recorder is sampled on this goroutine only.
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var runErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		tk := time.NewTicker(simFrame)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
			}
			s.now = s.now.Add(simFrame)
			s.net.AdvanceTo(s.now)
			if runErr = s.arena.Frame(s.now); runErr != nil {
				return
			}
		}
	}()
	defer func() {
		stop()
		wg.Wait()
		require.NoError(t, runErr)
	}()

	web := httptest.NewServer(debugview.Handler(rec))
	defer web.Close()
	url := web.URL + "/"

	chrome := func(args ...string) []byte {
		t.Helper()
		cctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		base := []string{"--headless", "--disable-gpu", "--no-sandbox", "--hide-scrollbars", "--mute-audio",
			"--no-first-run", "--disable-extensions", "--disable-dev-shm-usage",
			"--user-data-dir=" + t.TempDir(), "--window-size=1000,760", "--virtual-time-budget=3000"}
		cmd := exec.CommandContext(cctx, browser, append(append(base, args...), url)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		require.NoError(t, err, "chromium: %s", stderr.String())
		return out
	}

	// The DOM: the page's own record of what it drew.
	dom := string(chrome("--dump-dom"))
	attr := func(id, name string) string {
		t.Helper()
		re := regexp.MustCompile(`<[^>]*id="` + id + `"[^>]*>`)
		tag := re.FindString(dom)
		require.NotEmpty(t, tag, "element #%s in the DOM", id)
		m := regexp.MustCompile(` data-` + name + `="([^"]*)"`).FindStringSubmatch(tag)
		require.NotNil(t, m, "#%s data-%s in %s", id, name, tag)
		return m[1]
	}
	num := func(id, name string) float64 {
		t.Helper()
		v, err := strconv.ParseFloat(attr(id, name), 64)
		require.NoError(t, err)
		return v
	}
	lasts := func(id string) []float64 {
		t.Helper()
		var vs []float64
		for _, f := range strings.Split(attr(id, "last"), ",") {
			v, err := strconv.ParseFloat(f, 64)
			require.NoError(t, err, "#%s data-last %q", id, f)
			vs = append(vs, v)
		}
		return vs
	}
	require.GreaterOrEqual(t, num("summary", "samples"), 20.0)
	require.Equal(t, 3.0, num("summary", "clients"))
	require.Positive(t, num("summary", "down-bps"))
	require.Positive(t, num("summary", "tick"))
	for _, id := range []string{"chart-down", "chart-budget", "chart-rtt"} {
		require.Equal(t, 3.0, num(id, "series"), id)
		for _, v := range lasts(id) {
			require.Positive(t, v, "%s: a client's latest value", id)
		}
	}
	require.GreaterOrEqual(t, num("chart-loss", "series"), 3.0)
	rec4 := lasts("chart-records")
	require.Len(t, rec4, 4)
	require.Positive(t, rec4[0], "delta records per tick")
	comps := lasts("chart-comp")
	require.Len(t, comps, 5+2) // the arena's 5 components, framing, headers
	require.Positive(t, comps[0], "Transform bytes")
	require.Positive(t, num("chart-tick", "max"))
	require.Contains(t, dom, "<td>Transform</td>")

	// The pixels: the bandwidth chart's plot area holds lines in the series
	// colours, not just background and grid.
	shot := filepath.Join(t.TempDir(), "debugview.png")
	chrome("--screenshot=" + shot)
	f, err := os.Open(shot)
	require.NoError(t, err)
	img, err := png.Decode(f)
	_ = f.Close()
	require.NoError(t, err)
	rect := strings.Split(attr("chart-down", "rect"), ",")
	require.Len(t, rect, 4)
	var r [4]int
	for i, v := range rect {
		r[i], err = strconv.Atoi(v)
		require.NoError(t, err)
	}
	plot := image.Rect(r[0]+44, r[1]+6, r[0]+r[2]-6, r[1]+r[3]-18) // draw()'s margins
	require.True(t, plot.In(img.Bounds()), "chart %v within the screenshot %v", plot, img.Bounds())
	series := []([3]uint8){{0x1f, 0x77, 0xb4}, {0xd6, 0x27, 0x28}, {0x2c, 0xa0, 0x2c}}
	counts := make([]int, len(series))
	for y := plot.Min.Y; y < plot.Max.Y; y++ {
		for x := plot.Min.X; x < plot.Max.X; x++ {
			cr, cg, cb, _ := img.At(x, y).RGBA()
			for i, c := range series {
				if near(cr>>8, c[0]) && near(cg>>8, c[1]) && near(cb>>8, c[2]) {
					counts[i]++
				}
			}
		}
	}
	for i, n := range counts {
		require.Greater(t, n, 50, "pixels of client series %d in the bandwidth chart %v (counts %v)", i+1, plot, counts)
	}
	if dst := os.Getenv("ARENA_DEBUGVIEW_PNG"); dst != "" {
		data, err := os.ReadFile(shot)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(dst, data, 0o644))
	}
}

func near(v uint32, want uint8) bool { return v+12 >= uint32(want) && v <= uint32(want)+12 }

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestRunHTTPFlag runs the command with -http over QUIC and reads the
// debugger's stats while it runs.
func TestRunHTTPFlag(t *testing.T) {
	if testing.Short() {
		t.Skip("real time")
	}
	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() { done <- run([]string{"-duration", "3s", "-clients", "1", "-http", ":0"}, &out, &errb) }() // (a port alone: loopback)
	re := regexp.MustCompile(`network debugger on (http://127\.0\.0\.1:\d+/)`)
	var url string
	var st debugview.Stats
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if url == "" {
			if m := re.FindStringSubmatch(out.String()); m != nil {
				url = m[1]
			}
			continue
		}
		res, err := http.Get(url + "stats")
		require.NoError(t, err)
		require.NoError(t, json.NewDecoder(res.Body).Decode(&st))
		_ = res.Body.Close()
		if len(st.Samples) >= 2 {
			break
		}
	}
	require.NotEmpty(t, url, "stdout: %s", out.String())
	require.GreaterOrEqual(t, len(st.Samples), 2)
	last := st.Samples[len(st.Samples)-1]
	require.Len(t, last.Clients, 1)
	require.Positive(t, last.SnapshotBps)
	require.True(t, last.HasTickTime)
	require.Equal(t, 0, <-done, "stderr: %s", errb.String())

	var o, e bytes.Buffer
	require.Equal(t, 2, run([]string{"-mode", "client", "-http", ":0"}, &o, &e))
	require.Contains(t, e.String(), "-http")
}

// The debugger page has no authentication: a port alone binds loopback; an
// interface must be named to serve it elsewhere.
func TestDebuggerAddr(t *testing.T) {
	require.Equal(t, "127.0.0.1:8080", debuggerAddr(":8080"))
	require.Equal(t, "0.0.0.0:8080", debuggerAddr("0.0.0.0:8080"))
	require.Equal(t, "[::1]:8080", debuggerAddr("[::1]:8080"))
	require.Equal(t, "host.example:80", debuggerAddr("host.example:80"))
}
