package quic

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	quicgo "github.com/quic-go/quic-go"

	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/internal/admission"
	"github.com/archenet/archenet/transport/internal/connio"
)

// Listener accepts archenet connections over QUIC. It implements [transport.Listener].
type Listener struct {
	udp    *net.UDPConn
	tr     *quicgo.Transport
	ql     *quicgo.Listener
	cfg    Config
	adm    *admission.Budget
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
	r, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	if err := r.checkListen(); err != nil {
		return nil, err
	}
	tlsConf, err := serverTLS(&r)
	if err != nil {
		return nil, err
	}
	uaddr, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, err
	}
	udp, err := net.ListenUDP("udp", uaddr)
	if err != nil {
		return nil, err
	}
	// Connections before their handshake ends: see Config.HandshakeWindow,
	// MaxPendingPerAddress and RetryAbove.
	adm := admission.New(r.MaxPendingPerAddress, r.RetryAbove)
	tr := &quicgo.Transport{Conn: udp, ConnContext: adm.ConnContext, VerifySourceAddress: adm.VerifySource}
	ql, err := tr.Listen(tlsConf, r.quicConfig(true))
	if err != nil {
		tr.Close()
		udp.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &Listener{
		udp: udp, tr: tr, ql: ql, cfg: r, adm: adm,
		conns: connio.NewAccepted[*Conn](r.AcceptBacklog),
		ctx:   ctx, cancel: cancel,
	}
	l.setups.Add(1)
	go l.acceptLoop()
	return l, nil
}

func (l *Listener) acceptLoop() {
	defer l.setups.Done()
	for {
		qc, err := l.ql.Accept(l.ctx)
		if err != nil {
			return
		}
		l.setups.Add(1)
		go l.setup(qc)
	}
}

// setup turns a QUIC connection into a Conn: datagrams must be supported and the
// client must open the message stream with the preamble in time.
func (l *Listener) setup(qc *quicgo.Conn) {
	defer l.setups.Done()
	ctx, cancel := context.WithTimeout(l.ctx, l.cfg.HandshakeTimeout)
	defer cancel()
	fail := func(code transport.CloseCode, reason string) {
		l.cfg.Logger.Warn("archenet/quic: connection refused before the handshake", "remote", qc.RemoteAddr(), "code", code, "reason", reason)
		qc.CloseWithError(quicgo.ApplicationErrorCode(code), reason)
	}
	if err := checkDatagrams(qc); err != nil {
		fail(transport.CodeProtocolError, err.Error())
		return
	}
	stream, err := qc.AcceptStream(ctx)
	if err != nil {
		fail(transport.CodeTimeout, "message stream not opened in time")
		return
	}
	stream.SetReadDeadline(time.Now().Add(l.cfg.HandshakeTimeout))
	var pre [1]byte
	if _, err := io.ReadFull(stream, pre[:]); err != nil {
		fail(transport.CodeProtocolError, "message stream preamble missing")
		return
	}
	if pre[0] != streamPreamble {
		fail(transport.CodeProtocolError, fmt.Sprintf("bad message stream preamble %#x", pre[0]))
		return
	}
	stream.SetReadDeadline(time.Time{})

	c, ok := l.conns.Add(func() *Conn { return newConn(qc, stream, nil, l.cfg, l.conns.Forget) })
	if !ok {
		fail(transport.CodeNormal, "listener closed")
		return
	}
	if !l.conns.Offer(c) {
		c.logClose(transport.CodeRejected, "server busy: accept backlog full")
		c.closeNoWait(transport.CodeRejected, "server busy: accept backlog full")
	}
}

// Accept implements [transport.Listener]; the connection is a *[Conn].
func (l *Listener) Accept(ctx context.Context) (transport.Conn, error) {
	c, ok, err := l.conns.Accept(ctx)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("quic: listener: %w", transport.ErrClosed)
	}
	return c, nil
}

// PollAccept implements [transport.Listener].
func (l *Listener) PollAccept() (transport.Conn, bool) {
	c, ok := l.conns.Poll()
	if !ok {
		return nil, false
	}
	return c, true
}

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
	if e := l.tr.Close(); err == nil {
		err = e
	}
	if e := l.udp.Close(); err == nil && !errors.Is(e, net.ErrClosed) {
		err = e
	}
	return err
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
	// QUIC Retry because more than Config.RetryAbove connections were pending.
	Retries uint64
}

// Admission returns the listener's pre-handshake counts.
func (l *Listener) Admission() AdmissionStats {
	return AdmissionStats{Pending: l.adm.Pending(), RefusedPerAddress: l.adm.Refused(), Retries: l.adm.Retries()}
}

// Addr implements [transport.Listener]: the bound UDP address.
func (l *Listener) Addr() net.Addr { return l.udp.LocalAddr() }

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
	r, err := cfg.resolve()
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
	udp, err := net.ListenUDP("udp", laddr)
	if err != nil {
		return nil, &dialError{addr: addr, phase: "binding a local UDP socket", err: err}
	}
	tr := &quicgo.Transport{Conn: udp}
	release := func() {
		tr.Close()
		udp.Close()
	}
	limit := r.HandshakeTimeout
	if d, ok := ctx.Deadline(); ok && d.Sub(start) < limit {
		limit = d.Sub(start) // the caller's deadline comes first
	}
	ctx, cancel := context.WithTimeout(ctx, r.HandshakeTimeout)
	defer cancel()
	qc, err := tr.Dial(ctx, raddr, clientTLS(&r, addr), r.quicConfig(false))
	if err != nil {
		release()
		if isTimeout(err) {
			return nil, &dialError{addr: addr, timeout: true, err: err,
				phase: fmt.Sprintf("no handshake response within %v (is a server listening there?)", roundLimit(limit))}
		}
		var te *quicgo.TransportError
		if errors.As(err, &te) && te.Remote && te.ErrorCode == quicgo.ConnectionRefused {
			return nil, &dialError{addr: addr, err: err, phase: "QUIC handshake refused by the server (too many connections " +
				"from this address are in the handshake there, see quic.Config.MaxPendingPerAddress, or it is closing)"}
		}
		return nil, &dialError{addr: addr, phase: "QUIC handshake", err: err}
	}
	fail := func(phase string, err error) (*Conn, error) {
		qc.CloseWithError(quicgo.ApplicationErrorCode(transport.CodeProtocolError), err.Error())
		release()
		if isTimeout(err) {
			phase += fmt.Sprintf(" (timed out after %v)", roundLimit(time.Since(start)))
		}
		return nil, &dialError{addr: addr, phase: phase, timeout: isTimeout(err), err: err}
	}
	if err := checkDatagrams(qc); err != nil {
		return fail("checking datagram support", err)
	}
	stream, err := qc.OpenStreamSync(ctx)
	if err != nil {
		return fail("opening the message stream", err)
	}
	if _, err := stream.Write([]byte{streamPreamble}); err != nil {
		return fail("writing the stream preamble", err)
	}
	return newConn(qc, stream, nil, r, func(*Conn) { release() }), nil
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

// isTimeout reports whether err is a deadline or quic-go's handshake or idle timeout.
func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var hs *quicgo.HandshakeTimeoutError
	var idle *quicgo.IdleTimeoutError
	return errors.As(err, &hs) || errors.As(err, &idle)
}

// roundLimit rounds d for a message: to 1ms, or to 100ms above a second.
func roundLimit(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}
