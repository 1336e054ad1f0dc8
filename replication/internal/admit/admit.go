// Package admit is the server's front desk: the connections in the
// handshake, from their first message to a judged, authenticated Hello.
// It reads each connection's Hello (or takes the one a router already
// read), judges it (version, protocol hash, the slot limits the server
// names), runs the game's Authenticator on a goroutine of its own within
// the handshake's time, and hands the connections that pass to the server
// to welcome; the others get a Reject that lingers a moment before the
// close, so that the client reads why. Nothing here waits: a tick's
// Advance only picks up what arrived.
package admit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"github.com/archenet/archenet/replication/internal/closing"
	"github.com/archenet/archenet/replication/internal/wire"
	"github.com/archenet/archenet/transport"
)

// Config is what the desk needs of the server.
type Config struct {
	Version uint16 // the protocol version Hellos must name
	Hash    uint64 // the registry's protocol hash
	// Authenticator, if set, must accept a Hello's token (see
	// replication.ServerConfig.Authenticator); it runs on a goroutine of its
	// own, bounded by what is left of HandshakeTimeout.
	Authenticator    func(ctx context.Context, remote net.Addr, token []byte) error
	HandshakeTimeout time.Duration
	// Match is the name of the server's match (replication.ServerConfig.Match):
	// a Hello the desk read itself that names another match is refused. (A
	// Hello that came with its connection was routed to this match by name.)
	Match string
	// Reject builds the Reject sent for he (with the server's component
	// list on a protocol hash mismatch).
	Reject func(he *transport.HandshakeError) transport.Reject
	// Close closes a connection without waiting for the transport.
	Close  func(c transport.Conn, code transport.CloseCode, reason string)
	Now    func() time.Time
	Logger *slog.Logger
}

// Counts are the desk's cumulative counts.
type Counts struct {
	// Rejected counts connections sent a Reject (or closed for no Hello in
	// time); HandshakeTimeouts those of them closed because they were not
	// through the handshake within HandshakeTimeout.
	Rejected, HandshakeTimeouts int
}

// Desk holds the connections in the handshake. Not safe for concurrent
// use (the Authenticator's goroutines only send their verdicts).
type Desk struct {
	cfg     Config
	pending []*Pending
	// lingering: rejected connections left open for a moment, so that
	// the Reject reaches the client before the close.
	lingering closing.Lingering
	authing   int // pending connections whose Authenticator runs
	Counts    Counts
}

// Pending is a connection in the handshake: waiting for its Hello, or for
// the Authenticator's verdict on it.
type Pending struct {
	Conn  transport.Conn
	Hello transport.Hello // (once judged)
	since time.Time
	first []byte // the Hello's bytes (Hello aliases them)
	// routed: first was read by whoever handed the connection over and is
	// judged on the first Advance.
	routed bool
	// auth receives the Authenticator's verdict; non-nil while it runs.
	auth   chan error
	cancel context.CancelFunc
}

// New returns an empty desk.
func New(cfg Config) *Desk { return &Desk{cfg: cfg} }

// Len returns how many connections are in the handshake.
func (d *Desk) Len() int { return len(d.pending) }

// Authing returns how many of them wait for the Authenticator (each holds
// a client slot meanwhile).
func (d *Desk) Authing() int { return d.authing }

// Add takes c into the handshake; hello, if not nil, is its first message,
// already read by whoever handed c over (it must not be modified).
func (d *Desk) Add(c transport.Conn, hello []byte) {
	d.pending = append(d.pending, &Pending{Conn: c, since: d.cfg.Now(), first: hello, routed: hello != nil})
}

// Each calls fn for every connection in the handshake whose
// Authenticator runs (for a slot limit per address).
func (d *Desk) Each(fn func(p *Pending)) {
	for _, p := range d.pending {
		if p.auth != nil {
			fn(p)
		}
	}
}

// Advance moves every connection on by what arrived since the last tick,
// closes the rejected ones whose linger is over, and returns the
// connections through the handshake, for the server to welcome (valid until
// the next Advance). limit says why a client from an address cannot have a
// slot now (nil: it can); it is asked before authentication, so junk Hellos
// cost no Authenticator call while the server is full.
func (d *Desk) Advance(now time.Time, limit func(net.Addr) error, admitted []*Pending) []*Pending {
	d.lingering.Due(now, d.cfg.Close)
	// The connections closed since the last tick go first, so that a slot
	// promised to one of them is free when any Hello is judged this tick.
	keep := d.pending[:0]
	for _, p := range d.pending {
		if !d.reap(p) {
			keep = append(keep, p)
		}
	}
	clear(d.pending[len(keep):])
	d.pending = keep
	keep = d.pending[:0]
	for _, p := range d.pending {
		switch d.advance(p, now, limit) {
		case stay:
			keep = append(keep, p)
		case pass:
			admitted = append(admitted, p)
		}
	}
	clear(d.pending[len(keep):]) // release the connections that left
	d.pending = keep
	return admitted
}

// outcome is what became of a pending connection.
type outcome uint8

const (
	stay outcome = iota // still in the handshake
	pass                // through: to be welcomed
	gone                // rejected or closed
)

// reap reports whether p's connection closed, releasing what it held.
func (d *Desk) reap(p *Pending) bool {
	select {
	case <-p.Conn.Done():
		d.endAuth(p)
		d.cfg.Logger.Info("archenet: connection closed during the handshake", "remote", p.Conn.RemoteAddr(), "err", p.Conn.Err())
		return true
	default:
		return false
	}
}

// advance moves p on.
func (d *Desk) advance(p *Pending, now time.Time, limit func(net.Addr) error) outcome {
	if p.auth != nil {
		return d.awaitAuth(p, now)
	}
	m, ok, routed := p.first, p.routed, p.routed
	if p.routed {
		p.routed = false
	} else {
		m, ok = p.Conn.PollMessage()
	}
	if !ok {
		if now.Sub(p.since) > d.cfg.HandshakeTimeout {
			d.Counts.Rejected++
			d.Counts.HandshakeTimeouts++
			d.cfg.Logger.Warn("archenet: connection dropped: no hello in time", "remote", p.Conn.RemoteAddr(), "timeout", d.cfg.HandshakeTimeout)
			d.cfg.Close(p.Conn, transport.CodeHandshakeFailed, "no hello in time")
			return gone
		}
		return stay
	}
	h, he := transport.JudgeHello(m, d.cfg.Version, d.cfg.Hash, nil)
	if he == nil && !routed && h.Match != "" && h.Match != d.cfg.Match {
		_, he = transport.JudgeHello(m, d.cfg.Version, d.cfg.Hash, d.otherMatch(h.Match))
	}
	if he == nil && len(h.Resume) == 0 { // (a resume takes its own seat: the server judges its ticket)
		_, he = transport.JudgeHello(m, d.cfg.Version, d.cfg.Hash, limit(p.Conn.RemoteAddr()))
	}
	if he != nil {
		d.Reject(p.Conn, he)
		return gone
	}
	p.Hello, p.first = h, m
	if d.cfg.Authenticator == nil || len(h.Resume) > 0 {
		return pass // (a resume's ticket is its credential)
	}
	d.startAuth(p, now)
	return stay
}

// ErrUnknownMatch is why a Hello that names a match the server does not
// host is refused.
var ErrUnknownMatch error = &transport.CodeError{Code: transport.CodeUnknownMatch, Text: "no such match here"}

// otherMatch is the refusal of a Hello that names the match name, which is
// not the server's.
func (d *Desk) otherMatch(name string) error {
	if d.cfg.Match == "" {
		return fmt.Errorf("%w: the Hello names match %q, and this server hosts one unnamed match (replication.ClientConfig.Match must be empty, or ServerConfig.Match name it)", ErrUnknownMatch, name)
	}
	return fmt.Errorf("%w: the Hello names match %q, and this server hosts %q (ServerConfig.Match)", ErrUnknownMatch, name, d.cfg.Match)
}

// startAuth runs the Authenticator on p's Hello on a goroutine of its own,
// bounded by what is left of p's handshake time.
func (d *Desk) startAuth(p *Pending, now time.Time) {
	left := d.cfg.HandshakeTimeout - now.Sub(p.since)
	ctx, cancel := context.WithTimeout(context.Background(), max(left, 0))
	p.auth, p.cancel = make(chan error, 1), cancel
	d.authing++
	auth, remote, token := d.cfg.Authenticator, p.Conn.RemoteAddr(), p.Hello.Token
	go func(done chan<- error) {
		err := auth(ctx, remote, token)
		if err == nil && ctx.Err() != nil {
			err = fmt.Errorf("authentication did not finish within the handshake timeout")
		}
		done <- err
	}(p.auth)
}

// stopAuth abandons a running authentication (its goroutine ends when the
// Authenticator returns; the verdict is dropped).
func (p *Pending) stopAuth() {
	if p.cancel != nil {
		p.cancel()
		p.cancel = nil
	}
}

// endAuth releases the client slot p's authentication held.
func (d *Desk) endAuth(p *Pending) {
	if p.auth != nil {
		p.stopAuth()
		p.auth = nil
		d.authing--
	}
}

// ErrAuthTimeout: the Authenticator did not answer within the handshake
// time.
var ErrAuthTimeout = errors.New("authentication timed out")

// awaitAuth picks up the Authenticator's verdict on p if it is in.
func (d *Desk) awaitAuth(p *Pending, now time.Time) outcome {
	if m, ok := p.Conn.PollMessage(); ok {
		d.endAuth(p)
		d.Reject(p.Conn, transport.AsHandshakeError(fmt.Errorf("%w: unexpected message of %d bytes during the handshake", wire.ErrMalformed, len(m)), d.cfg.Version, d.cfg.Hash))
		return gone
	}
	select {
	case err := <-p.auth:
		d.endAuth(p)
		if err != nil {
			d.Refuse(p, err)
			return gone
		}
		return pass
	default:
	}
	if now.Sub(p.since) > d.cfg.HandshakeTimeout {
		d.endAuth(p)
		d.Counts.HandshakeTimeouts++
		d.Refuse(p, ErrAuthTimeout)
		return gone
	}
	return stay
}

// Refuse rejects p, whose Hello was acceptable, for the server's reason
// why (the server filled up, it drains, the Authenticator said no).
func (d *Desk) Refuse(p *Pending, why error) {
	_, he := transport.JudgeHello(p.first, d.cfg.Version, d.cfg.Hash, why)
	d.Reject(p.Conn, he)
}

// Reject sends c a Reject saying why and closes it after a linger.
func (d *Desk) Reject(c transport.Conn, he *transport.HandshakeError) {
	d.Counts.Rejected++
	rj := d.cfg.Reject(he)
	_ = c.SendMessage(rj.Append(nil))
	// Close after a linger, so the Reject arrives before the close (a QUIC
	// close may discard stream data in flight); the client closes first
	// once it has read the Reject.
	reason := transport.TruncateReason(he.Error(), 200)
	if !d.lingering.Add(c, d.cfg.Now().Add(transport.RejectLinger), he.CloseCode(), reason) {
		d.cfg.Close(c, he.CloseCode(), reason)
	}
	d.cfg.Logger.Info("archenet: client rejected", "remote", c.RemoteAddr(), "reason", he.Error())
}

// Close closes every connection in the handshake with code and reason and
// the lingering ones now.
func (d *Desk) Close(code transport.CloseCode, reason string) {
	for _, p := range d.pending {
		p.stopAuth()
		d.cfg.Close(p.Conn, code, reason)
	}
	d.pending = nil
	d.authing = 0
	d.lingering.Due(time.Time{}, d.cfg.Close)
}

// SourceOf is the key of a slot limit per address: an IPv4 address, the
// /64 prefix of an IPv6 address (one host usually holds a whole /64), or,
// for other transports, the address without its port.
func SourceOf(addr net.Addr) string {
	var ip netip.Addr
	switch a := addr.(type) {
	case *net.UDPAddr:
		ip, _ = netip.AddrFromSlice(a.IP)
	case *net.TCPAddr:
		ip, _ = netip.AddrFromSlice(a.IP)
	case nil:
		return ""
	default:
		s := addr.String()
		if host, _, err := net.SplitHostPort(s); err == nil {
			return host
		}
		return s
	}
	if ip = ip.Unmap(); ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}
