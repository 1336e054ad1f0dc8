//go:build !js

// Package webtransporttest runs Go/WebAssembly pages in headless Chromium, for a
// game's tests and for its own check programs: it builds a js/wasm command, serves it
// with Go's wasm_exec.js, and drives the browser with chromedp.
//
// From a program: [StartChromium] starts the browser ([Browser]: its chromedp
// context, the page's console, Close); [Build] builds a command for js/wasm;
// [NewWasmHandler] serves the binary and wasm_exec.js beside a page of the caller's;
// [Listen] listens for WebTransport on a port whose TCP twin [ServePages] serves the
// pages of the session's origin on. Each returns an error.
//
// From a test, the same with the test's lifetime and failures: [Chromium] (a test
// skips without the browser, unless CI is set: CI installs it, so there a missing
// browser fails; and under the race detector), [BuildWasm], [WasmHandler],
// [PageServer].
package webtransporttest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/archenet/archenet/transport/webtransport"
)

// Flags are the Chromium flags the tests run with: headless as root (no sandbox), no
// background traffic, software WebGL (SwiftShader) for canvas games. QUIC stays on:
// WebTransport needs it.
var Flags = map[string]any{
	"headless":                            true,
	"no-sandbox":                          true,
	"no-first-run":                        true,
	"no-default-browser-check":            true,
	"disable-background-networking":       true,
	"disable-component-update":            true,
	"disable-sync":                        true,
	"disable-extensions":                  true,
	"disable-dev-shm-usage":               true,
	"mute-audio":                          true,
	"hide-scrollbars":                     true,
	"use-angle":                           "swiftshader",
	"enable-unsafe-swiftshader":           true,
	"ignore-gpu-blocklist":                true,
	"disable-renderer-backgrounding":      true,
	"disable-background-timer-throttling": true,
}

// ChromiumPath is the path of the chromium (or chromium-browser, google-chrome)
// binary on $PATH, or "" when there is none.
func ChromiumPath() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// Browser is a headless Chromium a program drives ([StartChromium]).
type Browser struct {
	ctx     context.Context // the first tab
	cancel  func()
	tmpDir  string // the profile StartChromium made ("" when the caller gave one)
	mu      sync.Mutex
	console []string
}

// StartChromium starts headless Chromium with [Flags] (and extra options, which
// override them) and returns it with its first tab open. Its profile is in
// userDataDir, or in a temporary directory that Close removes when userDataDir is "".
func StartChromium(userDataDir string, extra ...chromedp.ExecAllocatorOption) (*Browser, error) {
	path := ChromiumPath()
	if path == "" {
		return nil, errors.New("webtransporttest: no chromium on $PATH (apt-get install -y chromium)")
	}
	b := &Browser{}
	if userDataDir == "" {
		dir, err := os.MkdirTemp("", "archenet-chromium-")
		if err != nil {
			return nil, err
		}
		userDataDir, b.tmpDir = dir, dir
	}
	opts := []chromedp.ExecAllocatorOption{chromedp.ExecPath(path), chromedp.UserDataDir(userDataDir), chromedp.WindowSize(800, 800)}
	for k, v := range Flags {
		opts = append(opts, chromedp.Flag(k, v))
	}
	opts = append(opts, extra...)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	b.ctx, b.cancel = ctx, func() { cancel(); cancelA() }
	// The page's console and uncaught exceptions, for Console.
	err := chromedp.Listen(ctx, func(ev any) { // starts the browser
		var line string
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			args := make([]string, 0, len(ev.Args))
			for _, a := range ev.Args {
				if a.Value != nil {
					args = append(args, string(a.Value))
				} else {
					args = append(args, a.Description)
				}
			}
			line = "console." + string(ev.Type) + ": " + strings.Join(args, " ")
		case *runtime.EventExceptionThrown:
			d := ev.ExceptionDetails
			line = "exception: " + d.Text
			if d.Exception != nil {
				line += " " + d.Exception.Description
			}
		default:
			return
		}
		b.mu.Lock()
		if len(b.console) < maxConsole {
			b.console = append(b.console, line)
		}
		b.mu.Unlock()
	})
	if err != nil {
		_ = b.Close()
		return nil, fmt.Errorf("webtransporttest: starting chromium: %w", err)
	}
	return b, nil
}

// maxConsole bounds the console lines a Browser keeps.
const maxConsole = 200

// Context is the browser's first tab, for chromedp.Run; chromedp.NewContext(it)
// opens another.
func (b *Browser) Context() context.Context { return b.ctx }

// Console returns the page's console lines and uncaught exceptions so far, in
// order (the first 200), as "console.log: ..." and "exception: ...".
func (b *Browser) Console() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.console)
}

// Close ends the browser and removes the profile StartChromium made.
func (b *Browser) Close() error {
	b.cancel()
	if b.tmpDir != "" {
		return os.RemoveAll(b.tmpDir)
	}
	return nil
}

// Chromium starts headless Chromium for the test ([StartChromium]) and returns its
// chromedp context (a tab), closed at the end of the test; the page's console goes
// to the test's log if it fails. Without a chromium binary the test is skipped, or
// fails when the environment variable CI is set. Under the race detector it is
// skipped: the browser tests run in real time beside a browser that loads both cores,
// which would make the other real-time tests of a parallel race run miss their
// bounds; .ci/run runs them in a step of their own, without it.
func Chromium(t testing.TB, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	skipWithoutChromium(t)
	b, err := StartChromium(t.TempDir(), extra...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, l := range b.Console() {
				t.Logf("page %s", l)
			}
		}
		_ = b.Close()
	})
	return b.Context()
}

// Build builds the command in package pkg (a path the go command understands, run in
// directory dir; "" for the current one) for GOOS=js GOARCH=wasm into out, with
// flags before the package (e.g. "-trimpath", "-ldflags=-s -w": a page's
// production build). The error carries the go command's output.
func Build(dir, pkg, out string, flags ...string) error {
	args := append(append([]string{"build", "-o", out}, flags...), pkg)
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s for js/wasm: %w\n%s", pkg, err, b)
	}
	return nil
}

// skipWithoutChromium is Chromium's rule for when a test runs without it.
func skipWithoutChromium(t testing.TB) {
	t.Helper()
	if raceEnabled {
		t.Skip("headless Chromium tests run without the race detector (.ci/run's browser step)")
	}
	if ChromiumPath() == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("chromium not installed, and CI is set (.ci/run installs it)")
		}
		t.Skip("chromium not installed (apt-get install -y chromium)")
	}
}

// BuildWasm builds the command in package pkg (a path the go command understands, run
// in directory dir; "" for the current one) for GOOS=js GOARCH=wasm and returns the
// binary's path, in the test's temporary directory.
func BuildWasm(t testing.TB, dir, pkg string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "main.wasm")
	start := time.Now()
	if err := Build(dir, pkg, out); err != nil {
		t.Fatal(err)
	}
	t.Logf("built %s for js/wasm in %v", pkg, time.Since(start).Round(time.Millisecond))
	return out
}

// WasmExecJS returns the path of the wasm_exec.js of the go command's toolchain (the
// one BuildWasm builds with; the two must match).
func WasmExecJS() (string, error) {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return "", err
	}
	root := strings.TrimSpace(string(out))
	for _, p := range []string{filepath.Join(root, "lib", "wasm", "wasm_exec.js"), filepath.Join(root, "misc", "wasm", "wasm_exec.js")} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", os.ErrNotExist
}

// NewWasmHandler serves wasmPath at /main.wasm and the toolchain's wasm_exec.js at
// /wasm_exec.js; every other path goes to page. It fails when the toolchain has no
// wasm_exec.js.
func NewWasmHandler(wasmPath string, page http.Handler) (http.Handler, error) {
	execJS, err := WasmExecJS()
	if err != nil {
		return nil, fmt.Errorf("webtransporttest: wasm_exec.js not found in the Go toolchain: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/main.wasm", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/wasm")
		http.ServeFile(w, r, wasmPath)
	})
	mux.HandleFunc("/wasm_exec.js", func(w http.ResponseWriter, r *http.Request) { http.ServeFile(w, r, execJS) })
	mux.Handle("/", page)
	return mux, nil
}

// WasmHandler is [NewWasmHandler] for a test, which fails without wasm_exec.js.
func WasmHandler(t testing.TB, wasmPath string, page http.Handler) http.Handler {
	t.Helper()
	h, err := NewWasmHandler(wasmPath, page)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// ServePages serves h over HTTP on TCP 127.0.0.1:port until the server is closed.
// With the port of a WebTransport listener's UDP address, its pages are of the
// session's origin (same host and port), which the listener's default origin policy
// admits.
func ServePages(port int, h http.Handler) (*httptest.Server, error) {
	held.Lock()
	ln := held.tcp[port]
	delete(held.tcp, port)
	held.Unlock()
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err != nil {
			return nil, fmt.Errorf("webtransporttest: serving pages on the session's port: %w", err)
		}
	}
	s := httptest.NewUnstartedServer(h)
	_ = s.Listener.Close()
	s.Listener = ln
	s.Start()
	return s, nil
}

// held are the TCP twins of Listen's ports, kept for ServePages.
var held = struct {
	sync.Mutex
	tcp map[int]net.Listener
}{tcp: map[int]net.Listener{}}

// Listen listens for WebTransport sessions (webtransport.Listen) on a loopback
// UDP port whose TCP twin it holds for [ServePages] (and [PageServer]) of that
// port: the pages of the session's origin. A port picked by
// webtransport.Listen("127.0.0.1:0") alone may have its TCP twin taken.
func Listen(cfg *webtransport.Config) (*webtransport.Listener, error) {
	for i := 0; ; i++ {
		tcp, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		l, err := webtransport.Listen(tcp.Addr().String(), cfg)
		if err == nil {
			held.Lock()
			held.tcp[l.Addr().(*net.UDPAddr).Port] = tcp
			held.Unlock()
			return l, nil
		}
		_ = tcp.Close()
		if i == 19 {
			return nil, fmt.Errorf("webtransporttest: no port free on both TCP and UDP: %w", err)
		}
	}
}

// PageServer is [ServePages] for the rest of the test.
func PageServer(t testing.TB, port int, h http.Handler) *httptest.Server {
	t.Helper()
	s, err := ServePages(port, h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// RunPage is the HTML of a page that runs /main.wasm (with the page's query string
// visible to it as location.search) and sets window.goExited when the program has
// ended (returned, or panicked: the panic is on the console, which [Chromium] logs
// when the test fails).
const RunPage = `<!doctype html><html><head><meta charset="utf-8"><title>wasm</title>
<script src="/wasm_exec.js"></script></head><body><pre id="log"></pre><script>
const go = new Go();
WebAssembly.instantiateStreaming(fetch("/main.wasm"), go.importObject).then(r => go.run(r.instance))
  .then(() => { window.goExited = true; })
  .catch(e => { window.goExited = true; window.probeResult = JSON.stringify({error: "wasm: " + e}); });
</script></body></html>`
