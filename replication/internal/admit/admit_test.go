package admit

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/transport"
)

const (
	version = 7
	hash    = 0xfeed
	// timeout is long in wall-clock terms: the Authenticator's context
	// runs on the wall clock, the desk on the test's simulated one, and
	// only the desk is to time a handshake out here.
	timeout = time.Hour
)

// conn is a connection in the handshake: the messages the client sent
// (polled in turn), those the desk sent it, and whether the client closed.
// The desk uses no other method (the embedded nil Conn would panic).
type conn struct {
	transport.Conn
	addr net.Addr
	in   [][]byte
	sent [][]byte
	done chan struct{}
}

func newConn(ip string, msgs ...[]byte) *conn {
	return &conn{addr: &net.UDPAddr{IP: net.ParseIP(ip), Port: 4000}, in: msgs, done: make(chan struct{})}
}

func (c *conn) PollMessage() ([]byte, bool) {
	if len(c.in) == 0 {
		return nil, false
	}
	m := c.in[0]
	c.in = c.in[1:]
	return m, true
}

func (c *conn) SendMessage(b []byte) error {
	c.sent = append(c.sent, append([]byte(nil), b...))
	return nil
}

func (c *conn) Done() <-chan struct{} { return c.done }
func (c *conn) Err() error            { return nil }
func (c *conn) RemoteAddr() net.Addr  { return c.addr }

// reject returns the one Reject c was sent.
func (c *conn) reject(t *testing.T) transport.Reject {
	t.Helper()
	require.Len(t, c.sent, 1, "one Reject")
	r, err := transport.ParseReject(c.sent[0])
	require.NoError(t, err)
	return r
}

// closed is a close the desk made.
type closed struct {
	c      transport.Conn
	code   transport.CloseCode
	reason string
}

// rig is a desk on a simulated clock, recording its closes.
type rig struct {
	d      *Desk
	now    time.Time
	closes []closed
	limit  error // what the slot limit says (nil: a slot is free)
	asked  []net.Addr
}

func newRig(auth func(ctx context.Context, remote net.Addr, token []byte) error) *rig {
	r := &rig{now: time.Unix(1000, 0)}
	r.d = New(Config{Version: version, Hash: hash, Authenticator: auth, HandshakeTimeout: timeout,
		Reject: func(he *transport.HandshakeError) transport.Reject { return he.Reject(version, hash) },
		Close: func(c transport.Conn, code transport.CloseCode, reason string) {
			r.closes = append(r.closes, closed{c, code, reason})
		},
		Now:    func() time.Time { return r.now },
		Logger: slog.New(slog.DiscardHandler)})
	return r
}

// advance runs a tick at the simulated now and returns the admitted.
func (r *rig) advance() []*Pending {
	return r.d.Advance(r.now, func(a net.Addr) error { r.asked = append(r.asked, a); return r.limit }, nil)
}

func hello(token string) []byte {
	return transport.Hello{Version: version, ProtocolHash: hash, Token: []byte(token)}.Append(nil)
}

// verdictIn waits until the Authenticator's verdict on every connection
// whose authentication runs is in (sent by its goroutine), so that the
// next Advance picks it up.
func verdictIn(d *Desk) {
	for _, p := range d.pending {
		for p.auth != nil && len(p.auth) == 0 {
			runtime.Gosched()
		}
	}
}

// A well-formed, matching Hello passes the desk without an Authenticator,
// read from the connection or handed over already read (routed); the
// slot limit is asked with the connection's address.
func TestHelloPasses(t *testing.T) {
	r := newRig(nil)
	polled := newConn("10.0.0.1", hello("a"))
	routed := newConn("10.0.0.2")
	r.d.Add(polled, nil)
	r.d.Add(routed, hello("b"))
	require.Equal(t, 2, r.d.Len())

	in := r.advance()
	require.Len(t, in, 2)
	require.Equal(t, transport.Conn(polled), in[0].Conn)
	require.Equal(t, "a", string(in[0].Hello.Token))
	require.Equal(t, transport.Conn(routed), in[1].Conn)
	require.Equal(t, "b", string(in[1].Hello.Token))
	require.Equal(t, uint16(version), in[1].Hello.Version)
	require.Equal(t, []net.Addr{polled.addr, routed.addr}, r.asked)
	require.Zero(t, r.d.Len(), "through: no longer in the handshake")
	require.Empty(t, polled.sent, "the server sends the Welcome, not the desk")
	require.Empty(t, r.closes)
	require.Equal(t, Counts{}, r.d.Counts)
}

// A connection whose Hello is not yet in stays, without asking the slot
// limit, until HandshakeTimeout has passed; then it is closed at once,
// counted as rejected and as a handshake timeout.
func TestNoHelloTimesOut(t *testing.T) {
	r := newRig(nil)
	c := newConn("10.0.0.1")
	r.d.Add(c, nil)
	r.now = r.now.Add(timeout)
	require.Empty(t, r.advance())
	require.Equal(t, 1, r.d.Len(), "still within the handshake time")
	require.Empty(t, r.asked)

	r.now = r.now.Add(time.Nanosecond)
	require.Empty(t, r.advance())
	require.Zero(t, r.d.Len())
	require.Equal(t, []closed{{c, transport.CodeHandshakeFailed, "no hello in time"}}, r.closes)
	require.Empty(t, c.sent)
	require.Equal(t, Counts{Rejected: 1, HandshakeTimeouts: 1}, r.d.Counts)

	// A Hello that arrives in time, just before the timeout, passes.
	late := newConn("10.0.0.2")
	r.d.Add(late, nil)
	r.now = r.now.Add(timeout)
	r.advance()
	late.in = append(late.in, hello(""))
	require.Len(t, r.advance(), 1)
}

// Each refused Hello gets a Reject saying why (malformed, version or hash
// mismatch, a match the server does not host, in that order, else the slot
// limit's reason) and is closed
// with the Reject's code only after RejectLinger, so that the client reads
// the Reject first.
func TestRefusedHellos(t *testing.T) {
	for _, tc := range []struct {
		name   string
		hello  []byte
		limit  error
		code   transport.CloseCode
		reason string // (contained in the Reject's)
	}{
		{"malformed", []byte{byte(transport.MessageHello), 1}, nil, transport.CodeHandshakeFailed, "handshake failed"},
		{"not a hello", transport.Welcome{}.Append(nil), nil, transport.CodeHandshakeFailed, "handshake failed"},
		{"version", transport.Hello{Version: version + 1, ProtocolHash: hash}.Append(nil), errors.New("full"), transport.CodeHandshakeFailed, "protocol version mismatch"},
		{"hash", transport.Hello{Version: version, ProtocolHash: hash + 1}.Append(nil), errors.New("full"), transport.CodeHandshakeFailed, "protocol hash mismatch"},
		{"other match", transport.Hello{Version: version, ProtocolHash: hash, Match: "duel"}.Append(nil), errors.New("full"), transport.CodeUnknownMatch,
			`no such match here: the Hello names match "duel", and this server hosts one unnamed match`},
		{"limit", hello("x"), errors.New("server full: 4 of 4 slots taken"), transport.CodeRejected, "server full: 4 of 4 slots taken"},
		{"draining", hello("x"), &transport.CloseError{Code: transport.CodeDraining, Reason: "draining"}, transport.CodeDraining, "draining"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(nil)
			r.limit = tc.limit
			c := newConn("10.0.0.1", tc.hello)
			r.d.Add(c, nil)
			require.Empty(t, r.advance())
			require.Zero(t, r.d.Len())
			rj := c.reject(t)
			require.Equal(t, tc.code, rj.Code)
			require.Contains(t, rj.Reason, tc.reason)
			require.Equal(t, uint16(version), rj.Version)
			require.Equal(t, uint64(hash), rj.ProtocolHash)
			require.Equal(t, Counts{Rejected: 1}, r.d.Counts)

			require.Empty(t, r.closes, "the close lingers")
			r.now = r.now.Add(transport.RejectLinger - time.Nanosecond)
			r.advance()
			require.Empty(t, r.closes)
			r.now = r.now.Add(time.Nanosecond)
			r.advance()
			require.Len(t, r.closes, 1)
			require.Equal(t, transport.Conn(c), r.closes[0].c)
			require.Equal(t, tc.code, r.closes[0].code)
		})
	}
}

// A server with a named match welcomes Hellos that name it or none, and
// refuses one that names another match, saying which it named and which
// the server hosts, before it asks for a slot; a Hello that came with its
// connection (routed by name by a host) is not judged by name again.
func TestMatchByName(t *testing.T) {
	r := newRig(nil)
	r.d.cfg.Match = "arena"
	named := func(m string) []byte {
		return transport.Hello{Version: version, ProtocolHash: hash, Match: m}.Append(nil)
	}
	same, none, other, routed := newConn("10.0.0.1", named("arena")), newConn("10.0.0.2", named("")), newConn("10.0.0.3", named("duel")), newConn("10.0.0.4")
	r.d.Add(same, nil)
	r.d.Add(none, nil)
	r.d.Add(other, nil)
	r.d.Add(routed, named("duel"))
	in := r.advance()
	require.Len(t, in, 3)
	require.Equal(t, []transport.Conn{same, none, routed}, []transport.Conn{in[0].Conn, in[1].Conn, in[2].Conn})
	require.Equal(t, []net.Addr{same.addr, none.addr, routed.addr}, r.asked, "no slot asked for the other match's Hello")
	rj := other.reject(t)
	require.Equal(t, transport.CodeUnknownMatch, rj.Code)
	require.Equal(t, `no such match here: the Hello names match "duel", and this server hosts "arena" (ServerConfig.Match)`, rj.Reason)
	require.Equal(t, Counts{Rejected: 1}, r.d.Counts)
}

// gate is an Authenticator the test answers: each call is reported on
// calls and waits for its verdict (call.answer) or for its context to end.
type gate struct{ calls chan call }

type call struct {
	ctx    context.Context
	remote net.Addr
	token  string
	answer chan error // the verdict to return
}

func newGate() *gate { return &gate{calls: make(chan call, 8)} }

func (g *gate) auth(ctx context.Context, remote net.Addr, token []byte) error {
	c := call{ctx: ctx, remote: remote, token: string(token), answer: make(chan error, 1)}
	g.calls <- c
	select {
	case err := <-c.answer:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// The Authenticator runs on a goroutine of its own: Advance does not wait
// for it. Meanwhile the connection is in the handshake and holds a slot
// (Authing, Each); its verdict, picked up by a later Advance, admits the
// connection or refuses it with the Authenticator's reason.
func TestAuthenticatorVerdicts(t *testing.T) {
	g := newGate()
	r := newRig(g.auth)
	ok, no, waiting := newConn("10.0.0.1", hello("good")), newConn("10.0.0.2", hello("bad")), newConn("10.0.0.3")
	r.d.Add(ok, nil)
	r.d.Add(no, nil)
	r.d.Add(waiting, nil)

	require.Empty(t, r.advance(), "no verdict yet")
	require.Equal(t, 3, r.d.Len())
	require.Equal(t, 2, r.d.Authing(), "the connection without a Hello holds no slot")
	var each []transport.Conn
	r.d.Each(func(p *Pending) { each = append(each, p.Conn) })
	require.Equal(t, []transport.Conn{ok, no}, each)
	c1, c2 := <-g.calls, <-g.calls
	if c1.token != "good" {
		c1, c2 = c2, c1
	}
	require.Equal(t, "good", c1.token)
	require.Equal(t, ok.addr, c1.remote)
	require.Equal(t, "bad", c2.token)

	c1.answer <- nil
	c2.answer <- errors.New("banned until Tuesday")
	verdictIn(r.d)
	in := r.advance()
	require.Len(t, in, 1)
	require.Equal(t, transport.Conn(ok), in[0].Conn)
	require.Equal(t, "good", string(in[0].Hello.Token))
	require.Empty(t, ok.sent)
	rj := no.reject(t)
	require.Equal(t, transport.CodeRejected, rj.Code)
	require.Equal(t, "banned until Tuesday", rj.Reason)
	require.Zero(t, r.d.Authing(), "each verdict releases its slot")
	require.Equal(t, 1, r.d.Len())
	require.Equal(t, Counts{Rejected: 1}, r.d.Counts)
}

// A slow Authenticator does not hold the connection past HandshakeTimeout
// on the desk's clock: the connection is refused as timed out, its slot
// released and the Authenticator's context cancelled. Its context never
// gives more than what is left of the handshake time.
func TestSlowAuthenticator(t *testing.T) {
	g := newGate()
	r := newRig(g.auth)
	c := newConn("10.0.0.1")
	r.d.Add(c, nil)
	r.now = r.now.Add(timeout / 4)
	r.advance()
	c.in = append(c.in, hello("slow"))
	r.advance()
	call := <-g.calls
	deadline, ok := call.ctx.Deadline()
	require.True(t, ok)
	require.False(t, deadline.After(time.Now().Add(timeout*3/4)), "bounded by the handshake time left")

	r.now = r.now.Add(timeout * 3 / 4)
	require.Empty(t, r.advance())
	require.Equal(t, 1, r.d.Authing(), "timeout not passed yet")
	require.Empty(t, c.sent)

	r.now = r.now.Add(time.Nanosecond)
	require.Empty(t, r.advance())
	require.Zero(t, r.d.Len())
	require.Zero(t, r.d.Authing())
	rj := c.reject(t)
	require.Equal(t, transport.CodeRejected, rj.Code)
	require.Equal(t, ErrAuthTimeout.Error(), rj.Reason)
	require.Equal(t, Counts{Rejected: 1, HandshakeTimeouts: 1}, r.d.Counts)
	require.ErrorIs(t, call.ctx.Err(), context.Canceled, "the desk cancelled the Authenticator")
}

// A connection that leaves the handshake otherwise releases the slot its
// authentication held: the client closed it (not counted as a
// rejection), or it sent a message before the verdict (a protocol
// violation: refused as malformed).
func TestAuthenticationAbandoned(t *testing.T) {
	g := newGate()
	r := newRig(g.auth)
	gone, chatty := newConn("10.0.0.1", hello("a")), newConn("10.0.0.2", hello("b"))
	r.d.Add(gone, nil)
	r.d.Add(chatty, nil)
	r.advance()
	require.Equal(t, 2, r.d.Authing())
	calls := map[string]call{}
	for range 2 {
		c := <-g.calls
		calls[c.token] = c
	}

	close(gone.done)
	chatty.in = append(chatty.in, []byte{9, 9, 9})
	require.Empty(t, r.advance())
	require.Zero(t, r.d.Len())
	require.Zero(t, r.d.Authing())
	require.Empty(t, gone.sent)
	rj := chatty.reject(t)
	require.Equal(t, transport.CodeHandshakeFailed, rj.Code)
	require.Contains(t, rj.Reason, "unexpected message of 3 bytes")
	require.Equal(t, Counts{Rejected: 1}, r.d.Counts)
	require.ErrorIs(t, calls["a"].ctx.Err(), context.Canceled)
	require.ErrorIs(t, calls["b"].ctx.Err(), context.Canceled)

	// A verdict that comes after the connection left is dropped: the next
	// Advance has nothing to pick up.
	require.Empty(t, r.advance())
	require.Equal(t, Counts{Rejected: 1}, r.d.Counts)

	// A client that closes while waiting for its Hello leaves too.
	quiet := newConn("10.0.0.3")
	r.d.Add(quiet, nil)
	close(quiet.done)
	r.advance()
	require.Zero(t, r.d.Len())
	require.Empty(t, r.closes, "closed by the client: nothing to close")
}

// A connection that closed during its authentication gives back the slot
// it was promised before any Hello of the same tick is judged, wherever it
// is in the desk's order.
func TestClosedReapedBeforeSlotsJudged(t *testing.T) {
	g := newGate()
	r := newRig(g.auth)
	late, gone := newConn("10.0.0.1"), newConn("10.0.0.2", hello("a"))
	r.d.Add(late, nil) // (first in order: its Hello comes after gone's)
	r.d.Add(gone, nil)
	r.advance()
	require.Equal(t, 1, r.d.Authing())
	<-g.calls

	close(gone.done)
	late.in = append(late.in, hello("b"))
	authing := -1
	r.d.Advance(r.now, func(net.Addr) error { authing = r.d.Authing(); return nil }, nil)
	require.Zero(t, authing, "the closed connection's slot was still promised when the Hello was judged")
	require.Equal(t, 1, r.d.Len())
	require.Equal(t, 1, r.d.Authing())
	<-g.calls
}

// Refuse rejects a connection the desk passed (the server filled up
// before it welcomed it), with the reason given; a refusal that is a
// CloseError closes with its code.
func TestRefuseAdmitted(t *testing.T) {
	r := newRig(nil)
	full, draining := newConn("10.0.0.1", hello("a")), newConn("10.0.0.2", hello("b"))
	r.d.Add(full, nil)
	r.d.Add(draining, nil)
	in := r.advance()
	require.Len(t, in, 2)
	r.d.Refuse(in[0], errors.New("server full"))
	r.d.Refuse(in[1], &transport.CloseError{Code: transport.CodeDraining, Reason: "going away"})
	require.Equal(t, transport.Reject{Code: transport.CodeRejected, Version: version, ProtocolHash: hash, Reason: "server full"}, full.reject(t))
	require.Equal(t, transport.Reject{Code: transport.CodeDraining, Version: version, ProtocolHash: hash, Reason: "going away"}, draining.reject(t))
	require.Equal(t, Counts{Rejected: 2}, r.d.Counts)
	r.now = r.now.Add(transport.RejectLinger)
	r.advance()
	require.Len(t, r.closes, 2)
	require.Equal(t, transport.CodeRejected, r.closes[0].code)
	require.Equal(t, transport.CodeDraining, r.closes[1].code)
}

// Close closes every connection in the handshake with the code given,
// cancels the authentications that run, and closes the lingering
// rejected connections at once, with their own code.
func TestClose(t *testing.T) {
	g := newGate()
	r := newRig(g.auth)
	authing, waiting, rejected := newConn("10.0.0.1", hello("a")), newConn("10.0.0.2"), newConn("10.0.0.3", []byte{0})
	r.d.Add(authing, nil)
	r.d.Add(waiting, nil)
	r.d.Add(rejected, nil)
	r.advance()
	call := <-g.calls
	require.Equal(t, 1, r.d.Authing())
	require.Empty(t, r.closes)

	r.d.Close(transport.CodeDraining, "bye")
	require.Zero(t, r.d.Len())
	require.Zero(t, r.d.Authing())
	require.ElementsMatch(t, []closed{
		{authing, transport.CodeDraining, "bye"},
		{waiting, transport.CodeDraining, "bye"},
		{rejected, transport.CodeHandshakeFailed, rejected.reject(t).Reason},
	}, r.closes)
	require.ErrorIs(t, call.ctx.Err(), context.Canceled)
}

// SourceOf keys the per-address limit: an IPv4 address (also written as
// IPv6), an IPv6 address's /64, another transport's host without its port.
func TestSourceOf(t *testing.T) {
	for _, tc := range []struct {
		addr net.Addr
		want string
	}{
		{&net.UDPAddr{IP: net.ParseIP("192.0.2.7"), Port: 1}, "192.0.2.7"},
		{&net.UDPAddr{IP: net.ParseIP("::ffff:192.0.2.7"), Port: 2}, "192.0.2.7"},
		{&net.TCPAddr{IP: net.IPv4(192, 0, 2, 7).To4(), Port: 3}, "192.0.2.7"},
		{&net.UDPAddr{IP: net.ParseIP("2001:db8:1:2:3:4:5:6"), Port: 4}, "2001:db8:1:2::/64"},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2::9")}, "2001:db8:1:2::/64"},
		{&net.UnixAddr{Name: "host-a:99", Net: "unix"}, "host-a"},
		{&net.UnixAddr{Name: "/run/game.sock", Net: "unix"}, "/run/game.sock"},
		{nil, ""},
	} {
		require.Equal(t, tc.want, SourceOf(tc.addr), "%v", tc.addr)
	}
	require.NotEqual(t, SourceOf(&net.UDPAddr{IP: net.ParseIP("2001:db8:1:2::1")}), SourceOf(&net.UDPAddr{IP: net.ParseIP("2001:db8:1:3::1")}))
}
