package quic

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	quicgo "github.com/quic-go/quic-go"

	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/internal/connio"
	"github.com/archenet/archenet/transport/internal/frame"
	"github.com/archenet/archenet/transport/internal/quicnet"
)

// Listener accepts archenet connections over QUIC. It implements [transport.Listener].
type Listener struct {
	sock   *quicnet.Socket
	ql     *quicgo.Listener
	set    connio.Settings
	conns  *connio.Accepted[*Conn]
	ctx    context.Context
	cancel context.CancelFunc
	setups sync.WaitGroup
}

var _ transport.Listener = (*Listener)(nil)

// Listen listens for QUIC connections on the UDP address addr (e.g. "127.0.0.1:0").
// cfg.TLS must hold a server certificate. A connection appears in Accept once the QUIC
// handshake is done, datagram support is confirmed and the client opened the message
// stream, all within cfg.HandshakeTimeout; the archenet handshake
// (transport.ServerHandshake) is up to the caller.
func Listen(addr string, cfg *Config) (*Listener, error) {
	r, s, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	if err := s.CheckListen(); err != nil {
		return nil, err
	}
	tlsConf, err := serverTLS(&r)
	if err != nil {
		return nil, err
	}
	// Connections before their handshake ends: see Config.HandshakeWindow,
	// MaxPendingPerAddress and RetryAbove.
	sock, err := quicnet.Listen(addr, &s)
	if err != nil {
		return nil, err
	}
	ql, err := sock.Tr.Listen(tlsConf, quicConfig(&s, true))
	if err != nil {
		_ = sock.Close(nil)
		return nil, err
	}
	l := &Listener{
		sock: sock, ql: ql, set: s,
		conns: connio.NewAccepted(s.AcceptBacklog, "quic", func(c *Conn, code transport.CloseCode, reason string) {
			c.core.Violation(code, reason)
		}),
	}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	quicnet.Serve(l.ctx, &l.setups, ql.Accept, l.setup)
	return l, nil
}

// setup turns a QUIC connection into a Conn: datagrams must be supported and the
// client must open the message stream with the preamble in time.
func (l *Listener) setup(qc *quicgo.Conn) {
	ctx, cancel := context.WithTimeout(l.ctx, l.set.HandshakeTimeout)
	defer cancel()
	fail := func(code transport.CloseCode, reason string) {
		l.set.Logger.Log(context.Background(), slog.LevelWarn, "archenet/quic: connection refused before the handshake", "remote", qc.RemoteAddr(), "code", code, "reason", reason)
		qc.CloseWithError(quicgo.ApplicationErrorCode(code), reason)
	}
	if err := checkDatagrams(qc); err != nil {
		fail(transport.CodeProtocolError, err.Error())
		return
	}
	stream, fe := frame.Accept(ctx, qc.AcceptStream, l.set.HandshakeTimeout)
	if fe != nil {
		fail(fe.Code, fe.Reason)
		return
	}
	if !l.conns.Add(func() *Conn { return newConn(qc, stream, nil, &l.set, l.conns.Forget) }) {
		fail(transport.CodeNormal, "listener closed")
	}
}

// Accept implements [transport.Listener]; the connection is a *[Conn].
func (l *Listener) Accept(ctx context.Context) (transport.Conn, error) { return l.conns.Accept(ctx) }

// PollAccept implements [transport.Listener].
func (l *Listener) PollAccept() (transport.Conn, bool) { return l.conns.PollAccept() }

// Close implements [transport.Listener]: it stops accepting, closes every connection
// it produced with CodeNormal, releases the UDP socket, and returns once all of the
// listener's goroutines have exited.
func (l *Listener) Close() error {
	if !l.conns.Close() {
		return nil
	}
	l.cancel()
	err := l.ql.Close()
	l.setups.Wait()
	l.conns.CloseAll("listener closed")
	return l.sock.Close(err)
}

// AdmissionStats are a listener's counts of connections before their handshake ends.
type AdmissionStats struct {
	// Pending is the number of connections whose handshake has not ended (this end has
	// not sent its first message yet).
	Pending int
	// RefusedPerAddress counts connections refused at their first packet because their
	// source address had Config.MaxPendingPerAddress connections pending.
	RefusedPerAddress uint64
	// Retries counts connection attempts asked to validate their source address with a
	// QUIC Retry because more than Config.RetryAbove connections were pending, or half
	// of a second's Config.NewConnectionRate was spent.
	Retries uint64
	// RefusedRate counts connections refused at their first packet because they came
	// faster than Config.NewConnectionRate, and RefusedRatePerAddress those from a
	// source faster than Config.NewConnectionRatePerAddress.
	RefusedRate, RefusedRatePerAddress uint64
}

// Admission returns the listener's pre-handshake counts.
func (l *Listener) Admission() AdmissionStats { return AdmissionStats(l.sock.Adm.Stats()) }

// Addr implements [transport.Listener]: the bound UDP address.
func (l *Listener) Addr() net.Addr { return l.sock.UDP.LocalAddr() }

func checkDatagrams(qc *quicgo.Conn) error {
	s := qc.ConnectionState().SupportsDatagrams
	if !s.Local || !s.Remote {
		return fmt.Errorf("quic: peer does not support QUIC datagrams (RFC 9221; local %v, remote %v)", s.Local, s.Remote)
	}
	return nil
}

// Dial connects to the archenet server at the UDP address addr, verifying its
// certificate against cfg.TLS (see [Config]). It returns once the QUIC handshake is done,
// datagram support is confirmed and the message stream is open. The archenet handshake
// comes next: pass the Conn to replication.NewClient, which sends the Hello itself, or,
// when driving the transport directly, run transport.ClientHandshake. Closing the Conn
// releases its UDP socket.
//
// The QUIC handshake and opening the stream are bounded by [Config].HandshakeTimeout
// (default 10s) and by ctx. Errors name the address and the phase that failed, and wrap
// the cause; a server that never answers gives
//
//	quic: dial 127.0.0.1:4433: no handshake response within 10s (is a server listening there?): …
//
// for which errors.Is(err, context.DeadlineExceeded) is true, as it is for any
// timeout of Dial.
func Dial(ctx context.Context, addr string, cfg *Config) (*Conn, error) {
	start := time.Now() // the caller's deadline is reported as of the call
	r, s, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	raddr, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, &dialError{addr: addr, phase: "resolving the address", err: err}
	}
	laddr := &net.UDPAddr{}
	if r.LocalAddr != "" {
		if laddr, err = net.ResolveUDPAddr("udp", r.LocalAddr); err != nil {
			return nil, &dialError{addr: addr, phase: "resolving the local address " + r.LocalAddr, err: err}
		}
	} else if raddr.IP.IsLoopback() {
		laddr.IP = net.IPv4(127, 0, 0, 1)
		if raddr.IP.To4() == nil {
			laddr.IP = net.IPv6loopback
		}
	}
	sock, err := quicnet.Bind(laddr)
	if err != nil {
		return nil, &dialError{addr: addr, phase: "binding a local UDP socket", err: err}
	}
	release := func() { _ = sock.Close(nil) }
	limit := s.HandshakeTimeout
	if d, ok := ctx.Deadline(); ok && d.Sub(start) < limit {
		limit = d.Sub(start) // the caller's deadline comes first
	}
	ctx, cancel := context.WithTimeout(ctx, s.HandshakeTimeout)
	defer cancel()
	qc, err := sock.Tr.Dial(ctx, raddr, clientTLS(&r, addr), quicConfig(&s, false))
	if err != nil {
		release()
		if quicnet.IsTimeout(err) {
			return nil, &dialError{addr: addr, timeout: true, err: err,
				phase: fmt.Sprintf("no handshake response within %v (is a server listening there?)", roundLimit(limit))}
		}
		if quicnet.Refused(err) {
			return nil, &dialError{addr: addr, err: err, phase: "QUIC handshake refused by the server (too many connections " +
				"from this address are in the handshake there, see quic.Config.MaxPendingPerAddress; or new connections come " +
				"too fast, from this address or from all, see NewConnectionRatePerAddress and NewConnectionRate: try again " +
				"in a moment; or it is closing)"}
		}
		return nil, &dialError{addr: addr, phase: "QUIC handshake", err: err}
	}
	fail := func(phase string, err error) (*Conn, error) {
		qc.CloseWithError(quicgo.ApplicationErrorCode(transport.CodeProtocolError), err.Error())
		release()
		if quicnet.IsTimeout(err) {
			phase += fmt.Sprintf(" (timed out after %v)", roundLimit(time.Since(start)))
		}
		return nil, &dialError{addr: addr, phase: phase, timeout: quicnet.IsTimeout(err), err: err}
	}
	if err := checkDatagrams(qc); err != nil {
		return fail("checking datagram support", err)
	}
	stream, err := qc.OpenStreamSync(ctx)
	if err != nil {
		return fail("opening the message stream", err)
	}
	if _, err := stream.Write([]byte{frame.Preamble}); err != nil {
		return fail("writing the stream preamble", err)
	}
	return newConn(qc, stream, nil, &s, func(*Conn) { release() }), nil
}

// dialError is an error of Dial: the address dialed, the phase that failed, and the
// cause. A timeout also matches context.DeadlineExceeded (quic-go reports its own
// handshake timeout as a distinct error type).
type dialError struct {
	addr, phase string
	timeout     bool
	err         error
}

func (e *dialError) Error() string {
	return "quic: dial " + e.addr + ": " + e.phase + ": " + e.err.Error()
}

func (e *dialError) Unwrap() error { return e.err }

// Is makes errors.Is(err, context.DeadlineExceeded) true for every timeout.
func (e *dialError) Is(target error) bool {
	return e.timeout && target == context.DeadlineExceeded
}

// Timeout reports whether Dial gave up waiting (see net.Error).
func (e *dialError) Timeout() bool { return e.timeout }

// roundLimit rounds d for a message: to 1ms, or to 100ms above a second.
func roundLimit(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}
