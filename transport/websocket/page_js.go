//go:build js

package websocket

import (
	"context"
	"syscall/js"
)

// PageURL returns the session URL of an endpoint at path on the page's own
// server: ws://host/path for an http:// page, wss:// for an https:// one
// (mount a [Listener] there with NewListener on the page's HTTP server).
func PageURL(path string) string {
	loc := js.Global().Get("location")
	scheme := "ws://"
	if loc.Get("protocol").String() == "https:" {
		scheme = "wss://"
	}
	return scheme + loc.Get("host").String() + path
}

// WebTransportAvailable reports whether the browser has WebTransport (if not, a page
// dials a WebSocket at once instead of waiting for a dial to fail).
func WebTransportAvailable() bool {
	return js.Global().Get("WebTransport").Type() == js.TypeFunction
}

// DialPage dials the endpoint at path on the page's own server ([PageURL]).
func DialPage(ctx context.Context, path string, cfg *Config) (*Conn, error) {
	return Dial(ctx, PageURL(path), cfg)
}
