package agones

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"
)

// Config configures a [Driver]. Every zero value has a documented default.
type Config struct {
	// URL is the sidecar's REST address, e.g. "http://127.0.0.1:9358".
	// Empty: http://127.0.0.1 at the port in $AGONES_SDK_HTTP_PORT (what
	// Agones sets in a game server's pod), else 9358.
	URL string
	// HealthPeriod is how often a health ping goes while every match's
	// frame advances. 0: the GameServer's spec.health.period_seconds as the
	// sidecar reports it at start, else 5 s.
	HealthPeriod time.Duration
	// MatchKey is the label or annotation of the GameServer that names the
	// match to open when it is allocated (the allocator sets it in the
	// GameServerAllocation's metadata; a label set through the SDK is
	// prefixed "agones.dev/sdk-", which is looked for too). Empty: "match".
	MatchKey string
	// DefaultMatch is the match opened on an allocation that names none.
	// Empty: none is opened (the game opens its matches itself).
	DefaultMatch string
	// Open opens a match the allocation names (e.g. h.Open(name, ...)); an
	// error is logged. Nil: matches are not opened on allocation.
	Open func(name string) error
	// Capacity is the player capacity set at start (Agones player
	// tracking, alpha: the sidecar needs --feature-gates=PlayerTracking=true);
	// joins and leaves (host.Config.OnPlayer = driver.OnPlayer) are then
	// reported as player connects and disconnects. 0: no player tracking.
	Capacity int
	// Queue bounds the player events waiting for the sidecar; past it they
	// are dropped and counted (Stats.PlayersDropped). 0: 1024.
	Queue int
	// MinBackoff and MaxBackoff bound the wait between retries of a failed
	// call and reconnects of the watch (doubling from the one to the
	// other). 0: 100 ms and 5 s.
	MinBackoff, MaxBackoff time.Duration
	// Client makes the HTTP calls. Nil: a client with a 5 s timeout per
	// call (the watch has none).
	Client *http.Client
	// Logger receives the driver's events. Nil: slog.Default().
	Logger *slog.Logger
}

// DefaultMatchKey is the default Config.MatchKey.
const DefaultMatchKey = "match"

func (c Config) resolve() (Config, error) {
	if c.URL == "" {
		port := os.Getenv("AGONES_SDK_HTTP_PORT")
		if port == "" {
			port = "9358"
		}
		if _, err := strconv.Atoi(port); err != nil {
			return c, fmt.Errorf("agones: AGONES_SDK_HTTP_PORT %q is not a port", port)
		}
		c.URL = "http://127.0.0.1:" + port
	}
	if u, err := url.Parse(c.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return c, fmt.Errorf("agones: Config.URL %q: want http://host:port", c.URL)
	}
	if c.HealthPeriod < 0 || c.Capacity < 0 || c.Queue < 0 || c.MinBackoff < 0 || c.MaxBackoff < 0 {
		return c, errors.New("agones: Config.HealthPeriod, Capacity, Queue, MinBackoff and MaxBackoff must not be negative")
	}
	if c.MatchKey == "" {
		c.MatchKey = DefaultMatchKey
	}
	if c.Queue == 0 {
		c.Queue = 1024
	}
	if c.MinBackoff == 0 {
		c.MinBackoff = 100 * time.Millisecond
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = 5 * time.Second
	}
	if c.MaxBackoff < c.MinBackoff {
		return c, fmt.Errorf("agones: Config.MaxBackoff %v < MinBackoff %v", c.MaxBackoff, c.MinBackoff)
	}
	if c.Client == nil {
		c.Client = &http.Client{Timeout: 5 * time.Second}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}
