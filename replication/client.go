package replication

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/ecs"
	"github.com/archenet/archenet/interp"
	"github.com/archenet/archenet/replication/internal/link"
	"github.com/archenet/archenet/replication/internal/mirror"
	"github.com/archenet/archenet/replication/internal/receive"
	"github.com/archenet/archenet/replication/internal/watch"
	"github.com/archenet/archenet/replication/internal/wire"
	"github.com/archenet/archenet/replication/schema"
	"github.com/archenet/archenet/replication/timing"
	"github.com/archenet/archenet/transport"
	arche "github.com/mlange-42/arche/ecs"
)

// ClientConfig configures a [Client]. Every zero value has a documented
// default.
type ClientConfig struct {
	// Registry holds the replicated component types; it must match the
	// server's (the protocol hash is checked at connect). Required.
	Registry *schema.Registry
	// Token is passed to the server's Authenticator; on a host of many
	// matches with connect tokens, the token the matchmaker minted
	// (package replication/host/token). Nil: none.
	Token []byte
	// ResumeTicket, if set, is a ticket an earlier client of this player
	// saved (Client.ResumeTicket: a page before its reload keeps it in
	// sessionStorage): the client comes back to that seat instead of
	// joining as a new player, with the seat's replication started over
	// (it holds nothing yet). A refused ticket (the seat expired) closes the
	// client with an error that wraps ErrResumeRefused: join again without
	// it. Nil: a new player.
	ResumeTicket []byte
	// KeepTicket, in a page (GOOS=js), is the sessionStorage key under
	// which the client keeps its seat's ticket: a client made while one is
	// stored there (the page reloaded) comes back to that seat with it (as
	// ResumeTicket, which takes precedence if set), and the client stores
	// the newest after every Welcome; a refused one is removed, so the next
	// client joins as a new player. Elsewhere it is ignored. Empty: none.
	KeepTicket string
	// Match names the match to join on a host of many matches without
	// connect tokens (package replication/host; a connect token names its
	// match itself). At most transport.MaxMatchLen bytes. Empty: none (a
	// server of one match; a host's default match).
	Match string
	// Interpolation gives every mirror with a Transform an interp.Buffer and
	// a components.Visual, fed from snapshots: the Visual is drawn at the
	// render clock's time by [Client.InterpolationSystem]. False: no Visual.
	Interpolation bool
	// InterpolatedComponents lists registered component types (e.g.
	// reflect.TypeFor[Pos2]()) interpolated in place on remote mirrors:
	// each mirror keeps an interp.Track of their recent snapshots and
	// [Client.InterpolationSystem] overwrites the component every frame with
	// its value at the render clock's time — floats, world positions and
	// velocities linearly, angles the short way round, quaternions by slerp,
	// integers and bools stepping (schema.Plan.Interpolate). Run that system
	// after the Receive system and before anything that reads them. The
	// client's own predicted entities (components.Predicted) are left to
	// prediction. Nil: none.
	InterpolatedComponents []reflect.Type
	// InterpClock configures the render clock. Zero: interp defaults with
	// the server's tick interval (which it always takes from the Welcome);
	// its ResetThreshold and InitialJitter configure the client's
	// server-time estimator ([Client.Arrivals]).
	InterpClock interp.ClockConfig
	// Input, if set, appends the input section of each client datagram
	// (package input encodes it) after the ack. Nil: acks only.
	Input func(dst []byte) []byte
	// Interpolate, if set, decides per mirror (by owner and component set)
	// whether it is interpolated (an interpolation buffer with
	// Interpolation, a track for InterpolatedComponents). Nil: every mirror
	// except the client's own entities that carry components.Predicted (if
	// registered): those are predicted, not interpolated.
	Interpolate func(owner ClientID, set uint64) bool
	// OnSnapshot, if set, is called once per snapshot tick, when its first
	// datagram is decoded, with the server tick and the arrival time (tick
	// synchronization, statistics); the hooks of [Client.OnSnapshot] run
	// after it, at the same moment.
	OnSnapshot func(tick uint32, arrival time.Time)
	// ConnectTimeout closes the client with an ErrTimeout error naming the
	// server's address when no Welcome arrives this long after the Hello.
	// 0: DefaultTimeout (10 s). Negative: never.
	ConnectTimeout time.Duration
	// ReadyTimeout closes the client when the initial world has not arrived
	// this long after the Welcome (a large world over a slow link takes a
	// while). 0: 30 s. Negative: never.
	ReadyTimeout time.Duration
	// Timeout closes the client once welcomed when nothing (no datagram, no
	// message) arrives from the server for this long: a dead link or a
	// killed server (noticed long before QUIC's 30 s idle timeout), or a
	// server that does not run Server.Send. 0: DefaultTimeout (10 s).
	// Negative: never (the transport's idle timeout still applies).
	Timeout time.Duration
	// MaxExtrapolation bounds how far past the newest snapshot interpolated
	// mirrors are extrapolated before they hold. 0:
	// interp.DefaultMaxExtrapolation. Negative: never extrapolate.
	MaxExtrapolation time.Duration
	// PredictedSpawnTimeout ends a provisional entity
	// (Client.SpawnPredicted) whose spawn the server has not sent this long
	// after it was created (the server refused it). 0: 1 s. It must exceed
	// the round trip plus a few net ticks.
	PredictedSpawnTimeout time.Duration
	// OnPredictedSpawnEnd, if set, is called when a provisional entity
	// ends without becoming a mirror: the server removed its twin before it
	// was ever sent (removed is true: a shot that hit point-blank, the same
	// tick), or no spawn of its key came within PredictedSpawnTimeout. The
	// entity e is still alive, and the game's to remove — at once, or after
	// playing out (an impact). Nil: the client removes it at once.
	OnPredictedSpawnEnd func(key uint32, e arche.Entity, removed bool)
	// MaxPredictedSpawns bounds provisional entities waiting at once. 0:
	// DefaultMaxPredictedSpawns (64).
	MaxPredictedSpawns int
	// MaxEntities bounds mirrored entities. 0: 65536.
	MaxEntities int
	// CompressionDictionary is the zstd dictionary of a server that
	// compresses with one (ServerConfig.CompressionDictionary); a client
	// whose dictionary differs from the server's fails at the Welcome.
	// Compressed datagrams are decoded whenever the server says it sends
	// them, within codec.MaxBody. Nil: none.
	CompressionDictionary []byte
	// Now is the clock for interpolation. Nil: time.Now.
	Now func() time.Time
	// OnError, if set, is called once when the client is closed by
	// anything but its own Close (a rejection, the server's close, a
	// timeout, a protocol error), with the error Client.Err then returns.
	// The client also logs it at ERROR.
	OnError func(err error)
	// Logger receives connection events and the warnings about systems of
	// the client's frame that do not run (Receive, Send, Interpolate and a
	// declared prediction system; see Client.ExpectPredictSystem): a
	// *slog.Logger, or anything with its Log method. Nil: slog.Default(),
	// except in a page (GOOS=js), where it is the browser's console (INFO and
	// above), so that a page that passes none links no slog handler.
	Logger transport.Logger
}

// ClientState is where a client is in its connection.
type ClientState uint8

// Client states.
const (
	StateConnecting ClientState = iota // Hello sent, waiting for Welcome
	StateJoined                        // welcomed; receiving the initial world
	StateReady                         // the initial world has arrived
	StateClosed                        // disconnected; see Client.Err
)

// String names the state: "connecting", "joined", "ready" or "closed".
func (s ClientState) String() string {
	return [...]string{"connecting", "joined", "ready", "closed"}[s]
}

// ErrTimeout is wrapped by the errors of a client that gave up on its
// server (ClientConfig.ConnectTimeout, ReadyTimeout, Timeout); the text
// names the server's address and the phase.
var ErrTimeout = link.ErrTimeout

// Client mirrors a server's replicated entities into its own arche world.
// Add [Client.ReceiveSystem] first and [Client.SendSystem] last to the
// client's scheduler (net-tick systems), or call [Client.Receive] and
// [Client.Send]. Not safe for concurrent use.
type Client struct {
	cfg     ClientConfig
	world   *arche.World
	conn    transport.Conn
	link    *link.Link      // the protocol: handshake, snapshots, acks (no I/O)
	mirrors *mirror.Mirrors // the mirrors in world, their interpolation, predicted spawns
	watch   watch.Watch     // which of the client's systems run (client_systems.go)
	onReady []func()
	onSnap  []func(tick uint32, arrival time.Time)
	msgs    clientMsgs // game messages (messages_client.go)
	refs    []refComp  // components with references (refs.go)
	// Stats since start.
	Stats ClientStats
}

// ClientStats are cumulative client counters.
type ClientStats struct {
	// Datagrams counts the snapshot datagrams decoded; DatagramsDropped
	// those that did not decode (stale, corrupt), and were dropped.
	Datagrams, DatagramsDropped uint64
	// Records counts the entity records of the snapshot datagrams decoded
	// (entity updates, removals and entries).
	Records uint64
	// BytesIn counts every payload byte received: snapshot datagrams
	// (DatagramBytesIn, those dropped included) and reliable messages
	// (MessageBytesIn: the Welcome, spawn and despawn batches). BytesOut
	// counts every payload byte sent: the Hello and the datagrams (acks and
	// input sections). Payloads as the transport carries them, without its
	// own overhead.
	BytesIn, BytesOut               uint64
	DatagramBytesIn, MessageBytesIn uint64
	Spawns, Despawns                uint64
	Applied                         uint64 // entity states written into mirrors
	// PredictedSpawns counts Client.SpawnPredicted entities; SpawnsAdopted
	// those the server's spawn adopted, SpawnsEnded those whose twin the
	// server removed before it was sent, SpawnsExpired those that timed out
	// (PredictedSpawnTimeout).
	PredictedSpawns, SpawnsAdopted, SpawnsEnded, SpawnsExpired uint64
	// MessagesIn counts the game messages received, MessagesUnhandled those
	// of a type the client has no endpoint for (ClientMessages);
	// MessagesOut those sent, in batches of MessageBytesOut bytes (reliable
	// ones). MessagesStale counts unreliable message sections dropped for
	// a newer one taken before, MessagesDropped those that did not decode.
	MessagesIn, MessagesUnhandled, MessagesOut, MessageBytesOut uint64
	MessagesStale, MessagesDropped                              uint64
	// Resumes counts Client.Resume calls; MessagesResent the reliable game
	// message batches sent again at a resume (the server had not taken
	// them) and MessagesLost those the client no longer kept.
	Resumes, MessagesResent, MessagesLost uint64
}

// resolve returns c with every zero setting replaced by its default, or an
// error naming the first invalid one: nothing is clamped silently.
func (c ClientConfig) resolve() (ClientConfig, error) {
	switch {
	case c.Registry == nil:
		return c, errors.New("replication: ClientConfig.Registry is required")
	case len(c.Match) > transport.MaxMatchLen || !utf8.ValidString(c.Match):
		return c, fmt.Errorf("replication: ClientConfig.Match of %d bytes: want at most %d bytes of UTF-8", len(c.Match), transport.MaxMatchLen)
	case len(c.Token) > transport.MaxTokenLen:
		return c, fmt.Errorf("replication: ClientConfig.Token of %d bytes exceeds %d", len(c.Token), transport.MaxTokenLen)
	case c.MaxEntities < 0 || c.MaxPredictedSpawns < 0:
		return c, fmt.Errorf("replication: ClientConfig.MaxEntities %d or MaxPredictedSpawns %d is negative", c.MaxEntities, c.MaxPredictedSpawns)
	case c.PredictedSpawnTimeout < 0:
		return c, fmt.Errorf("replication: ClientConfig.PredictedSpawnTimeout %v is negative", c.PredictedSpawnTimeout)
	}
	if c.MaxEntities == 0 {
		c.MaxEntities = receive.DefaultMaxEntities
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if l, ok := c.Logger.(*slog.Logger); c.Logger == nil || ok && l == nil {
		c.Logger = defaultLogger() // a nil *slog.Logger is none too
	}
	// Zero is the default; negative turns the timeout off (documented).
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = DefaultTimeout
	}
	if c.ReadyTimeout == 0 {
		c.ReadyTimeout = 30 * time.Second
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.PredictedSpawnTimeout == 0 {
		c.PredictedSpawnTimeout = time.Second
	}
	if c.MaxPredictedSpawns == 0 {
		c.MaxPredictedSpawns = DefaultMaxPredictedSpawns
	}
	return c, nil
}

// NewClient attaches replication to world over conn (already connected)
// and sends the Hello. The handshake completes in later [Client.Receive]
// calls; a mismatch ends in StateClosed with a *transport.HandshakeError
// (e.g. "protocol hash mismatch: server 0x…, client 0x…") from [Client.Err].
func NewClient(world *arche.World, conn transport.Conn, cfg ClientConfig) (*Client, error) {
	cfg, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	if cfg.KeepTicket != "" && cfg.ResumeTicket == nil {
		cfg.ResumeTicket = loadTicket(cfg.KeepTicket)
	}
	c := &Client{cfg: cfg, world: world}
	c.msgs.init(c, cfg.Registry)
	c.refs = refComps(world, cfg.Registry)
	st := &c.Stats
	c.link = link.New(link.Config{Registry: cfg.Registry, Token: cfg.Token, Match: cfg.Match, MaxEntities: cfg.MaxEntities,
		CompressionDictionary: cfg.CompressionDictionary, ResetThreshold: cfg.InterpClock.ResetThreshold,
		InitialJitter: cfg.InterpClock.InitialJitter, ConnectTimeout: cfg.ConnectTimeout, ReadyTimeout: cfg.ReadyTimeout, Timeout: cfg.Timeout},
		link.Counts{BytesIn: &st.BytesIn, MessageBytesIn: &st.MessageBytesIn, DatagramBytesIn: &st.DatagramBytesIn,
			Datagrams: &st.Datagrams, DatagramsDropped: &st.DatagramsDropped, Records: &st.Records})
	c.mirrors, err = mirror.New(world, mirror.Config{Registry: cfg.Registry, MaxEntities: cfg.MaxEntities,
		Interpolation: cfg.Interpolation, InterpolatedComponents: cfg.InterpolatedComponents, InterpClock: cfg.InterpClock,
		Interpolate: cfg.Interpolate, MaxExtrapolation: cfg.MaxExtrapolation, PredictedSpawnTimeout: cfg.PredictedSpawnTimeout,
		OnPredictedSpawnEnd: cfg.OnPredictedSpawnEnd, MaxPredictedSpawns: cfg.MaxPredictedSpawns},
		mirror.Counts{Spawns: &st.Spawns, Despawns: &st.Despawns, Applied: &st.Applied, PredictedSpawns: &st.PredictedSpawns,
			SpawnsAdopted: &st.SpawnsAdopted, SpawnsEnded: &st.SpawnsEnded, SpawnsExpired: &st.SpawnsExpired})
	if err != nil {
		return nil, err
	}
	if err := c.start(conn); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Client) start(conn transport.Conn) error {
	c.conn = conn
	c.msgs.log.reset()
	hello := c.link.Start()
	if c.cfg.ResumeTicket != nil {
		var err error
		if hello, err = c.link.ResumeSaved(c.cfg.ResumeTicket); err != nil {
			return fmt.Errorf("replication: ClientConfig.ResumeTicket: %w", err)
		}
	}
	c.Stats.BytesOut += uint64(len(hello))
	return conn.SendMessage(hello)
}

// Resume comes back to the client's seat on a new connection after its
// connection was lost (a dead link, a changed address, a laptop that
// slept): the server kept the seat for its ServerConfig.Limits.SeatWindow
// (and told the game OnSuspend). The client keeps its id, its mirrors and
// what it holds of the world: the server sends again the reliable messages
// it had not taken, and the snapshots go on from the newest state both
// sides hold, so a resume costs a fraction of a join. Its game messages
// the server had not taken are sent again (those beyond the bounded log a
// client keeps count in ClientStats.MessagesLost).
//
// The client is in StateConnecting until the server's answer: a refusal
// (the seat expired, or the server restarted) closes the client with an
// error that wraps ErrResumeRefused; call Reconnect (or
// ReconnectWithToken) to join again as a new player. Resume fails at
// once, leaving the client as it was, if it has no seat to resume (it was
// never welcomed, the server keeps no seats, or a resume was refused).
//
// After a drain notice that names an address (DrainNotice.Address: the
// match moved to another server, Server.DrainTo), dial that address and
// Resume there: the seat continues in the new server, and the old one
// frees it at once.
func (c *Client) Resume(conn transport.Conn) error {
	d, moved := c.link.Drain()
	hello, err := c.link.Resume()
	if err != nil {
		return err
	}
	if c.conn != nil && c.conn != conn {
		if moved && d.Address != "" {
			// (Following the match to another server: the seat here ends.)
			_ = c.conn.CloseWithReason(transport.CodeNormal, leaveReason)
		} else {
			_ = c.conn.Close()
		}
	}
	c.conn = conn
	c.Stats.BytesOut += uint64(len(hello))
	c.Stats.Resumes++
	return conn.SendMessage(hello)
}

// ErrNoSeat is Client.Resume's error when the client has no seat to resume.
var ErrNoSeat = link.ErrNoSeat

// ResumeTicket returns the client's seat as a ticket a new client of the
// same player can come back to it with (ClientConfig.ResumeTicket), e.g. a
// page that saves it in sessionStorage before it reloads; nil without a
// seat. It changes at every resume (each spends the secret): save the
// newest. Keep it as secret as a connect token: it is the seat's
// credential.
func (c *Client) ResumeTicket() []byte { return c.link.Ticket() }

// Reconnect starts over on a new connection: every mirror is removed and the
// client rejoins as a late joiner (generations keep old and new entities
// apart). Its Hello carries ClientConfig.Token again: a connect token
// (package replication/host/token) admits one connection, so a host refuses
// it as used (token.ErrReplayed); use ReconnectWithToken with a new one.
func (c *Client) Reconnect(conn transport.Conn) error {
	if c.conn != nil {
		_ = c.conn.Close()
	}
	c.mirrors.RemoveAll()
	c.msgs.newestSeen = false // (the new connection's ticks may start over)
	c.cfg.ResumeTicket = nil
	return c.start(conn)
}

// ReconnectWithToken is Reconnect with a new token for the Hello (a connect
// token the matchmaker minted again; it replaces ClientConfig.Token for
// later reconnects too). It fails for a token over transport.MaxTokenLen
// bytes, leaving the client as it was.
func (c *Client) ReconnectWithToken(conn transport.Conn, token []byte) error {
	if len(token) > transport.MaxTokenLen {
		return fmt.Errorf("replication: a token of %d bytes exceeds %d", len(token), transport.MaxTokenLen)
	}
	c.cfg.Token = slices.Clone(token)
	c.link.SetToken(c.cfg.Token)
	return c.Reconnect(conn)
}

// State returns the connection state.
func (c *Client) State() ClientState { return ClientState(c.link.State()) }

// Err returns why the client is closed (nil while connected). A server
// that refused or ended the client while draining says so with
// transport.CodeDraining: errors.As(err, &ce) finds a *transport.CloseError
// with that code, whose Reason is the server's.
func (c *Client) Err() error { return c.link.Err() }

// Draining reports whether the server said it is draining (shutting down
// or being replaced; [Server.Drain]): why, and by when it ends the match.
// The game can tell its player, and find a new match.
func (c *Client) Draining() (DrainNotice, bool) {
	d, ok := c.link.Drain()
	return DrainNotice(d), ok
}

// ID returns the client id the server assigned (0 before the Welcome).
func (c *Client) ID() ClientID { return c.link.ID() }

// Ready reports whether the initial world has arrived (the "ready" event).
func (c *Client) Ready() bool { return c.link.State() == link.Ready }

// OnReady registers fn to run once when the initial world has arrived.
func (c *Client) OnReady(fn func()) { c.onReady = append(c.onReady, fn) }

// OnSnapshot registers fn to run, like ClientConfig.OnSnapshot, once per
// snapshot tick, when its first datagram is decoded (helpers such as
// input.Player register here; ClientConfig.OnSnapshot runs first).
func (c *Client) OnSnapshot(fn func(tick uint32, arrival time.Time)) {
	c.onSnap = append(c.onSnap, fn)
}

// SetInput sets the input section source, like ClientConfig.Input, after
// the client was created (input.Player does). Nil: acks only.
func (c *Client) SetInput(fn func(dst []byte) []byte) { c.cfg.Input = fn }

// Registry returns the client's component registry (ClientConfig.Registry).
func (c *Client) Registry() *schema.Registry { return c.cfg.Registry }

// Logger returns the client's logger (ClientConfig.Logger or the default).
func (c *Client) Logger() transport.Logger { return c.cfg.Logger }

// World returns the client's arche world (where the mirrors live).
func (c *Client) World() *arche.World { return c.world }

// RTT returns the transport's smoothed round-trip time (0 before a sample):
// the path's delay, without the server's net-tick wait.
func (c *Client) RTT() time.Duration {
	if c.conn == nil {
		return 0
	}
	return c.conn.Stats().RTT
}

// ServerTick returns the tick of the newest snapshot decoded.
func (c *Client) ServerTick() uint32 { return c.link.Receiver().Newest() }

// InputAck returns the newest input tick the server had applied for this
// client, as of the newest snapshot applied, and the server tick of that
// snapshot; ok is false if the server does not report input acks
// (ServerConfig.InputAck) or no snapshot arrived yet.
func (c *Client) InputAck() (inputTick, serverTick uint32, ok bool) {
	v := c.link.Receiver().View(c.link.Applied())
	if v == nil || !v.HasInputAck {
		return 0, 0, false
	}
	return v.InputAck, v.Tick, true
}

// InputReport is what a snapshot datagram tells its client about the
// client's input (ServerConfig.InputAck and InputFeedback).
type InputReport struct {
	// Applied is the newest input tick the server had applied when it took
	// the snapshot: the reconciliation point of predicted entities.
	Applied uint32
	// Held and Depth, if HasFeedback, are the input feedback: the newest
	// input tick the server holds (the input sender stops resending up to it) and the ticks of input
	// it held beyond the one consumed (input.TickSync.ObserveFeedback).
	Held        uint32
	Depth       int
	HasFeedback bool
}

// InputReport returns what the snapshot of server tick said about this
// client's input; call it from an OnSnapshot hook to see every one.
// ok is false if that snapshot is not held (the receiver keeps the last
// Depth ticks) or carried no input ack.
func (c *Client) InputReport(tick uint32) (InputReport, bool) {
	v := c.link.Receiver().View(tick)
	if v == nil || !v.HasInputAck {
		return InputReport{}, false
	}
	return InputReport{Applied: v.InputAck, Held: v.InputHeld, Depth: v.InputDepth, HasFeedback: v.HasInputFeedback}, true
}

// NetRate returns the server's net tick rate (0 before the Welcome).
func (c *Client) NetRate() int { return int(c.link.Info().TickRate) }

// NetDivisor returns the server's simulation ticks per net tick
// (ServerConfig.NetDivisor; 0 before the Welcome).
func (c *Client) NetDivisor() int { return int(c.link.Info().NetDivisor) }

// SimTick returns the simulation tick of net tick netTick (a snapshot's
// ServerTick, StateTick or InputFeedback tick): netTick × NetDivisor. It is
// the server's simulation tick when the server numbers net ticks from its
// scheduler (ServerConfig.Tick) and sends on its net ticks.
func (c *Client) SimTick(netTick uint32) uint64 {
	return uint64(netTick) * uint64(c.link.Info().NetDivisor)
}

// Arrivals returns the client's server-time estimator: the server's net
// tick schedule from snapshot arrivals, fed by [Client.Receive] with every
// tick's first datagram and read by the render clock ([Client.InterpClock]).
// Give it to the input clock (input.SyncConfig.Arrivals) so that both run on
// one estimate of the server's time. The pointer is valid for the client's
// life; the estimator starts over at each Welcome.
func (c *Client) Arrivals() *timing.Arrivals { return c.link.Arrivals() }

// Entity returns the mirror entity of a net handle and generation.
func (c *Client) Entity(id components.NetID) (arche.Entity, bool) { return c.mirrors.Entity(id) }

// StateTick returns the server tick of the state last written into the
// mirror of id (the reconciliation point of a predicted entity).
func (c *Client) StateTick(id components.NetID) (uint32, bool) { return c.mirrors.StateTick(id) }

// Mirrors returns the number of mirrored entities.
func (c *Client) Mirrors() int { return c.mirrors.Len() }

// ReceiveSystem returns an arche.System running [Client.Receive].
func (c *Client) ReceiveSystem() ecs.System { return systemFunc{update: c.Receive} }

// SendSystem returns an arche.System running [Client.Send].
//
// Its Finalize (when the scheduler closes) closes the connection
// ([Client.Close]).
func (c *Client) SendSystem() ecs.System {
	return systemFunc{update: c.Send, final: c.Close}
}

// Close disconnects from the server (a normal close; the mirrors stay) and
// leaves the client in StateClosed: the player leaves, and the server frees
// its seat at once. (A connection that ends otherwise — a dead link, a
// page that reloads, a transport's own close — keeps the seat for a while:
// Resume.) Calling it again does nothing.
func (c *Client) Close() {
	if c.conn != nil && c.link.State() != link.Closed {
		_ = c.conn.CloseWithReason(transport.CodeNormal, leaveReason)
	}
	c.fail(errClosedByApp)
}

// leaveReason is the reason of a client's close that leaves its seat
// (Client.Close): any other close of the connection keeps it.
const leaveReason = "the player left"

// errClosedByApp is Client.Err after Client.Close.
var errClosedByApp = errors.New("replication: client closed")

// fail closes the client with err (the first reason sticks).
func (c *Client) fail(err error) {
	if c.link.Fail(err) {
		c.logClose(err)
	}
}

// logClose logs why the client closed; anything but the game's own Close
// ends the game for this client: loud, and offered to the game's hook.
func (c *Client) logClose(err error) {
	if errors.Is(err, errClosedByApp) {
		c.cfg.Logger.Log(context.Background(), slog.LevelInfo, "archenet: disconnected", "client", c.link.ID(), "err", err)
		return
	}
	c.cfg.Logger.Log(context.Background(), slog.LevelError, "archenet: disconnected", "client", c.link.ID(), "err", err)
	if c.cfg.OnError != nil {
		c.cfg.OnError(err)
	}
}

// Receive processes the handshake, reliable spawn and despawn messages, and
// snapshot datagrams, and writes the newest state into the mirrors.
func (c *Client) Receive() {
	if c.link.State() == link.Closed {
		return
	}
	now := c.cfg.Now()
	c.watch.Note(watch.Receive, now)
	defer c.checkLiveness(now)
	c.msgs.beginReceive()
	for {
		m, ok := c.conn.PollMessage()
		if !ok {
			break
		}
		c.link.Hear(now)
		if err := c.handleMessage(m); err != nil {
			_ = c.conn.CloseWithReason(transport.CodeProtocolError, err.Error())
			c.fail(err)
			return
		}
		if c.link.State() == link.Closed {
			return
		}
	}
	select {
	case <-c.conn.Done():
		c.fail(c.conn.Err())
		return
	default:
	}
	if c.link.State() == link.Connecting {
		return
	}
	for {
		d, ok := c.conn.PollDatagram()
		if !ok {
			break
		}
		c.link.Hear(now)
		body, sec, err := wire.SplitSection(d, wire.FlagMessages)
		if err != nil {
			c.link.Dropped(d)
			continue
		}
		S, first, ok := c.link.OnDatagram(body, now)
		if sec != nil {
			c.Stats.BytesIn += uint64(len(d) - len(body)) // (the link counted the rest)
			c.Stats.DatagramBytesIn += uint64(len(d) - len(body))
			if ok {
				c.msgs.receiveSection(c, S, sec)
			}
		}
		if first {
			if c.cfg.OnSnapshot != nil {
				c.cfg.OnSnapshot(S, now)
			}
			for _, fn := range c.onSnap {
				fn(S, now)
			}
		}
	}
	// Every tick that gained datagrams, oldest first: a mirror takes an
	// entry only if it is newer than what it shows, so a tick completed by
	// a later datagram, or one whose datagrams came late, fills in what the
	// newest view could not.
	for _, S := range c.link.Fresh() {
		c.mirrors.Show(c.link.Receiver().View(S))
	}
	c.refsToMirrors()
}

// checkLiveness closes the client when the server went quiet too long,
// and expires predicted spawns the server did not confirm.
func (c *Client) checkLiveness(now time.Time) {
	if c.link.State() == link.Closed {
		return
	}
	c.checkSystems(now)
	c.mirrors.Expire(now)
	if err := c.link.Expired(now, (*serverName)(c)); err != nil {
		_ = c.conn.CloseWithReason(transport.CodeTimeout, "server timed out")
		c.fail(err)
	}
}

// serverName names a client's server in errors, asking the connection only
// when one is formatted: the check runs every frame, and an address (a
// browser connection's URL boxed as a net.Addr, a UDP address's String)
// costs an allocation. (A pointer: as an interface it needs none.)
type serverName Client

func (n *serverName) String() string { return (*Client)(n).conn.RemoteAddr().String() }

// handleMessage runs a reliable message through the link and applies what
// it says to the world.
func (c *Client) handleMessage(m []byte) error {
	ev, err := c.link.OnMessage(m)
	if err != nil {
		return err
	}
	switch ev {
	case link.EventWelcome:
		resumed, reset, taken := c.link.Resumed()
		if reset {
			c.mirrors.RemoveAll()
			c.msgs.newestSeen = false
		}
		if err := c.mirrors.Welcome(c.link.ID(), c.link.Arrivals()); err != nil {
			return err
		}
		if resumed {
			c.resent(taken)
		}
		if c.cfg.KeepTicket != "" {
			if t := c.link.Ticket(); t != nil {
				storeTicket(c.cfg.KeepTicket, t)
			} else {
				forgetTicket(c.cfg.KeepTicket)
			}
		}
		return nil
	case link.EventRejected:
		if c.cfg.KeepTicket != "" && errors.Is(c.link.Err(), ErrResumeRefused) {
			forgetTicket(c.cfg.KeepTicket)
		}
		c.logClose(c.link.Err())
		_ = c.conn.Close()
	case link.EventSpawns:
		latest := c.link.Receiver().Latest()
		return c.link.Spawns(m, func(tick uint32, e wire.SpawnEntry) { c.mirrors.Spawn(tick, e, latest) })
	case link.EventSpawnsEnded:
		return wire.ParseSpawnsEnded(m, c.mirrors.End)
	case link.EventMessages:
		return c.msgs.receive(c, m)
	case link.EventReady:
		for _, fn := range c.onReady {
			fn()
		}
	}
	return nil
}

// Send sends this net tick's client datagram: the snapshot ack and, if
// configured, the input section.
func (c *Client) Send() {
	now := c.cfg.Now()
	c.watch.Note(watch.Send, now)
	c.checkSystems(now)
	if st := c.link.State(); st != link.Joined && st != link.Ready {
		return
	}
	d, unrel := c.msgs.appendSection(c.link.Datagram(c.cfg.Input), c.conn.MaxDatagramSize())
	if err := c.conn.SendDatagram(d); err != nil {
		select {
		case <-c.conn.Done():
			c.fail(c.conn.Err())
		default:
			c.cfg.Logger.Log(context.Background(), slog.LevelDebug, "archenet: send failed", "err", err)
		}
		return
	}
	c.Stats.BytesOut += uint64(len(d))
	c.Stats.MessagesOut += uint64(unrel)
	c.sendMessages()
}
