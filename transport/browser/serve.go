//go:build !js

package browser

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/websocket"
	"github.com/archenet/archenet/transport/webtransport"
)

// Config configures [Serve].
type Config struct {
	// Addr is where to listen: host:port, the port used for TCP (the page,
	// the WebSocket) and UDP (WebTransport). Zero port: one whose UDP twin is
	// free too. Empty: "127.0.0.1:0".
	Addr string
	// Wasm is the game's js/wasm build (GOOS=js GOARCH=wasm go build;
	// -trimpath -ldflags='-s -w' makes it smaller). Required.
	Wasm []byte
	// Page is the HTML page at /. Nil: [DefaultPage], which runs /main.wasm
	// with a full-window canvas of id "game".
	Page []byte
	// WasmExecJS is the wasm_exec.js of the Go toolchain that built Wasm
	// (the two must match). Nil: the go command's, from `go env GOROOT`.
	WasmExecJS []byte
	// WebTransport and WebSocket configure the two transports (nil: their
	// defaults). WebTransport.TLS nil: a self-signed certificate, rotated,
	// whose hashes /archenet.json publishes.
	WebTransport *webtransport.Config
	WebSocket    *websocket.Config
	// Logger receives the page server's errors. Nil: slog.Default().
	Logger *slog.Logger
}

// DefaultPage is the page Serve serves at / without Config.Page.
var DefaultPage = []byte(`<!doctype html><html><head><meta charset="utf-8"><title>archenet</title>
<style>html,body{margin:0;height:100%;background:#111}canvas{display:block;width:100%;height:100%}</style>
<script src="/wasm_exec.js"></script></head><body><canvas id="game"></canvas><script>
const go = new Go();
WebAssembly.instantiateStreaming(fetch("/main.wasm"), go.importObject).then(r => go.run(r.instance))
  .catch(e => { document.body.style.color = "#eee"; document.body.textContent = "the game could not start: " + e; });
</script></body></html>`)

// Server is a browser game's page server and its two transports.
type Server struct {
	http     *http.Server
	tcp      net.Listener
	wt       *webtransport.Listener
	ws       *websocket.Listener
	listener transport.Listener
	url      string
}

// Serve starts the page server and both transports (see Config).
func Serve(cfg Config) (*Server, error) {
	if len(cfg.Wasm) == 0 {
		return nil, errors.New("browser: Config.Wasm is required (GOOS=js GOARCH=wasm go build)")
	}
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	if cfg.Page == nil {
		cfg.Page = DefaultPage
	}
	if cfg.WasmExecJS == nil {
		b, err := WasmExecJS()
		if err != nil {
			return nil, fmt.Errorf("browser: wasm_exec.js of the go command's toolchain (set Config.WasmExecJS): %w", err)
		}
		cfg.WasmExecJS = b
	}
	wtc := webtransport.Config{}
	if cfg.WebTransport != nil {
		wtc = *cfg.WebTransport
	}
	var certs *webtransport.SelfSigned
	if wtc.TLS == nil {
		var err error
		if certs, err = webtransport.NewSelfSigned(webtransport.SelfSignedConfig{}); err != nil {
			return nil, err
		}
		wtc.TLS = certs.TLSConfig()
	}
	tcp, wt, err := listenPair(cfg.Addr, &wtc)
	if err != nil {
		return nil, err
	}
	ws, err := websocket.NewListener(cfg.WebSocket)
	if err != nil {
		_ = tcp.Close()
		_ = wt.Close()
		return nil, err
	}
	var hashes func() []webtransport.CertHash
	if certs != nil {
		hashes = certs.Hashes
	}
	mux := http.NewServeMux()
	mux.Handle("/{$}", Static("text/html; charset=utf-8", cfg.Page))
	mux.Handle("/main.wasm", Static("application/wasm", cfg.Wasm))
	mux.Handle("/wasm_exec.js", Static("text/javascript", cfg.WasmExecJS))
	mux.Handle(EndpointPath, webtransport.EndpointHandler(wt.URL, hashes))
	mux.Handle(WebSocketPath, ws)
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	s := &Server{tcp: tcp, wt: wt, ws: ws, listener: transport.MergeListeners(wt, ws),
		http: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 8 << 10,
			ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)},
		url: "http://" + tcp.Addr().String() + "/"}
	go func() { _ = s.http.Serve(tcp) }()
	return s, nil
}

// listenPair listens on TCP and, on the same port, WebTransport's UDP:
// with port 0, a port whose UDP twin is free too.
func listenPair(addr string, cfg *webtransport.Config) (net.Listener, *webtransport.Listener, error) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, nil, fmt.Errorf("browser: Config.Addr %q: %w", addr, err)
	}
	tries := 1
	if port == "0" {
		tries = 20
	}
	for i := 0; ; i++ {
		tcp, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, nil, fmt.Errorf("browser: %w", err)
		}
		wt, err := webtransport.Listen(tcp.Addr().String(), cfg)
		if err == nil {
			return tcp, wt, nil
		}
		_ = tcp.Close()
		if i+1 >= tries {
			return nil, nil, fmt.Errorf("browser: WebTransport on the page's port %s: %w", tcp.Addr(), err)
		}
	}
}

// Static serves b as ctype (its Content-Type), gzipped (at the best
// compression, once) to clients that take it, with an ETag so that a reload
// revalidates instead of downloading again: what Serve serves the page, the
// WebAssembly and wasm_exec.js with, for a game that runs its own HTTP
// server.
func Static(ctype string, b []byte) http.Handler {
	sum := sha256.Sum256(b)
	etag := `"` + hex.EncodeToString(sum[:8]) + `"`
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	_, _ = zw.Write(b)
	_ = zw.Close()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", ctype)
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("ETag", etag)
		w.Header().Set("Vary", "Accept-Encoding")
		if r.Header.Get("If-None-Match") == etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		body := b
		if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") && gz.Len() < len(b) {
			w.Header().Set("Content-Encoding", "gzip")
			body = gz.Bytes()
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body)
	})
}

// WasmExecJS reads the wasm_exec.js of the go command's toolchain (`go env
// GOROOT`): the JavaScript support a page needs for a js/wasm build of the
// same toolchain.
func WasmExecJS() ([]byte, error) {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return nil, err
	}
	root := strings.TrimSpace(string(out))
	b, err := os.ReadFile(filepath.Join(root, "lib", "wasm", "wasm_exec.js"))
	if errors.Is(err, os.ErrNotExist) {
		b, err = os.ReadFile(filepath.Join(root, "misc", "wasm", "wasm_exec.js"))
	}
	return b, err
}

// Listener returns both transports merged: give it to
// replication.NewServer (with transport.MergeListeners to add native
// clients' transport/quic).
func (s *Server) Listener() transport.Listener { return s.listener }

// URL returns the page's address (http://host:port/).
func (s *Server) URL() string { return s.url }

// Close stops the page server and closes both transports (a replication
// server closing its listener closes them too).
func (s *Server) Close() error {
	err := s.http.Close()
	if e := s.listener.Close(); err == nil {
		err = e
	}
	return err
}
