package host

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/replication/host/token"
	"github.com/archenet/archenet/transport"
)

// Config configures a [Host]. Every zero value has a documented default.
type Config struct {
	// Tokens, if set, admits only clients whose Hello carries a connect
	// token it verifies (package token): the token names the match (the
	// Hello's match name is ignored), and each token admits one player: it
	// is spent once its player acknowledged its first snapshot, and given
	// back (token.Verifier.Release) if its connection gets no further: the
	// match was busy or ended, its server refused the client, the client
	// gave up before its Welcome, or the server dropped it for its
	// ServerLimits.JoinTimeout. Such a client may try again with the same
	// token.
	// Nil: clients name their match (replication.ClientConfig.Match), for a
	// LAN game or a trusted network.
	Tokens *token.Verifier
	// DefaultMatch is the match a client that names none joins (without
	// Tokens). Empty: such a client is refused.
	DefaultMatch string
	// HandshakeTimeout bounds how long the host waits for a connection's
	// Hello, the message it routes by. 0: 5 s.
	HandshakeTimeout time.Duration
	// MaxHandshakes bounds the connections whose Hello the host waits for;
	// more are refused at once ("host busy"), so a flood of connections
	// that never say Hello holds bounded memory. 0: 256.
	MaxHandshakes int
	// MaxMatches bounds the open matches (Open fails past it). 0: 256.
	MaxMatches int
	// StallAfter is how long a match's frame may run, or its loop go without
	// a frame, before the match counts as stalled. The host then ends it
	// (unless KeepStalled): its players are disconnected with
	// transport.CodeInternal and "match stalled: ..." and reported gone
	// (OnPlayer, OnMatch), the match leaves the host (Stats.Stalled counts
	// it), and the other matches and the host's liveness are not affected;
	// the stuck frame is left to return on its own goroutine, which then
	// closes the match's server and game. It is also the grace past a drain
	// deadline after which [Host.Done] closes even if a stalled match has
	// not ended. 0: 5 s.
	StallAfter time.Duration
	// KeepStalled leaves a stalled match to recover instead of ending it;
	// while one is stalled the host is not live ([Host.Live], /healthz;
	// package agones stops its health pings, so the orchestrator replaces
	// the whole process). False: a stalled match is ended (StallAfter).
	KeepStalled bool
	// OnPlayer, if set, is called when a player joins or leaves a match (a
	// client welcomed by, or gone from, its server), on the match's
	// goroutine after the frame in which it happened, and for the players
	// left when a match ends. It must not block (queue the event; package
	// agones does). Nil: none.
	OnPlayer func(PlayerEvent)
	// OnMatch, if set, is called when a match opens (on Open's caller,
	// after its Start succeeded, before Open returns) and when it ends (on
	// the match's goroutine, or the host's for a stalled match, after the
	// leaves of its players were reported, before [Match.Ended] closes). It
	// must not block (queue the event; package agones does). Nil: none.
	OnMatch func(MatchEvent)
	// Manual starts no goroutines: the caller runs the host with
	// [Host.Step], which accepts and routes connections and runs one frame
	// of every match on the caller's goroutine (deterministic tests over a
	// simulated network and clock). False: the host accepts on a goroutine
	// of its own and each match runs on its own goroutine.
	Manual bool
	// Now is the clock of the host's timeouts and of Manual frames. Nil:
	// time.Now.
	Now func() time.Time
	// Logger receives the host's events (routing refusals rate-limited).
	// Nil: slog.Default().
	Logger *slog.Logger
}

// Defaults of Config.
const (
	DefaultHandshakeTimeout = 5 * time.Second
	DefaultMaxHandshakes    = 256
	DefaultMaxMatches       = 256
	DefaultStallAfter       = 5 * time.Second
)

func (c Config) resolve() (Config, error) {
	if c.HandshakeTimeout < 0 || c.MaxHandshakes < 0 || c.MaxMatches < 0 || c.StallAfter < 0 {
		return c, errors.New("host: Config.HandshakeTimeout, MaxHandshakes, MaxMatches and StallAfter must not be negative")
	}
	if err := checkName(c.DefaultMatch, true); err != nil {
		return c, fmt.Errorf("host: Config.DefaultMatch: %w", err)
	}
	if c.HandshakeTimeout == 0 {
		c.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if c.MaxHandshakes == 0 {
		c.MaxHandshakes = DefaultMaxHandshakes
	}
	if c.MaxMatches == 0 {
		c.MaxMatches = DefaultMaxMatches
	}
	if c.StallAfter == 0 {
		c.StallAfter = DefaultStallAfter
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.Logger = slog.New(transport.RateLimit(c.Logger.Handler(), 10, time.Second))
	return c, nil
}

// checkName reports a match name a Hello cannot carry.
func checkName(name string, emptyOK bool) error {
	if name == "" && !emptyOK {
		return errors.New("empty match name")
	}
	if len(name) > transport.MaxMatchLen {
		return fmt.Errorf("match name of %d bytes exceeds %d", len(name), transport.MaxMatchLen)
	}
	return nil
}

// MatchConfig configures a match ([Host.Open]).
type MatchConfig struct {
	// Start creates the match's game: its arche world and its
	// replication.Server, made with m.Listener() as the listener (and
	// m.Configure on its ServerConfig). It runs on Open's caller; after it
	// the game is touched only on the match's goroutine. Required.
	Start func(m *Match) (Game, error)
	// FrameRate is how many times per second the host calls Game.Frame.
	// 0: 60.
	FrameRate int
	// Handoffs bounds the connections routed to the match and waiting for
	// its server's next Receive; more are refused ("match busy"). 0: 64.
	Handoffs int
	// Checkpoint, if set, is a checkpoint of the match taken elsewhere
	// (Match.Checkpoint on another host): Start makes its server with
	// Match.NewServer, which restores it, and the match's players resume
	// their seats here. Nil: a new match.
	Checkpoint []byte
}

func (c MatchConfig) resolve() (MatchConfig, error) {
	if c.Start == nil {
		return c, errors.New("host: MatchConfig.Start is required")
	}
	if c.FrameRate < 0 || c.FrameRate > 10000 || c.Handoffs < 0 {
		return c, fmt.Errorf("host: MatchConfig.FrameRate %d (want 0..10000) or Handoffs %d (want >= 0)", c.FrameRate, c.Handoffs)
	}
	if c.FrameRate == 0 {
		c.FrameRate = 60
	}
	if c.Handoffs == 0 {
		c.Handoffs = 64
	}
	return c, nil
}

// Game is one match's game, which the host runs: [Game.Frame] on the
// match's goroutine at MatchConfig.FrameRate, [Game.Close] when the match
// ends. (examples/arena's game.ServerGame is one.)
type Game interface {
	// Frame runs the game up to now: its server's Receive, the simulation
	// and its server's Send, as many ticks as are due (or one tick per
	// frame, for a game whose frame is its tick). A panic ends the match
	// (its clients are told "match crashed"); the other matches go on.
	Frame(now time.Time)
	// Replication is the match's replication server: the host hands it the
	// connections routed to the match (through m.Listener), reads its
	// clients after each frame, and drains and closes it.
	Replication() *replication.Server
	// Close releases the game after its server was closed.
	Close()
}
