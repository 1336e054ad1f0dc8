// Package browser serves a browser game and connects its page, one call on
// each side.
//
// On the server, [Serve] listens on a port pair it picks together (TCP for
// the page, the same UDP port for WebTransport) and serves the page, the
// game's js/wasm build, the wasm_exec.js of the Go toolchain, the
// WebTransport endpoint document (/archenet.json, with a self-signed
// certificate's hashes that it rotates) and the WebSocket fallback
// (/archenet.ws); [Server.Listener] is both transports merged, for
// replication.NewServer (and beside native clients' transport/quic with
// transport.MergeListeners).
//
// In the page (a js/wasm build), [Dial] connects to the server that served
// it: over WebTransport, or over the WebSocket when the browser has none,
// when its dial fails within a few seconds, or when the page's URL says
// transport=websocket. Both return a transport.Conn for
// replication.NewClient.
//
// # Page weight
//
// Build the page with go build -trimpath -ldflags='-s -w' (GOOS=js
// GOARCH=wasm); Serve sends it gzipped. The smallest game on this package
// (examples/webgame) is 4.7 MB of WebAssembly, 1.30 MB gzipped. A page
// links no slog handler unless it passes a *slog.Logger
// (replication.ClientConfig.Logger; a nil one logs to the browser's console)
// and no zstd unless built with -tags archenet_zstd, which a page needs only
// to join a server with replication.ServerConfig.Compression on.
package browser
