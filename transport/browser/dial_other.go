//go:build !js

package browser

import (
	"context"

	"github.com/archenet/archenet/transport"
)

// Dial connects the page to the server that served it: over WebTransport
// (its endpoint document gives the session URL and the certificate
// hashes), or over the WebSocket fallback when the browser has no
// WebTransport, when the WebTransport dial fails within FallbackAfter, or
// when asked. It returns the connection and which transport it uses
// ("webtransport" or "websocket"), or the fallback's error (and the first
// one's).
//
// Outside a page (this build) it returns [ErrNotInPage]: a native client
// dials with transport/quic, transport/webtransport or transport/websocket.
func Dial(ctx context.Context, o *DialOptions) (transport.Conn, string, error) {
	return nil, "", ErrNotInPage
}
