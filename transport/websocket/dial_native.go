//go:build !js

package websocket

import (
	"context"
	"net"
	"net/http"

	ws "github.com/coder/websocket"
)

// dialOptions are a native Dial's: cfg.TLS's roots for wss://, and a dialer
// that notes the socket's addresses in a.
func dialOptions(cfg *Config, a *dialAddrs) *ws.DialOptions {
	var d net.Dialer
	tr := &http.Transport{DialContext: func(ctx context.Context, network, address string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, address)
		if err == nil {
			a.local, a.remote = c.LocalAddr(), c.RemoteAddr()
		}
		return c, err
	}}
	if cfg != nil && cfg.TLS != nil {
		tr.TLSClientConfig = cfg.TLS.Clone()
	}
	return &ws.DialOptions{CompressionMode: ws.CompressionDisabled, HTTPClient: &http.Client{Transport: tr}}
}
