// Package quicnet is the quic-go plumbing transport/quic and transport/webtransport
// share natively (never in a js/wasm build): UDP sockets and their quic-go
// transports, the QUIC and TLS settings, the accept loop, and the meaning of
// quic-go's errors.
package quicnet

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync"

	quicgo "github.com/quic-go/quic-go"

	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/internal/admission"
	"github.com/archenet/archenet/transport/internal/connio"
)

// Socket is a UDP socket and the quic-go transport over it.
type Socket struct {
	UDP *net.UDPConn
	Tr  *quicgo.Transport
	// Adm is a listener's budget of connections before their handshake ends
	// (nil for a dialer's socket).
	Adm *admission.Budget
}

// Listen binds the UDP address addr for a listener whose transport refuses
// and retries connections as s's MaxPendingPerAddress, RetryAbove,
// NewConnectionRate and NewConnectionRatePerAddress say (package admission).
func Listen(addr string, s *connio.Settings) (*Socket, error) {
	uaddr, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, err
	}
	udp, err := net.ListenUDP("udp", uaddr)
	if err != nil {
		return nil, err
	}
	adm := admission.New(admission.Limits{PerAddress: s.MaxPendingPerAddress, RetryAbove: s.RetryAbove,
		Rate: s.NewConnectionRate, RatePerAddress: s.NewConnectionRatePerAddress})
	tr := &quicgo.Transport{Conn: udp, ConnContext: adm.ConnContext, VerifySourceAddress: adm.VerifySource}
	return &Socket{UDP: udp, Tr: tr, Adm: adm}, nil
}

// Bind binds the local UDP address laddr for a dialer.
func Bind(laddr *net.UDPAddr) (*Socket, error) {
	udp, err := net.ListenUDP("udp", laddr)
	if err != nil {
		return nil, err
	}
	return &Socket{UDP: udp, Tr: &quicgo.Transport{Conn: udp}}, nil
}

// Close closes the transport (and with it its listeners and connections), then
// the socket. It returns err if that is not nil, else the first error of the
// two (a socket closed already is none).
func (s *Socket) Close(err error) error {
	if e := s.Tr.Close(); err == nil {
		err = e
	}
	if e := s.UDP.Close(); err == nil && !errors.Is(e, net.ErrClosed) {
		err = e
	}
	return err
}

// Serve accepts connections with accept until it fails, and handles each on a
// goroutine of its own; wg counts Serve's goroutine and those.
func Serve(ctx context.Context, wg *sync.WaitGroup, accept func(context.Context) (*quicgo.Conn, error), handle func(*quicgo.Conn)) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			qc, err := accept(ctx)
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				handle(qc)
			}()
		}
	}()
}

// Config is quic-go's configuration of s's connections, streams aside (the
// caller sets them): datagrams on, s's timeouts and keep-alives, and for a
// server, flow-control windows of s.HandshakeWindow that grow only once this
// end sent its Welcome (package admission).
func Config(s *connio.Settings, server bool) *quicgo.Config {
	qc := &quicgo.Config{
		EnableDatagrams:      true,
		HandshakeIdleTimeout: s.HandshakeTimeout,
		MaxIdleTimeout:       s.IdleTimeout,
	}
	if server {
		qc.InitialStreamReceiveWindow = uint64(s.HandshakeWindow)
		qc.InitialConnectionReceiveWindow = uint64(s.HandshakeWindow)
		qc.AllowConnectionWindowIncrease = admission.AllowWindowIncrease
	}
	if s.KeepAlivePeriod > 0 {
		qc.KeepAlivePeriod = s.KeepAlivePeriod
	}
	return qc
}

// ServerTLS returns a copy of c for a listener that negotiates the
// application protocol proto over TLS 1.3, or nil if c holds no server
// certificate.
func ServerTLS(c *tls.Config, proto string) *tls.Config {
	if c == nil || (len(c.Certificates) == 0 && c.GetCertificate == nil && c.GetConfigForClient == nil) {
		return nil
	}
	t := c.Clone()
	t.NextProtos = []string{proto}
	t.MinVersion = tls.VersionTLS13
	return t
}

// ClientTLS returns a copy of c (nil: of the zero configuration, which trusts
// the system roots) that dials serverName (unless c names one) and negotiates
// proto over TLS 1.3.
func ClientTLS(c *tls.Config, proto, serverName string) *tls.Config {
	t := &tls.Config{}
	if c != nil {
		t = c.Clone()
	}
	t.NextProtos = []string{proto}
	t.MinVersion = tls.VersionTLS13
	if t.ServerName == "" {
		t.ServerName = serverName
	}
	return t
}

// DatagramError maps quic-go's error for a datagram of n bytes too large for
// the path to a *transport.DatagramTooLargeError; other errors pass unchanged.
func DatagramError(err error, n int) error {
	if err == nil {
		return nil // (before errors.As, whose target escapes: no allocation per datagram)
	}
	var tl *quicgo.DatagramTooLargeError
	if errors.As(err, &tl) {
		return &transport.DatagramTooLargeError{Size: n, Max: int(tl.MaxDatagramPayloadSize)}
	}
	return err
}

// IsTimeout reports whether err is a deadline or quic-go's handshake or idle
// timeout.
func IsTimeout(err error) bool {
	var hs *quicgo.HandshakeTimeoutError
	var idle *quicgo.IdleTimeoutError
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &hs) || errors.As(err, &idle)
}

// Refused reports whether err is a server's refusal of the QUIC handshake
// (CONNECTION_REFUSED: too many connections from the client's address in the
// handshake there, see admission, or a server that is closing).
func Refused(err error) bool {
	var te *quicgo.TransportError
	return errors.As(err, &te) && te.Remote && te.ErrorCode == quicgo.ConnectionRefused
}

// CloseError is the close error for why a connection ended, err, where the
// transport's own cases did not match: a normal close for nil, a timeout for
// quic-go's handshake or idle timeout, else an internal error prefixed with
// pkg.
func CloseError(err error, pkg string) *transport.CloseError {
	var idle *quicgo.IdleTimeoutError
	var hs *quicgo.HandshakeTimeoutError
	switch {
	case err == nil:
		return &transport.CloseError{Code: transport.CodeNormal}
	case errors.As(err, &idle), errors.As(err, &hs):
		return &transport.CloseError{Code: transport.CodeTimeout, Reason: err.Error()}
	default:
		return &transport.CloseError{Code: transport.CodeInternal, Reason: pkg + ": " + err.Error()}
	}
}
