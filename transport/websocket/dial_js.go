//go:build js

package websocket

import ws "github.com/coder/websocket"

// dialOptions are a browser Dial's: none (the browser's WebSocket has its
// own TLS and no options).
func dialOptions(*Config, *dialAddrs) *ws.DialOptions { return nil }
