package agones

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/archenet/archenet/replication/host"
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
	// OpenMatch opens a match an allocation names, on the host the driver
	// runs (e.g. h.Open(name, cfg)); an error is logged, and the allocation
	// taken off the Rooms counter. Nil: matches are not opened on
	// allocation.
	OpenMatch func(h *host.Host, name string) error
	// Rooms is the GameServer's Agones Counter of matches (beta, on by
	// default since Agones 1.41): the driver keeps its count equal to the
	// open matches plus the allocations being opened, so that
	// counter-based allocation (a GameServerAllocation that selects
	// counters.rooms.minAvailable >= 1 among Allocated then Ready game
	// servers, increments it with counters.rooms {action: Increment}, and
	// names the match in metadata.labels) places several matches on one
	// pod, and a FleetAutoscaler with a Counter policy sizes the fleet by
	// rooms. Empty: "rooms", used if the GameServer has a counter of that
	// name (spec.counters in the Fleet's template); "-": no counter.
	Rooms string
	// MatchCapacity, if above 0, is set as the Rooms counter's capacity at
	// start (match it to host.Config.MaxMatches). 0: the capacity the Fleet
	// declares stands.
	MatchCapacity int
	// Players is the GameServer's Agones List of players (beta): one value
	// "match/player" per player (host.Player.ID), added on a join and
	// removed on a leave, so a matchmaker or autoscaler sees which match
	// each player is in. Empty: "players", used if the GameServer has a
	// list of that name; "-": no list.
	Players string
	// WhenEmpty is what the driver does when the GameServer is Allocated
	// and its last match has ended (none open, none being opened). Zero:
	// BackToReady. (A match that opens in a GameServer the driver made
	// Ready so, as when an allocation races with the Ready call, makes it
	// Allocated again: a fleet scales down Ready pods.)
	WhenEmpty EmptyPolicy
	// Handoff, if set, moves each open match to another server when the
	// host drains (host.Host.Drain, e.g. on SIGTERM, when Agones replaces
	// the pod) instead of ending it: the driver takes the match's checkpoint
	// (host.Match.Checkpoint) and calls Handoff with it. The game's backend
	// allocates another GameServer (a GameServerAllocation: the sidecar
	// cannot), opens the match there from the checkpoint
	// (host.MatchConfig.Checkpoint) and returns the address its players
	// are to dial; the driver then tells them (host.Match.MoveTo), and the
	// match here ends once they have gone. A match whose checkpoint or
	// Handoff fails ends at the drain as without one (Stats.HandoffsFailed).
	// It runs on a goroutine per match. Nil: matches end at the drain.
	Handoff func(ctx context.Context, match string, checkpoint []byte) (address string, err error)
	// OnState, if set, is called with each new state of the GameServer as
	// the watch sees it ("Scheduled", "Ready", "Allocated", "Shutdown", ...),
	// in order, on the driver's goroutine; it must not block. Nil: none.
	OnState func(state string)
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

// The default Config.Rooms and Config.Players, and the name that turns
// either off.
const (
	DefaultRooms   = "rooms"
	DefaultPlayers = "players"
	None           = "-"
)

// EmptyPolicy is what the driver does with an Allocated GameServer whose
// matches have all ended (Config.WhenEmpty).
type EmptyPolicy uint8

const (
	// BackToReady marks it Ready again: the allocator may give it new
	// matches, and the fleet may scale it down.
	BackToReady EmptyPolicy = iota
	// ShutdownWhenEmpty drains the host (host.Host.Drain), so the driver
	// shuts the GameServer down and Agones replaces the pod: a fresh
	// process per allocation's life.
	ShutdownWhenEmpty
	// StayAllocated leaves it Allocated (the game decides, e.g. by calling
	// h.Drain itself).
	StayAllocated
)

// String names the policy.
func (p EmptyPolicy) String() string {
	switch p {
	case BackToReady:
		return "back to Ready"
	case ShutdownWhenEmpty:
		return "shutdown"
	case StayAllocated:
		return "stay Allocated"
	}
	return fmt.Sprintf("EmptyPolicy(%d)", uint8(p))
}

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
	if c.HealthPeriod < 0 || c.Capacity < 0 || c.MatchCapacity < 0 || c.Queue < 0 || c.MinBackoff < 0 || c.MaxBackoff < 0 {
		return c, errors.New("agones: Config.HealthPeriod, Capacity, MatchCapacity, Queue, MinBackoff and MaxBackoff must not be negative")
	}
	if c.WhenEmpty > StayAllocated {
		return c, fmt.Errorf("agones: Config.WhenEmpty %v is not a policy", c.WhenEmpty)
	}
	if c.MatchKey == "" {
		c.MatchKey = DefaultMatchKey
	}
	if c.Rooms == "" {
		c.Rooms = DefaultRooms
	}
	if c.Players == "" {
		c.Players = DefaultPlayers
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
