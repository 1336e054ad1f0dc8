package main

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/archenet/archenet/transport/browser"
	"github.com/archenet/archenet/transport/websocket"
	"github.com/archenet/archenet/transport/webtransport"
)

//go:embed web/index.html
var indexHTML []byte

// webServer is what -web serves: the WebTransport listener on UDP ADDR and, on TCP
// ADDR (the same port number), the page, the browser build of examples/arenaview,
// the endpoint document with the certificate hashes and the WebSocket fallback. A page served from
// http://ADDR/ opens its session at https://ADDR/archenet: the same host and port,
// so the listener's default origin policy admits it.
type webServer struct {
	l     *webtransport.Listener
	ws    *websocket.Listener // the fallback, at /archenet.ws on the page's server
	certs *webtransport.SelfSigned
	http  *http.Server
	url   string
}

// startWeb starts the WebTransport listener and the page server on addr.
func startWeb(addr, wasm string, stdout io.Writer) (*webServer, error) {
	certs, err := webtransport.NewSelfSigned(webtransport.SelfSignedConfig{})
	if err != nil {
		return nil, err
	}
	tcp, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("-web: %w", err)
	}
	// The session's UDP port is the page's TCP port.
	l, err := webtransport.Listen(tcp.Addr().String(), &webtransport.Config{TLS: certs.TLSConfig()})
	if err != nil {
		tcp.Close()
		return nil, fmt.Errorf("-web: %w", err)
	}
	fail := func(err error) (*webServer, error) {
		tcp.Close()
		l.Close()
		return nil, err
	}
	bin, err := loadWasm(wasm, stdout)
	if err != nil {
		return fail(err)
	}
	execJS, err := browser.WasmExecJS()
	if err != nil {
		return fail(fmt.Errorf("-web: wasm_exec.js of the Go toolchain: %w", err))
	}
	mux := http.NewServeMux()
	mux.Handle("/{$}", browser.Static("text/html; charset=utf-8", indexHTML))
	mux.Handle("/wasm_exec.js", browser.Static("text/javascript", execJS))
	mux.Handle("/arenaview.wasm", browser.Static("application/wasm", bin.raw))
	mux.Handle("/archenet.json", webtransport.EndpointHandler(l.URL, certs.Hashes))
	// The fallback for browsers without WebTransport and networks without
	// UDP: a WebSocket on the page's own server.
	ws, err := websocket.NewListener(nil)
	if err != nil {
		return fail(err)
	}
	mux.Handle("/archenet.ws", ws)
	w := &webServer{l: l, ws: ws, certs: certs, http: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}}
	w.url = "http://" + tcp.Addr().String() + "/"
	go func() { _ = w.http.Serve(tcp) }()
	fmt.Fprintf(stdout, "browser players: open %s in Chromium (WebTransport on UDP %s, a WebSocket at /archenet.ws as the fallback; wasm %.1f MB, %.1f MB gzipped)\n",
		w.url, l.Addr(), float64(len(bin.raw))/1e6, float64(len(bin.gz))/1e6)
	return w, nil
}

func (w *webServer) close() {
	_ = w.http.Close()
	// The listener is closed by the server's merged listener.
}

type wasmBinary struct{ raw, gz []byte }

// loadWasm reads the browser build from path, or builds examples/arenaview for
// js/wasm when path is empty (from a checkout of the repository, with the go command).
func loadWasm(path string, stdout io.Writer) (wasmBinary, error) {
	if path == "" {
		dir := filepath.Join("examples", "arenaview")
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
			return wasmBinary{}, errors.New("-web: examples/arenaview not found: run from the repository root, or give -wasm FILE (GOOS=js GOARCH=wasm go build in examples/arenaview)")
		}
		out, err := os.MkdirTemp("", "archenet-arena-wasm")
		if err != nil {
			return wasmBinary{}, err
		}
		defer os.RemoveAll(out)
		path = filepath.Join(out, "arenaview.wasm")
		start := time.Now()
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", path, ".")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm")
		if b, err := cmd.CombinedOutput(); err != nil {
			return wasmBinary{}, fmt.Errorf("-web: building examples/arenaview for js/wasm: %v\n%s", err, b)
		}
		fmt.Fprintf(stdout, "built examples/arenaview for js/wasm in %v\n", time.Since(start).Round(100*time.Millisecond))
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return wasmBinary{}, fmt.Errorf("-web: %w", err)
	}
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	_, _ = zw.Write(raw)
	_ = zw.Close()
	return wasmBinary{raw: raw, gz: gz.Bytes()}, nil
}
