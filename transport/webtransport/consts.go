package webtransport

import (
	"fmt"
	"net/url"

	"github.com/archenet/archenet/transport/internal/connio"
)

// MaxDatagramPayload is the largest datagram payload a connection sends or accepts in
// either direction. Browsers cap WebTransport datagrams at 1215 bytes
// (transport.datagrams.maxDatagramSize) and drop larger ones silently; 1200 is what
// every QUIC path carries, and what transport.Conn promises until MTU discovery.
const MaxDatagramPayload = 1200

// DefaultPath is the URL path of the WebTransport endpoint when [Config].Path is empty.
const DefaultPath = "/archenet"

// resolveDial resolves a Dial's cfg (see resolve) and parses its session URL,
// https://host:port/path.
func resolveDial(cfg *Config, rawURL string) (Config, connio.Settings, *url.URL, error) {
	r, set, err := cfg.resolve()
	if err != nil {
		return r, set, nil, err
	}
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return r, set, nil, fmt.Errorf("webtransport: dial %q: not an https URL", rawURL)
	}
	return r, set, u, nil
}
