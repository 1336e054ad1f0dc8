package replication

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"time"
	"unicode/utf8"

	"github.com/archenet/archenet/ecs"
	"github.com/archenet/archenet/replication/internal/encode"
	"github.com/archenet/archenet/replication/internal/entity"
	"github.com/archenet/archenet/replication/schema"
	"github.com/archenet/archenet/transport"
)

// ServerConfig configures a [Server]. Every zero value has a documented
// default.
type ServerConfig struct {
	// Registry holds the replicated component types. Required.
	Registry *schema.Registry
	// NetRate is the number of net ticks per second (snapshot rate). 0: 30.
	NetRate int
	// NetDivisor is the number of simulation ticks per net tick
	// (ecs.Config.NetDivisor). The Welcome carries it, so clients can turn
	// snapshot ticks into simulation ticks (Client.SimTick). 0: 1.
	NetDivisor int
	// Scheduler, if set, is the simulation's scheduler (package ecs): the
	// net rate (its TickRate / NetDivisor), NetDivisor and Tick (its net
	// tick) come from it, so that they are set in one place. Create it
	// before the server and add the server's systems to it after. Setting
	// NetRate, NetDivisor or Tick as well is an error unless they agree.
	// Nil: NetRate, NetDivisor and Tick as set.
	Scheduler *ecs.Scheduler
	// Tick, if set, names the net tick each Send builds, e.g.
	// func() uint32 { return sched.Info().NetTick }, so that snapshot ticks
	// are the simulation's net ticks even for a server created after the
	// simulation started. The first Send takes its number from it; Send
	// must then run once per net tick: a number that is not the previous
	// one plus one is logged and replaced by it. Nil: net ticks count Send
	// calls from 1.
	Tick func() uint32
	// Depth is the snapshot ring depth in net ticks: how old a client's
	// acknowledged baseline may be for the server to send it deltas. 0: 32
	// (about 1 s at 30 Hz; at most 128).
	//
	// A join or a stall does not resend the world (examples/loadtest
	// -cost, a board of 64×64 dormant tiles at 30 Hz): a spawn carries its
	// entity's state, and the snapshots leave out an entity whose spawn
	// brought its current state until it changes, so a late joiner gets the
	// board's spawn batches (57 KB) and 0.6 KB more in its first 3 s. A
	// client whose link was down longer than Depth ticks (5 s, 30 s) has no
	// baseline left: the entities of its last acknowledged view that did not
	// change since are left out the same way, and it gets the 200 tiles that
	// changed meanwhile, each full record once (held until its ack or loss
	// is known): 3.0 KB, of which 0.7 KB are the quiet ticks' datagrams every
	// client gets, rather than the whole board (91 KB). Within Depth ticks
	// it gets deltas (a 0.5 s outage: 1.7 KB).
	Depth int
	// MTU is the largest snapshot datagram. 0: 1200 bytes.
	MTU int
	// MaxBytesPerSecond caps each client's snapshot bandwidth; the adaptive
	// budget moves below it. 0: 512 KiB/s (4 Mbit/s), enough for every
	// change of a busy physics scene of a few hundred bodies at 60 Hz; a
	// client's share is what its link carries without loss or queueing.
	MaxBytesPerSecond int
	// MinBytesPerSecond is the floor of the adaptive budget: how far it goes
	// down on a congested link (and during an outage). A link that is fine —
	// jitter, reordering and standing random loss included — never brings
	// the budget near it: only rising loss or a standing queue do. 0: 4 KiB/s
	// (32 kbit/s), so that even a very slow link carries the most important
	// changes without a standing queue.
	MinBytesPerSecond int
	// Workers is how many goroutines build the clients' datagrams in each
	// Send (the clients are shared out among them; the bytes each client
	// gets do not depend on it): the caller's and Workers−1 helpers that
	// live until Close. A parked thread takes a while to wake (0.1-0.2 ms
	// measured on 2-core virtual machines, a tenth of a busy tick), so
	// Send wakes the helpers as it starts, or Receive does when the step
	// between the last Receive and Send was short (under 0.25 ms); they
	// spin, yielding the processor, until Send's parallel phases are done,
	// then park (after 0.5 ms without work at the latest). Their time is
	// in ServerStats.HelperTime. 0: GOMAXPROCS. 1: all on the caller's
	// goroutine, no helpers.
	Workers int
	// ParallelFrame is the number of replicated entities from which the
	// workers also build each tick's frame together, on ticks when no
	// entity was spawned or despawned or changed its components (measured
	// on two workers here: 2,254 entities took 0.13 ms instead of 0.15,
	// 50,000 took 2.2 ms instead of 2.8). 0: 1024.
	ParallelFrame int
	// NoPreencode turns pre-encoding off. By default, right after each
	// frame the workers encode once the records that most clients' last
	// datagrams were coded for (the same baseline and prediction views), a
	// tick on, for the entities some client holds; the clients' datagrams
	// then copy them instead of each worker encoding them again. The bytes
	// sent are the same either way. It pauses by itself while fewer than
	// half the records it encodes are used.
	NoPreencode bool
	// NoSharedBuilds turns shared builds off. By default, a client whose
	// tick would be built from the same inputs as the one its worker built
	// just before (the same acked baseline and prediction views, the same
	// entities in view and held, nothing deferred, enough byte allowance)
	// gets that client's datagrams, copied, with its own headers
	// (ServerStats.SharedBuilds counts them). The bytes sent are the same
	// either way; it pays when many clients see the same state. A client
	// that owns an entity with owner-only fields (a player's avatar) gets
	// records of it that no other client gets: the datagrams that carry
	// them are written for it, the others copied. The ticks of a client
	// over its byte budget, or with compression on, are not shared.
	NoSharedBuilds bool
	// Authenticator, if set, decides whether a client may join (after the
	// version and protocol-hash checks, and only while the server is not
	// full). It runs on a goroutine of its own, never on the simulation's,
	// with a context that ends at the client's Limits.HandshakeTimeout; a client
	// whose authentication has not finished by then is rejected. Nil:
	// everyone may.
	Authenticator transport.Authenticator
	// Match names the match this server hosts (replication.ClientConfig.Match,
	// transport.Hello.Match). A client whose Hello names another match is
	// refused, and its error says which match it named and which this
	// server hosts; a Hello that names none joins. Empty: the server hosts one
	// unnamed match, and a Hello that names any match is refused. A host of
	// many matches (package replication/host) routes each Hello by its
	// name before the match's server sees it, and the server does not judge
	// the name again.
	Match string
	// Interest limits what each client receives. Nil: every entity.
	Interest *Interest
	// Limits bounds the clients, the handshakes and the timeouts.
	Limits ServerLimits
	// Compression zstd-compresses every snapshot datagram whose body it
	// strictly shrinks (the datagram is flagged; the others go as they are).
	// The Welcome tells clients, which then decode compressed datagrams with
	// their ClientConfig.CompressionDictionary. Bit-packed deltas rarely
	// shrink; full records of similar entities (a join, a burst of spawns)
	// often do. It costs CPU per datagram. A page (GOOS=js) decodes them
	// only when built with -tags archenet_zstd (zstd is about 0.1 MB of a
	// gzipped page); one built without fails at the Welcome, saying so.
	// False: never.
	Compression bool
	// CompressionDictionary is a zstd dictionary (TrainDictionary)
	// for Compression; clients must be given the same one (a client with
	// another is refused at the Welcome). Nil: none.
	CompressionDictionary []byte
	// Input receives the input section of each client datagram (package
	// input decodes it). A returned error drops that client with the error
	// as the reason. Nil: input sections are ignored.
	Input func(c ClientID, ackTick uint32, section []byte) error
	// InputAck, if set, returns the newest input tick the server applied for
	// a client; it rides in that client's snapshot datagrams (see
	// Client.InputAck) so predicted entities reconcile at the right tick.
	InputAck func(c ClientID) (tick uint32, ok bool)
	// InputFeedback, if set, returns a client's input feedback (input's
	// Authority sets it from each client's input log): the newest input tick the server holds and the
	// depth (ticks of input held beyond the one consumed, negative when
	// inputs arrive late). It is called once per snapshot datagram built for
	// the client, when InputAck reports a tick, and rides along with it
	// (Client.InputReport) for the client's input sender (its resend window) and
	// clock (TickSync.ObserveFeedback).
	InputFeedback func(c ClientID) (held uint32, depth int, ok bool)
	// OnConnect and OnDisconnect, if set, are called when a client completes
	// the handshake and when it is gone (with the reason): it left, it was
	// dropped, or it lost its connection and did not come back within
	// Limits.SeatWindow (the reason then says so and wraps ErrSeatExpired).
	OnConnect    func(c ClientID)
	OnDisconnect func(c ClientID, reason error)
	// OnSuspend, if set, is called when a client lost its connection (a
	// timeout, a transport error, a close that is not its player's own) and
	// the server keeps its seat for Limits.SeatWindow: its id, its owned
	// entities (which stay in the world and are stepped without input, as
	// the game chooses: hold, or repeat the last input), its input log, its
	// relevance and what it holds of the world. The game may freeze or hide
	// its avatar. OnResume is called when the client is back on a new
	// connection (Client.Resume); OnDisconnect when the window ran out.
	OnSuspend func(c ClientID, reason error)
	OnResume  func(c ClientID)
	// Now is the clock for RTT and timeouts. Nil: time.Now.
	Now func() time.Time
	// Logger receives connection events. Nil: slog.Default().
	Logger *slog.Logger
}

// ServerLimits bounds what a [Server] admits and how long it waits for a
// peer: the slots, the handshakes in progress, the timeouts that give a
// silent peer's slot back, the keyed entities a client may predict. Every
// zero value has a documented default.
type ServerLimits struct {
	// MaxClients bounds connected clients (≤ 254). 0: 64.
	MaxClients int
	// MaxClientsPerAddress bounds the clients from one source address (an
	// IPv4 address or an IPv6 /64; for other transports the address without
	// its port), connected or being authenticated, so that no single source
	// can take every slot; more are refused with a reason naming the limit.
	// 0: 8. Negative: no bound (LAN play, many players behind one address).
	MaxClientsPerAddress int
	// MaxHandshakes bounds connections in the handshake at once (accepted,
	// not yet welcomed); more are refused at once with "server busy", so a
	// flood of connections that never say Hello holds bounded memory. 0: 256.
	MaxHandshakes int
	// HandshakeTimeout drops connections that are not through the handshake
	// (Hello received, Authenticator done) in time. 0: 5 s.
	HandshakeTimeout time.Duration
	// JoinTimeout drops a welcomed client that has not acknowledged any
	// snapshot this long after its Welcome (a peer that joined and vanished,
	// or a client whose Receive and Send do not run), so its slot is free
	// again within seconds rather than at ClientTimeout. While every slot is
	// taken, a new client gets the slot of the one welcomed longest ago that
	// has acknowledged nothing for a quarter of it (ServerStats.JoinsEvicted):
	// sources that join and vanish cannot keep players out. On a host with
	// connect tokens (package host), a client dropped so has not spent its
	// token: it may join again with it. 0: 2 s. Negative: never
	// (ClientTimeout still applies).
	JoinTimeout time.Duration
	// ClientTimeout drops a client from which no datagram (ack or input)
	// arrived for this long, with transport.CodeTimeout and a reason that
	// says so: a killed peer or dead path (noticed long before QUIC's 30 s
	// idle timeout), or a client that does not run Client.Send. 0: 10 s.
	// Negative: never (the transport's idle timeout still applies).
	ClientTimeout time.Duration
	// SeatWindow is how long the server keeps the seat of a client that lost
	// its connection, for it to come back (Client.Resume; see
	// ServerConfig.OnSuspend). A suspended seat counts against MaxClients
	// and MaxClientsPerAddress. 0: DefaultSeatWindow (30 s). Negative: no
	// seats (a lost connection is a leave at once, as before v0.5.0).
	SeatWindow time.Duration
	// MaxSuspendedPerAddress bounds the suspended seats from one source
	// address; a client that loses its connection beyond it leaves at once.
	// 0: 4. Negative: no bound.
	MaxSuspendedPerAddress int
	// MaxPredictedSpawns bounds the keyed entities (Server.PredictedSpawn)
	// each client may have alive at once. 0: DefaultMaxPredictedSpawns (64).
	MaxPredictedSpawns int
	// MaxMessageBytes bounds one batch of game messages from a client
	// (clients split their batches at ClientBatchBytes, the least it may
	// be); a larger one closes the client with
	// transport.CodeMessageTooLarge. 0: DefaultMaxMessageBytes (4 KiB).
	MaxMessageBytes int
	// MaxMessagesPerSecond is each client's allowance of game messages: a
	// bucket refilled at this rate that holds a second's worth. Messages
	// over it are dropped (ServerStats.MessagesDropped); a client whose
	// dropped messages within a second exceed the rate again (it sends more
	// than twice the allowance) is closed with transport.CodeFlood.
	// 0: DefaultMaxMessagesPerSecond (120).
	MaxMessagesPerSecond int
	// MaxQueuedMessageBytes bounds the bytes of game messages a client
	// gets queued for the game in one Receive; messages beyond are dropped
	// (ServerStats.MessagesDropped). 0: DefaultMaxQueuedMessageBytes
	// (16 KiB).
	MaxQueuedMessageBytes int
}

// resolve returns c with every zero setting replaced by its default, or
// an error naming the first invalid one (a negative count or duration where
// none is meaningful, a bound exceeded, MinBytesPerSecond above
// MaxBytesPerSecond): nothing is clamped silently.
func (c ServerConfig) resolve() (ServerConfig, error) {
	if c.Registry == nil {
		return c, errors.New("replication: ServerConfig.Registry is required")
	}
	if len(c.Match) > transport.MaxMatchLen || !utf8.ValidString(c.Match) {
		return c, fmt.Errorf("replication: ServerConfig.Match of %d bytes: want at most %d bytes of UTF-8", len(c.Match), transport.MaxMatchLen)
	}
	if err := c.adoptScheduler(); err != nil {
		return c, err
	}
	l := &c.Limits
	type intSetting struct {
		name    string
		v       *int
		def, hi int
	}
	for _, f := range []intSetting{
		{"NetRate", &c.NetRate, 30, 1<<16 - 1},
		{"NetDivisor", &c.NetDivisor, 1, 1<<16 - 1},
		{"Depth", &c.Depth, entity.DefaultDepth, 128},
		{"MTU", &c.MTU, encode.DefaultMTU, 1 << 16},
		{"MaxBytesPerSecond", &c.MaxBytesPerSecond, DefaultMaxBytesPerSecond, 1 << 40},
		{"Limits.MaxClients", &l.MaxClients, 64, 254},
		{"ParallelFrame", &c.ParallelFrame, 1024, 1 << 30},
		{"Workers", &c.Workers, -1, 1024}, // (-1: resolved below)
		{"Limits.MaxHandshakes", &l.MaxHandshakes, 256, 1 << 20},
		{"Limits.MaxPredictedSpawns", &l.MaxPredictedSpawns, DefaultMaxPredictedSpawns, 1 << 20},
		{"Limits.MaxMessageBytes", &l.MaxMessageBytes, DefaultMaxMessageBytes, 1 << 20},
		{"Limits.MaxMessagesPerSecond", &l.MaxMessagesPerSecond, DefaultMaxMessagesPerSecond, 1 << 20},
		{"Limits.MaxQueuedMessageBytes", &l.MaxQueuedMessageBytes, DefaultMaxQueuedMessageBytes, 1 << 30},
	} {
		if *f.v < 0 || *f.v > f.hi {
			return c, fmt.Errorf("replication: ServerConfig.%s %d not in 0..%d (0: the default)", f.name, *f.v, f.hi)
		}
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	if l.MaxMessageBytes < ClientBatchBytes {
		return c, fmt.Errorf("replication: ServerConfig.Limits.MaxMessageBytes %d is below a client's batch (%d bytes)", l.MaxMessageBytes, ClientBatchBytes)
	}
	if c.Workers == -1 {
		c.Workers = min(runtime.GOMAXPROCS(0), l.MaxClients) // (more would idle)
	}
	switch {
	case c.MinBytesPerSecond < 0:
		return c, fmt.Errorf("replication: ServerConfig.MinBytesPerSecond %d is negative", c.MinBytesPerSecond)
	case c.MinBytesPerSecond == 0:
		c.MinBytesPerSecond = min(DefaultMinBytesPerSecond, c.MaxBytesPerSecond)
	case c.MinBytesPerSecond > c.MaxBytesPerSecond:
		return c, fmt.Errorf("replication: ServerConfig.MinBytesPerSecond %d exceeds MaxBytesPerSecond %d", c.MinBytesPerSecond, c.MaxBytesPerSecond)
	}
	if l.HandshakeTimeout < 0 {
		return c, fmt.Errorf("replication: ServerConfig.Limits.HandshakeTimeout %v is negative", l.HandshakeTimeout)
	}
	if l.HandshakeTimeout == 0 {
		l.HandshakeTimeout = 5 * time.Second
	}
	// Zero is the default; negative turns the bound off (documented).
	if l.MaxClientsPerAddress == 0 {
		l.MaxClientsPerAddress = DefaultMaxClientsPerAddress
	}
	if l.JoinTimeout == 0 {
		l.JoinTimeout = DefaultJoinTimeout
	}
	if l.ClientTimeout == 0 {
		l.ClientTimeout = DefaultTimeout
	}
	if l.SeatWindow == 0 {
		l.SeatWindow = DefaultSeatWindow
	}
	if l.MaxSuspendedPerAddress == 0 {
		l.MaxSuspendedPerAddress = 4
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	// Connection events can come in floods (hostile peers): each kind of
	// message is rate-limited, and the count of suppressed ones is reported.
	c.Logger = slog.New(transport.RateLimit(c.Logger.Handler(), 10, time.Second))
	return c, nil
}

// adoptScheduler takes NetRate, NetDivisor and Tick from c.Scheduler, if
// set, refusing a value set as well that disagrees.
func (c *ServerConfig) adoptScheduler() error {
	if c.Scheduler == nil {
		return nil
	}
	sc := c.Scheduler.Config()
	if sc.TickRate%sc.NetDivisor != 0 {
		return fmt.Errorf("replication: ServerConfig.Scheduler's TickRate %d is not a multiple of its NetDivisor %d: the net rate would not be whole", sc.TickRate, sc.NetDivisor)
	}
	rate := sc.TickRate / sc.NetDivisor
	switch {
	case c.NetRate != 0 && c.NetRate != rate:
		return fmt.Errorf("replication: ServerConfig.NetRate %d disagrees with its Scheduler's %d (TickRate %d / NetDivisor %d): set one", c.NetRate, rate, sc.TickRate, sc.NetDivisor)
	case c.NetDivisor != 0 && c.NetDivisor != sc.NetDivisor:
		return fmt.Errorf("replication: ServerConfig.NetDivisor %d disagrees with its Scheduler's %d: set one", c.NetDivisor, sc.NetDivisor)
	case c.Tick != nil:
		return errors.New("replication: ServerConfig.Tick and Scheduler are both set: the Scheduler's net tick is the tick")
	}
	sched := c.Scheduler
	c.NetRate, c.NetDivisor, c.Tick = rate, sc.NetDivisor, func() uint32 { return sched.Info().NetTick }
	return nil
}

// DefaultTimeout is the default of ServerLimits.ClientTimeout and of
// ClientConfig.Timeout and ConnectTimeout.
const DefaultTimeout = 10 * time.Second

// Defaults of the slot limits (ServerConfig).
const (
	DefaultMaxClientsPerAddress = 8
	DefaultJoinTimeout          = 2 * time.Second
	// DefaultSeatWindow is the default of ServerLimits.SeatWindow.
	DefaultSeatWindow = 30 * time.Second
)

// Defaults of the limits on clients' game messages (ServerLimits).
const (
	DefaultMaxMessageBytes       = 4 << 10
	DefaultMaxMessagesPerSecond  = 120
	DefaultMaxQueuedMessageBytes = 16 << 10
)

// Defaults of the adaptive per-client budget (ServerConfig).
const (
	DefaultMaxBytesPerSecond = 512 << 10
	DefaultMinBytesPerSecond = 4 << 10
)
