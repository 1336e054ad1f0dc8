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
	Address  string
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

	// The seat: what the Welcome gave to come back to it (package
	// replication's server_seats.go), and how far the client got.
	seat seat
	// taken counts the reliable messages taken since the seat's
	// replication began; takenRepeat how many more datagrams say so (after
	// it changed), dgCount the datagrams sent.
	taken       uint32
	takenRepeat int
	dgCount     uint32
	// resuming: the Hello was a resume (fresh: of a client that holds
	// nothing); resumeTo the state to go back to; resumed and reset what
	// the last Welcome said.
	resuming, fresh bool
	resumeTo        State
	resumed, reset  bool
	clientTaken     uint32
	// everReady: the seat's initial world arrived (a resume goes back to
	// Ready, also from Closed)
	everReady bool

	// Liveness: when the current state began (as of the first Expired
	// check in it) and when the server was last heard from.
	phase        State
	since, heard time.Time
}

// seat is what a Welcome gave a client to come back to its seat.
type seat struct {
	resumable bool
	secret    [wire.SecretLen]byte
	match     string
}

// ErrNoSeat: the client has no seat to resume (the server keeps none, or
// the client was never welcomed, or its last resume was refused).
var ErrNoSeat = errors.New("replication: no seat to resume")

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
	l.seat, l.taken, l.takenRepeat, l.resuming, l.fresh, l.resumed, l.reset, l.everReady = seat{}, 0, 0, false, false, false, false, false
	h := transport.Hello{Version: wire.ProtocolVersion, ProtocolHash: l.cfg.Registry.Hash(), Token: l.cfg.Token, Match: l.cfg.Match}
	return h.Append(nil)
}

// Resume begins a connection back to the client's seat: what the link
// holds (its receiver, its count of messages taken) stays, and it returns
// the Hello with the resume ticket. ErrNoSeat if there is none.
func (l *Link) Resume() ([]byte, error) {
	if !l.seat.resumable || l.id == 0 {
		return nil, ErrNoSeat
	}
	to := Joined
	if l.everReady {
		to = Ready
	}
	t := wire.Ticket{Client: l.id, Secret: l.seat.secret, Taken: l.taken}
	l.startResume(to, false)
	return l.resumeHello(&t), nil
}

// ResumeSaved begins a connection back to the seat of a saved ticket
// (Ticket), holding nothing: the server starts the seat's replication over.
func (l *Link) ResumeSaved(saved []byte) ([]byte, error) {
	t, match, err := ParseSaved(saved)
	if err != nil {
		return nil, err
	}
	l.Start()
	l.id, l.seat = t.Client, seat{resumable: true, secret: t.Secret, match: match}
	l.startResume(Joined, true)
	return l.resumeHello(&t), nil
}

func (l *Link) startResume(to State, fresh bool) {
	l.state, l.err, l.drain, l.draining = Connecting, nil, Drain{}, false
	l.phase, l.since, l.heard = Closed, time.Time{}, time.Time{}
	l.resuming, l.fresh, l.resumeTo, l.resumed, l.reset = true, fresh, to, false, false
}

func (l *Link) resumeHello(t *wire.Ticket) []byte {
	match := l.seat.match
	if match == "" {
		match = l.cfg.Match
	}
	h := transport.Hello{Version: wire.ProtocolVersion, ProtocolHash: l.cfg.Registry.Hash(), Match: match, Resume: t.Append(nil)}
	return h.Append(nil)
}

// Ticket returns the client's seat as a saved ticket, for a new client
// (a reloaded page) to come back to it with ResumeSaved; nil without a
// seat. It changes at every Welcome (a resume spends the secret).
func (l *Link) Ticket() []byte {
	if !l.seat.resumable || l.id == 0 {
		return nil
	}
	t := wire.Ticket{Client: l.id, Secret: l.seat.secret, Fresh: true}
	b := t.Append(nil)
	b = append(b, byte(len(l.seat.match)))
	return append(b, l.seat.match...)
}

// ParseSaved decodes a saved ticket (Ticket): the wire ticket, then the
// match's length (a byte) and the match.
func ParseSaved(b []byte) (wire.Ticket, string, error) {
	if len(b) < wire.TicketLen+1 || len(b) != wire.TicketLen+1+int(b[wire.TicketLen]) || int(b[wire.TicketLen]) > transport.MaxMatchLen {
		return wire.Ticket{}, "", fmt.Errorf("%w: saved resume ticket of %d bytes", wire.ErrMalformed, len(b))
	}
	t, err := wire.ParseTicket(b[:wire.TicketLen])
	if err == nil && !t.Fresh {
		err = fmt.Errorf("%w: saved resume ticket is not fresh", wire.ErrMalformed)
	}
	return t, string(b[wire.TicketLen+1:]), err
}

// Resumed reports whether the last Welcome continued the client's seat,
// whether it started the seat's replication over (reset: the client drops
// what it holds), and how many of the client's reliable messages the server
// took (it sends again those after).
func (l *Link) Resumed() (resumed, reset bool, clientTaken uint32) {
	return l.resumed, l.reset, l.clientTaken
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
			if l.resuming && rj.Code == transport.CodeResumeRefused {
				l.seat = seat{} // (the seat is gone: a later Resume fails at once)
			}
			l.resuming = false
			l.Fail(explainReject(rj, l.cfg.Registry))
			return EventRejected, nil
		}
		return EventNone, fmt.Errorf("%w: message type 0x%02x before the welcome", wire.ErrMalformed, transport.TypeOf(m))
	}
	if len(m) == 0 {
		return EventNone, fmt.Errorf("%w: empty message", wire.ErrMalformed)
	}
	ev, err := l.onMessage(m)
	if err == nil {
		l.taken++
		l.takenRepeat = takenRepeats
	}
	return ev, err
}

// takenRepeats is how many datagrams say the count of messages taken after
// it changed (some may be lost); every takenEvery-th says it anyway.
const (
	takenRepeats = 6
	takenEvery   = 32
)

// onMessage takes one reliable message after the Welcome.
func (l *Link) onMessage(m []byte) (Event, error) {
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
		l.state, l.everReady = Ready, true
		return EventReady, nil
	case wire.KindMessages:
		return EventMessages, nil
	case wire.KindDrain:
		w, err := wire.ParseDrain(m)
		if err != nil {
			return EventNone, err
		}
		l.drain, l.draining = Drain{Reason: w.Reason, Left: w.Left, Address: w.Address}, true
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
	switch {
	case info.Resumed != l.resuming:
		return fmt.Errorf("%w: a Welcome that resumes %v to a Hello that resumes %v", wire.ErrMalformed, info.Resumed, l.resuming)
	case l.resuming && w.ClientID != l.id:
		return fmt.Errorf("%w: the Welcome resumes seat %d, not %d", wire.ErrMalformed, w.ClientID, l.id)
	}
	l.resumed, l.reset, l.clientTaken = info.Resumed, info.Reset || l.fresh, info.ClientTaken
	l.resuming = false
	l.seat = seat{resumable: info.Resumable, secret: info.Secret, match: info.Match}
	rcv := l.rcv
	if !l.resumed || l.reset {
		rcv = receive.NewReceiver(l.cfg.Registry, w.ClientID, int(info.Depth))
		rcv.MaxEntities = l.cfg.MaxEntities
		l.taken, l.touched, l.applied, l.everReady = 0, l.touched[:0], 0, false
	} else if rcv == nil || rcv.Depth() != int(info.Depth) {
		return fmt.Errorf("%w: the resumed Welcome has depth %d", wire.ErrMalformed, info.Depth)
	}
	if info.Compression && rcv != l.rcv {
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
	if l.resumed && !l.reset {
		l.state = l.resumeTo
	}
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
	l.dgCount++
	if l.seat.resumable && (l.takenRepeat > 0 || l.dgCount%takenEvery == 0) {
		l.takenRepeat = max(l.takenRepeat-1, 0)
		l.dgBuf = wire.AppendClientHeaderTaken(l.dgBuf[:0], &ack, l.taken)
	} else {
		l.dgBuf = wire.AppendClientHeader(l.dgBuf[:0], &ack)
	}
	if input != nil {
		l.dgBuf = input(l.dgBuf)
	}
	return l.dgBuf
}
