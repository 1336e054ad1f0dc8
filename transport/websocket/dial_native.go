//go:build !js

package websocket

import (
	"context"
	"fmt"
	"net"
	"net/http"

	ws "github.com/coder/websocket"
)

// Dial opens a connection to the session URL rawURL (ws://host:port/path, or
// wss:// with TLS), within Config.HandshakeTimeout. Natively it uses
// net/http (Config.TLS holds the roots for wss://); in a js/wasm build, the
// browser's WebSocket (an ws:// URL from an https page is refused by the
// browser: use wss://).
func Dial(ctx context.Context, rawURL string, cfg *Config) (*Conn, error) {
	_, set, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	if _, err := parseSessionURL(rawURL); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, set.HandshakeTimeout)
	defer cancel()
	var local, remote net.Addr
	var d net.Dialer
	tr := &http.Transport{DialContext: func(ctx context.Context, network, address string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, address)
		if err == nil {
			local, remote = c.LocalAddr(), c.RemoteAddr()
		}
		return c, err
	}}
	if cfg != nil && cfg.TLS != nil {
		tr.TLSClientConfig = cfg.TLS.Clone()
	}
	c, _, err := ws.Dial(ctx, rawURL, &ws.DialOptions{CompressionMode: ws.CompressionDisabled, HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		return nil, fmt.Errorf("websocket: dial %s: %w", rawURL, err)
	}
	return newConn(nativeSocket{c}, &set, false, addr{"websocket", local.String()}, addr{"websocket", remote.String()}, nil, nil), nil
}
