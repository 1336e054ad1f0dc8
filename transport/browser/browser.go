package browser

import (
	"errors"
	"time"
)

// Paths [Serve] serves besides / and /main.wasm, and [Dial] connects to.
const (
	EndpointPath  = "/archenet.json"
	WebSocketPath = "/archenet.ws"
)

// DialOptions adjust [Dial]; the zero value is Serve's layout.
type DialOptions struct {
	// Endpoint is the WebTransport endpoint document's path. Empty:
	// EndpointPath.
	Endpoint string
	// WebSocket is the WebSocket fallback's path. Empty: WebSocketPath.
	WebSocket string
	// Transport forces one: "webtransport" or "websocket". Empty: the
	// page URL's transport parameter, else WebTransport with the fallback.
	Transport string
	// FallbackAfter bounds the WebTransport dial before the fallback.
	// Zero: 5s.
	FallbackAfter time.Duration
}

// ErrNotInPage is what [Dial] returns outside a page (a build other than
// GOOS=js GOARCH=wasm).
var ErrNotInPage = errors.New("browser: Dial connects a page: build it with GOOS=js GOARCH=wasm")
