package link

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/archenet/archenet/replication/internal/receive"
	"github.com/archenet/archenet/replication/internal/wire"
	"github.com/archenet/archenet/replication/schema"
	"github.com/archenet/archenet/replication/timing"
	"github.com/archenet/archenet/transport"
)

// State is where a link is in its connection (the values and names of
// replication.ClientState).
type State uint8

// Link states.
const (
	Connecting State = iota // Hello sent, waiting for Welcome
	Joined                  // welcomed; receiving the initial world
	Ready                   // the initial world has arrived
	Closed                  // disconnected; see Link.Err
)

// String names the state: "connecting", "joined", "ready" or "closed".
func (s State) String() string {
	return [...]string{"connecting", "joined", "ready", "closed"}[s]
}

// Config is what a link needs of the client's configuration, its defaults
// resolved.
type Config struct {
	// Registry holds the replicated component types (the Hello's protocol
	// hash, the receiver's plans). Required.
	Registry *schema.Registry
	// Token and Match go in the Hello.
	Token []byte
	Match string
	// MaxEntities bounds the receiver's views.
	MaxEntities int
	// CompressionDictionary must match the server's (the Welcome says).
	CompressionDictionary []byte
	// ResetThreshold and InitialJitter configure the arrival estimator
	// (≤ 0: 1 s and a quarter of the server's tick interval).
	ResetThreshold, InitialJitter time.Duration
	// ConnectTimeout, ReadyTimeout and Timeout are the liveness limits of
	// Expired (≤ 0: none).
	ConnectTimeout, ReadyTimeout, Timeout time.Duration
}

// Counts are where a link counts what arrived: the client's statistics
// (a nil pointer: not counted).
type Counts struct {
	// BytesIn counts the bytes of messages and datagrams, MessageBytesIn
	// and DatagramBytesIn each kind's.
	BytesIn, MessageBytesIn, DatagramBytesIn *uint64
	// Datagrams counts the snapshot datagrams decoded, DatagramsDropped
	// those that did not decode, Records the records of those decoded.
	Datagrams, DatagramsDropped, Records *uint64
}

// Drain is what a draining server told the client (the fields of
// replication.DrainNotice).
type Drain struct {
	Reason   string
	Deadline time.Time // the zero time: no deadline
	Left     time.Duration
}

// Event is what a reliable message meant.
type Event uint8

// Events of [Link.OnMessage].
const (
	EventNone        Event = iota
	EventWelcome           // joined: ID, Info, Receiver and Arrivals are set
	EventRejected          // the server refused the client: state closed, Err says why
	EventSpawns            // a valid spawn batch: apply it with Link.Spawns
	EventReady             // the initial world has arrived
	EventSpawnsEnded       // predicted spawns the server ended unsent: wire.ParseSpawnsEnded
	EventDrain             // the server is draining: Drain is set
	EventMessages          // a batch of game messages: the client decodes it (wire.ParseMessages)
)

// Errors of a link.
var (
	// ErrTimeout is wrapped by Expired's errors.
	ErrTimeout = errors.New("replication: timeout")
	// ErrDictionary: the server compresses with another zstd dictionary.
	ErrDictionary = errors.New("replication: compression dictionary mismatch")
)

// Link is the client's side of its channel to the server. Not safe for
// concurrent use.
type Link struct {
	cfg   Config
	plans []*schema.Plan
	count Counts

	state    State
	err      error
	id       uint8
	info     wire.Welcome
	rcv      *receive.Receiver
	arrivals timing.Arrivals
	touched  []uint32 // ticks that gained datagrams since the last Fresh
	applied  uint32   // the newest tick Fresh returned
	drain    Drain
	draining bool
	dgBuf    []byte

	// Liveness: when the current state began (as of the first Expired
	// check in it) and when the server was last heard from.
	phase        State
	since, heard time.Time
}

// SetToken replaces the token the next Start's Hello carries.
func (l *Link) SetToken(tok []byte) { l.cfg.Token = tok }

// New returns a link of cfg counting into counts; Start begins a
// connection.
func New(cfg Config, counts Counts) *Link {
	for _, p := range []**uint64{&counts.BytesIn, &counts.MessageBytesIn, &counts.DatagramBytesIn,
		&counts.Datagrams, &counts.DatagramsDropped, &counts.Records} {
		if *p == nil {
			*p = new(uint64)
		}
	}
	return &Link{cfg: cfg, plans: cfg.Registry.Plans(), count: counts, state: Closed}
}

// Start begins a connection: the link forgets the last one and returns the
// Hello to send.
func (l *Link) Start() []byte {
	l.state, l.err, l.id, l.info, l.drain, l.draining = Connecting, nil, 0, wire.Welcome{}, Drain{}, false
	l.rcv = receive.NewReceiver(l.cfg.Registry, 0, 0)
	l.rcv.MaxEntities = l.cfg.MaxEntities
	l.touched, l.applied = l.touched[:0], 0
	l.phase, l.since, l.heard = Closed, time.Time{}, time.Time{}
	h := transport.Hello{Version: wire.ProtocolVersion, ProtocolHash: l.cfg.Registry.Hash(), Token: l.cfg.Token, Match: l.cfg.Match}
	return h.Append(nil)
}

// State returns the connection state.
func (l *Link) State() State { return l.state }

// Err returns why the link is closed (nil while connected).
func (l *Link) Err() error { return l.err }

// ID returns the client id the Welcome assigned (0 before it).
func (l *Link) ID() uint8 { return l.id }

// Info returns the server's replication parameters from the Welcome.
func (l *Link) Info() wire.Welcome { return l.info }

// Receiver returns the snapshot receiver of the current connection (a new
// one at each Start and Welcome).
func (l *Link) Receiver() *receive.Receiver { return l.rcv }

// Arrivals returns the server-time estimator (valid for the link's life;
// it starts over at each Welcome).
func (l *Link) Arrivals() *timing.Arrivals { return &l.arrivals }

// Drain returns the server's drain notice, if it sent one.
func (l *Link) Drain() (Drain, bool) { return l.drain, l.draining }

// Applied returns the newest tick Fresh returned (0 before one).
func (l *Link) Applied() uint32 { return l.applied }

// Hear notes that something arrived from the server at now.
func (l *Link) Hear(now time.Time) { l.heard = now }

// Fail closes the link with err; it reports whether it did (the first
// reason sticks).
func (l *Link) Fail(err error) bool {
	if l.state == Closed {
		return false
	}
	l.state, l.err = Closed, err
	return true
}

// Expired reports the liveness failure of the link at now (nil if none):
// no Welcome within ConnectTimeout of the Hello, no initial world within
// ReadyTimeout of the Welcome, or nothing heard for Timeout once welcomed.
// remote names the server (formatted only into the error: the check
// allocates nothing when it passes).
func (l *Link) Expired(now time.Time, remote fmt.Stringer) error {
	if l.state != l.phase {
		l.phase, l.since = l.state, now
		if l.heard.IsZero() {
			l.heard = now
		}
	}
	c := &l.cfg
	switch {
	case l.state == Connecting && c.ConnectTimeout > 0 && now.Sub(l.since) > c.ConnectTimeout:
		return fmt.Errorf("%w: connecting to %s: no Welcome within %v of the Hello (no archenet server there, or it is not running Server.Receive)",
			ErrTimeout, remote, c.ConnectTimeout)
	case l.state != Joined && l.state != Ready:
		return nil
	case c.Timeout > 0 && now.Sub(l.heard) > c.Timeout:
		if l.state == Joined && !l.heard.After(l.since) {
			return fmt.Errorf("%w: joined %s: nothing arrived in the %v since the Welcome (is the server running Server.Send?)", ErrTimeout, remote, c.Timeout)
		}
		return fmt.Errorf("%w: %s %s: nothing arrived for %v (dead link, or the server stopped running Server.Send)", ErrTimeout, l.state, remote, c.Timeout)
	case l.state == Joined && c.ReadyTimeout > 0 && now.Sub(l.since) > c.ReadyTimeout:
		return fmt.Errorf("%w: joined %s: the initial world did not arrive within %v of the Welcome", ErrTimeout, remote, c.ReadyTimeout)
	}
	return nil
}

// OnMessage takes one reliable message from the server. An error is a
// protocol violation: the caller closes the connection with it.
func (l *Link) OnMessage(m []byte) (Event, error) {
	*l.count.BytesIn += uint64(len(m))
	*l.count.MessageBytesIn += uint64(len(m))
	if l.state == Connecting {
		switch transport.TypeOf(m) {
		case transport.MessageWelcome:
			if err := l.welcome(m); err != nil {
				return EventNone, err
			}
			return EventWelcome, nil
		case transport.MessageReject:
			rj, err := transport.ParseReject(m)
			if err != nil {
				return EventNone, err
			}
			l.Fail(explainReject(rj, l.cfg.Registry))
			return EventRejected, nil
		}
		return EventNone, fmt.Errorf("%w: message type 0x%02x before the welcome", wire.ErrMalformed, transport.TypeOf(m))
	}
	if len(m) == 0 {
		return EventNone, fmt.Errorf("%w: empty message", wire.ErrMalformed)
	}
	switch m[0] {
	case wire.KindSpawns:
		// Validated whole before any of it is applied.
		if err := l.Spawns(m, func(uint32, wire.SpawnEntry) {}); err != nil {
			return EventNone, err
		}
		return EventSpawns, nil
	case wire.KindSpawnsEnded:
		if err := wire.ParseSpawnsEnded(m, func(uint32) {}); err != nil {
			return EventNone, err
		}
		return EventSpawnsEnded, nil
	case wire.KindReady:
		if _, err := wire.ParseReady(m); err != nil {
			return EventNone, err
		}
		if l.state != Joined {
			return EventNone, nil
		}
		l.state = Ready
		return EventReady, nil
	case wire.KindMessages:
		return EventMessages, nil
	case wire.KindDrain:
		w, err := wire.ParseDrain(m)
		if err != nil {
			return EventNone, err
		}
		l.drain, l.draining = Drain{Reason: w.Reason, Left: w.Left}, true
		if w.Left > 0 {
			l.drain.Deadline = l.heard.Add(w.Left)
		}
		return EventDrain, nil
	}
	return EventNone, fmt.Errorf("%w: unknown message type 0x%02x", wire.ErrMalformed, m[0])
}

// welcome takes the server's Welcome: the client id and the server's
// replication parameters, with which the receiver and the arrival estimator
// start.
func (l *Link) welcome(m []byte) error {
	w, err := transport.ParseWelcome(m)
	if err != nil {
		return err
	}
	info, err := wire.ParseWelcome(w.Payload)
	if err != nil {
		return err
	}
	rcv := receive.NewReceiver(l.cfg.Registry, w.ClientID, int(info.Depth))
	rcv.MaxEntities = l.cfg.MaxEntities
	if info.Compression {
		if d := wire.DictionaryHash(l.cfg.CompressionDictionary); d != info.Dictionary {
			return fmt.Errorf("%w: the server uses dictionary %#x, this client %#x (ClientConfig.CompressionDictionary)", ErrDictionary, info.Dictionary, d)
		}
		if err := rcv.EnableZstd(l.cfg.CompressionDictionary); err != nil {
			return fmt.Errorf("the server compresses snapshots (ServerConfig.Compression): %w", err)
		}
	}
	interval := time.Second / time.Duration(info.TickRate)
	threshold, jitter := l.cfg.ResetThreshold, l.cfg.InitialJitter
	if threshold <= 0 {
		threshold = time.Second
	}
	if jitter <= 0 {
		jitter = interval / 4
	}
	l.id, l.info, l.rcv = w.ClientID, info, rcv
	l.arrivals = timing.NewArrivals(interval, threshold, jitter)
	l.state = Joined
	return nil
}

// explainReject is the client's error for the server's Reject rj: on a
// protocol hash mismatch it names the components that differ between the
// server's list and reg (a list that does not parse explains nothing).
func explainReject(rj transport.Reject, reg *schema.Registry) *transport.HandshakeError {
	he := rj.Err(wire.ProtocolVersion, reg.Hash())
	if he.Kind == transport.HandshakeHashMismatch {
		if server, err := wire.ParseComponents(rj.Protocol); err == nil {
			he.Detail = wire.DiffComponents(server, wire.ComponentHashes(reg))
		}
	}
	return he
}

// Spawns calls fn for every entry of the spawn batch m.
func (l *Link) Spawns(m []byte, fn func(tick uint32, e wire.SpawnEntry)) error {
	return wire.ParseSpawns(m, l.plans, l.id, schema.MaxLanes*4, fn)
}

// OnDatagram takes one snapshot datagram that arrived at now. It returns
// the datagram's tick and whether it was the first of its tick to arrive. A
// datagram that does not decode is dropped and counted (unreliable
// datagrams may be stale, duplicated or hostile; none of that is fatal).
func (l *Link) OnDatagram(d []byte, now time.Time) (tick uint32, first, ok bool) {
	*l.count.BytesIn += uint64(len(d))
	*l.count.DatagramBytesIn += uint64(len(d))
	records := l.rcv.Records
	S, err := l.rcv.Decode(d)
	if err != nil {
		*l.count.DatagramsDropped++
		return S, false, false
	}
	*l.count.Datagrams++
	*l.count.Records += l.rcv.Records - records
	if got, _ := l.rcv.Parts(S); got == 1 {
		first = true
		l.arrivals.Observe(S, now)
	}
	if !slices.Contains(l.touched, S) {
		l.touched = append(l.touched, S)
	}
	return S, first, true
}

// Dropped counts a datagram dropped before it reached the receiver (a
// malformed message section).
func (l *Link) Dropped(d []byte) {
	*l.count.BytesIn += uint64(len(d))
	*l.count.DatagramBytesIn += uint64(len(d))
	*l.count.DatagramsDropped++
}

// Fresh returns the ticks whose views gained datagrams since the last call,
// oldest first (valid until the next OnDatagram), for the caller to apply,
// and notes the newest as applied.
func (l *Link) Fresh() []uint32 {
	slices.Sort(l.touched)
	t := l.touched
	l.touched = l.touched[:0]
	for _, S := range t {
		if int32(S-l.applied) > 0 {
			l.applied = S
		}
	}
	return t
}

// Datagram returns the client datagram to send now: the snapshot ack and,
// with input, the input section it appends (valid until the next call).
func (l *Link) Datagram(input func(dst []byte) []byte) []byte {
	ack := l.rcv.Ack()
	l.dgBuf = wire.AppendClientHeader(l.dgBuf[:0], &ack)
	if input != nil {
		l.dgBuf = input(l.dgBuf)
	}
	return l.dgBuf
}
