package websocket

import (
	"context"
	"fmt"
	"net"
	"net/url"

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
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || u.Host == "" {
		return nil, fmt.Errorf("websocket: dial %q: not a ws:// or wss:// URL", rawURL)
	}
	ctx, cancel := context.WithTimeout(ctx, set.HandshakeTimeout)
	defer cancel()
	var a dialAddrs
	c, _, err := ws.Dial(ctx, rawURL, dialOptions(cfg, &a))
	if err != nil {
		return nil, fmt.Errorf("websocket: dial %s: %w", rawURL, err)
	}
	local, remote := net.Addr(addr{"websocket", "browser"}), net.Addr(addr{"websocket", u.Host})
	if a.local != nil {
		local, remote = addr{"websocket", a.local.String()}, addr{"websocket", a.remote.String()}
	}
	return newConn(c, &set, false, local, remote, nil, nil), nil
}

// dialAddrs are the addresses of a dialed socket, where the platform tells
// them (natively).
type dialAddrs struct {
	local, remote net.Addr
}
