package replication

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

// link is the client's side of its channel to the server, as a state
// machine: the server's reliable messages and datagrams go in with the
// time, and out come events for the Client to apply to its world (welcome,
// rejection, a spawn batch, ready), the ticks whose views gained datagrams,
// and the datagram to send (ack and input). It does no I/O, starts no
// goroutine and does not touch the world: the Client pumps its connection
// into it and applies its events to the mirrors.
type link struct {
	cfg   *ClientConfig
	plans []*schema.Plan
	stats *ClientStats

	state    ClientState
	err      error
	id       ClientID
	info     wire.Welcome
	rcv      *receive.Receiver
	arrivals timing.Arrivals
	touched  []uint32 // ticks that gained datagrams since the last fresh
	drain    *DrainNotice
	dgBuf    []byte

	// Liveness: when the current state began (as of the first expired
	// check in it) and when the server was last heard from.
	phase        ClientState
	since, heard time.Time
}

// linkEvent is what a reliable message meant.
type linkEvent uint8

const (
	eventNone        linkEvent = iota
	eventWelcome               // joined: id, info, receiver and arrivals are set
	eventRejected              // the server refused the client: state closed, err says why
	eventSpawns                // a valid spawn batch: apply it with link.spawns
	eventReady                 // the initial world has arrived
	eventSpawnsEnded           // predicted spawns the server ended unsent: apply with parseSpawnsEnded
	eventDrain                 // the server is draining: drain is set
)

// start begins a connection: the link forgets the last one and returns the
// Hello to send.
func (l *link) start() []byte {
	l.state, l.err, l.id, l.info, l.drain = StateConnecting, nil, 0, wire.Welcome{}, nil
	l.rcv = receive.NewReceiver(l.cfg.Registry, 0, 0)
	l.rcv.MaxEntities = l.cfg.MaxEntities
	l.touched = l.touched[:0]
	l.phase, l.since, l.heard = StateClosed, time.Time{}, time.Time{}
	h := transport.Hello{Version: ProtocolVersion, ProtocolHash: l.cfg.Registry.Hash(), Token: l.cfg.Token, Match: l.cfg.Match}
	return h.Append(nil)
}

// ErrTimeout is wrapped by the errors of a client that gave up on its
// server (ClientConfig.ConnectTimeout, ReadyTimeout, Timeout); the text
// names the server's address and the phase.
var ErrTimeout = errors.New("replication: timeout")

// hear notes that something arrived from the server at now.
func (l *link) hear(now time.Time) { l.heard = now }

// expired reports the liveness failure of the link at now (nil if none):
// no Welcome within ConnectTimeout of the Hello, no initial world within
// ReadyTimeout of the Welcome, or nothing heard for Timeout once welcomed.
// remote names the server (formatted only into the error).
func (l *link) expired(now time.Time, remote fmt.Stringer) error {
	if l.state != l.phase {
		l.phase, l.since = l.state, now
		if l.heard.IsZero() {
			l.heard = now
		}
	}
	c := l.cfg
	switch {
	case l.state == StateConnecting && c.ConnectTimeout > 0 && now.Sub(l.since) > c.ConnectTimeout:
		return fmt.Errorf("%w: connecting to %s: no Welcome within %v of the Hello (no archenet server there, or it is not running Server.Receive)",
			ErrTimeout, remote, c.ConnectTimeout)
	case l.state != StateJoined && l.state != StateReady:
		return nil
	case c.Timeout > 0 && now.Sub(l.heard) > c.Timeout:
		if l.state == StateJoined && !l.heard.After(l.since) {
			return fmt.Errorf("%w: joined %s: nothing arrived in the %v since the Welcome (is the server running Server.Send?)", ErrTimeout, remote, c.Timeout)
		}
		return fmt.Errorf("%w: %s %s: nothing arrived for %v (dead link, or the server stopped running Server.Send)", ErrTimeout, l.state, remote, c.Timeout)
	case l.state == StateJoined && c.ReadyTimeout > 0 && now.Sub(l.since) > c.ReadyTimeout:
		return fmt.Errorf("%w: joined %s: the initial world did not arrive within %v of the Welcome", ErrTimeout, remote, c.ReadyTimeout)
	}
	return nil
}

// fail closes the link with err (the first reason sticks).
func (l *link) fail(err error) {
	if l.state == StateClosed {
		return
	}
	l.state, l.err = StateClosed, err
	if errors.Is(err, errClosedByApp) {
		l.cfg.Logger.Info("archenet: disconnected", "client", l.id, "err", err)
		return
	}
	// Anything else ends the game for this client: loud, and offered to
	// the game's hook.
	l.cfg.Logger.Error("archenet: disconnected", "client", l.id, "err", err)
	if l.cfg.OnError != nil {
		l.cfg.OnError(err)
	}
}

// onMessage takes one reliable message from the server. An error is a
// protocol violation: the caller closes the connection with it.
func (l *link) onMessage(m []byte) (linkEvent, error) {
	if l.state == StateConnecting {
		switch transport.TypeOf(m) {
		case transport.MessageWelcome:
			if err := l.welcome(m); err != nil {
				return eventNone, err
			}
			return eventWelcome, nil
		case transport.MessageReject:
			rj, err := transport.ParseReject(m)
			if err != nil {
				return eventNone, err
			}
			l.fail(explainReject(rj, l.cfg.Registry))
			return eventRejected, nil
		}
		return eventNone, fmt.Errorf("%w: message type 0x%02x before the welcome", ErrMalformed, transport.TypeOf(m))
	}
	if len(m) == 0 {
		return eventNone, fmt.Errorf("%w: empty message", ErrMalformed)
	}
	switch m[0] {
	case wire.KindSpawns:
		// Validated whole before any of it is applied.
		if err := l.spawns(m, func(uint32, wire.SpawnEntry) {}); err != nil {
			return eventNone, err
		}
		return eventSpawns, nil
	case wire.KindSpawnsEnded:
		if err := wire.ParseSpawnsEnded(m, func(uint32) {}); err != nil {
			return eventNone, err
		}
		return eventSpawnsEnded, nil
	case wire.KindReady:
		if _, err := wire.ParseReady(m); err != nil {
			return eventNone, err
		}
		if l.state != StateJoined {
			return eventNone, nil
		}
		l.state = StateReady
		return eventReady, nil
	case wire.KindDrain:
		w, err := wire.ParseDrain(m)
		if err != nil {
			return eventNone, err
		}
		d := DrainNotice{Reason: w.Reason, Left: w.Left}
		if d.Left > 0 {
			d.Deadline = l.heard.Add(d.Left)
		}
		l.drain = &d
		return eventDrain, nil
	}
	return eventNone, fmt.Errorf("%w: unknown message type 0x%02x", ErrMalformed, m[0])
}

// welcome takes the server's Welcome: the client id and the server's
// replication parameters, with which the receiver and the arrival estimator
// start.
func (l *link) welcome(m []byte) error {
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
			return err
		}
	}
	interval := time.Second / time.Duration(info.TickRate)
	threshold, jitter := l.cfg.InterpClock.ResetThreshold, l.cfg.InterpClock.InitialJitter
	if threshold <= 0 {
		threshold = time.Second
	}
	if jitter <= 0 {
		jitter = interval / 4
	}
	l.id, l.info, l.rcv = w.ClientID, info, rcv
	l.arrivals = timing.NewArrivals(interval, threshold, jitter)
	l.state = StateJoined
	return nil
}

// spawns calls fn for every entry of the spawn batch m.
func (l *link) spawns(m []byte, fn func(tick uint32, e wire.SpawnEntry)) error {
	return wire.ParseSpawns(m, l.plans, l.id, schema.MaxLanes*4, fn)
}

// onDatagram takes one snapshot datagram that arrived at now. It returns
// the datagram's tick and whether it was the first of its tick to arrive. A
// datagram that does not decode is dropped and counted (unreliable
// datagrams may be stale, duplicated or hostile; none of that is fatal).
func (l *link) onDatagram(d []byte, now time.Time) (tick uint32, first bool) {
	l.stats.BytesIn += uint64(len(d))
	l.stats.DatagramBytesIn += uint64(len(d))
	records := l.rcv.Records
	S, err := l.rcv.Decode(d)
	if err != nil {
		l.stats.DatagramsDropped++
		return S, false
	}
	l.stats.Datagrams++
	l.stats.Records += l.rcv.Records - records
	if got, _ := l.rcv.Parts(S); got == 1 {
		first = true
		l.arrivals.Observe(S, now)
	}
	if !slices.Contains(l.touched, S) {
		l.touched = append(l.touched, S)
	}
	return S, first
}

// fresh returns the ticks whose views gained datagrams since the last call,
// oldest first (valid until the next onDatagram).
func (l *link) fresh() []uint32 {
	slices.Sort(l.touched)
	t := l.touched
	l.touched = l.touched[:0]
	return t
}

// datagram returns the client datagram to send now: the snapshot ack and,
// if configured, the input section (valid until the next call).
func (l *link) datagram() []byte {
	ack := l.rcv.Ack()
	l.dgBuf = wire.AppendClientHeader(l.dgBuf[:0], &ack)
	if l.cfg.Input != nil {
		l.dgBuf = l.cfg.Input(l.dgBuf)
	}
	return l.dgBuf
}
