//go:build !js

// Package webtransporttest runs Go/WebAssembly pages in headless Chromium for tests:
// it builds a js/wasm command, serves it with Go's wasm_exec.js, and drives the
// browser with chromedp.
//
// [Chromium] starts the browser (a test skips without it, unless CI is set: CI installs
// it, so there a missing browser fails; and under the race detector); [BuildWasm] builds a command for js/wasm;
// [WasmHandler] serves the binary and wasm_exec.js beside a page of the caller's;
// [PageServer] serves pages of a WebTransport listener's origin.
package webtransporttest

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
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

// Chromium starts headless Chromium for the test and returns its chromedp context (a
// tab), closed at the end of the test. Without a chromium binary the test is skipped,
// or fails when the environment variable CI is set. Under the race detector it is
// skipped: the browser tests run in real time beside a browser that loads both cores,
// which would make the other real-time tests of a parallel race run miss their
// bounds; .ci/run runs them in a step of their own, without it.
func Chromium(t testing.TB, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	if raceEnabled {
		t.Skip("headless Chromium tests run without the race detector (.ci/run's browser step)")
	}
	path := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("chromium not installed, and CI is set (.ci/run installs it)")
		}
		t.Skip("chromium not installed (apt-get install -y chromium)")
	}
	opts := []chromedp.ExecAllocatorOption{chromedp.ExecPath(path), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(800, 800)}
	for k, v := range Flags {
		opts = append(opts, chromedp.Flag(k, v))
	}
	opts = append(opts, extra...)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelA() })
	// The page's console and uncaught exceptions go to the test's log if it fails.
	var mu sync.Mutex
	var console []string
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
		mu.Lock()
		if len(console) < 200 {
			console = append(console, line)
		}
		mu.Unlock()
	})
	if err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for _, l := range console {
			t.Logf("page %s", l)
		}
	})
	return ctx
}

// BuildWasm builds the command in package pkg (a path the go command understands, run
// in directory dir; "" for the current one) for GOOS=js GOARCH=wasm and returns the
// binary's path.
func BuildWasm(t testing.TB, dir, pkg string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "main.wasm")
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm")
	start := time.Now()
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s for js/wasm: %v\n%s", pkg, err, b)
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

// WasmHandler serves wasmPath at /main.wasm and the toolchain's wasm_exec.js at
// /wasm_exec.js; every other path goes to page.
func WasmHandler(t testing.TB, wasmPath string, page http.Handler) http.Handler {
	t.Helper()
	execJS, err := WasmExecJS()
	if err != nil {
		t.Fatalf("wasm_exec.js not found in the Go toolchain: %v", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/main.wasm", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/wasm")
		http.ServeFile(w, r, wasmPath)
	})
	mux.HandleFunc("/wasm_exec.js", func(w http.ResponseWriter, r *http.Request) { http.ServeFile(w, r, execJS) })
	mux.Handle("/", page)
	return mux
}

// PageServer serves h over HTTP on TCP 127.0.0.1:port for the rest of the test. With
// the port of a WebTransport listener's UDP address, its pages are of the session's
// origin (same host and port), which the listener's default origin policy admits.
func PageServer(t testing.TB, port int, h http.Handler) *httptest.Server {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatalf("serving pages on the session's port: %v", err)
	}
	s := httptest.NewUnstartedServer(h)
	_ = s.Listener.Close()
	s.Listener = ln
	s.Start()
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
