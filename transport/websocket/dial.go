package websocket

import (
	"fmt"
	"net/url"
)

// parseSessionURL checks a session URL: ws:// or wss://, with a host.
func parseSessionURL(rawURL string) (*url.URL, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || u.Host == "" {
		return nil, fmt.Errorf("websocket: dial %q: not a ws:// or wss:// URL", rawURL)
	}
	return u, nil
}
