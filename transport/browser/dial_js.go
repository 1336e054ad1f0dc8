//go:build js

package browser

import (
	"context"
	"net/url"
	"syscall/js"
	"time"

	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/websocket"
	"github.com/archenet/archenet/transport/webtransport"
)

// Dial connects the page to the server that served it: over WebTransport
// (its endpoint document gives the session URL and the certificate
// hashes), or over the WebSocket fallback when the browser has no
// WebTransport, when the WebTransport dial fails within FallbackAfter, or
// when asked. It returns the connection and which transport it uses
// ("webtransport" or "websocket"), or the fallback's error (and the first
// one's).
func Dial(ctx context.Context, o *DialOptions) (transport.Conn, string, error) {
	var opt DialOptions
	if o != nil {
		opt = *o
	}
	if opt.Endpoint == "" {
		opt.Endpoint = EndpointPath
	}
	if opt.WebSocket == "" {
		opt.WebSocket = WebSocketPath
	}
	if opt.FallbackAfter <= 0 {
		opt.FallbackAfter = 5 * time.Second
	}
	if opt.Transport == "" {
		if q, err := url.ParseQuery(trimQuery(js.Global().Get("location").Get("search").String())); err == nil {
			opt.Transport = q.Get("transport")
		}
	}
	var first error
	if opt.Transport != "websocket" && websocket.WebTransportAvailable() {
		wctx, cancel := context.WithTimeout(ctx, opt.FallbackAfter)
		conn, err := webtransport.DialEndpoint(wctx, opt.Endpoint, nil)
		cancel()
		switch {
		case err == nil:
			return conn, "webtransport", nil
		case opt.Transport == "webtransport":
			return nil, "", err
		}
		first = err
	}
	conn, err := websocket.DialPage(ctx, opt.WebSocket, nil)
	if err != nil {
		if first != nil {
			return nil, "", &dialError{first: first, fallback: err}
		}
		return nil, "", err
	}
	return conn, "websocket", nil
}

func trimQuery(s string) string {
	if len(s) > 0 && s[0] == '?' {
		return s[1:]
	}
	return s
}

// dialError is a failed WebTransport dial and its failed fallback.
type dialError struct{ first, fallback error }

func (e *dialError) Error() string {
	return "browser: WebTransport: " + e.first.Error() + "; WebSocket fallback: " + e.fallback.Error()
}

func (e *dialError) Unwrap() []error { return []error{e.first, e.fallback} }
