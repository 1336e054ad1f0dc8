//go:build !js

package webtransport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/quic-go/quic-go/http3"
	wt "github.com/quic-go/webtransport-go"

	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/internal/frame"
	"github.com/archenet/archenet/transport/internal/quicnet"
)

// Dial opens a WebTransport session to rawURL (https://host:port/path) from a native
// program, as a browser would: for bots, tools and tests that join a server browsers
// play on. With cfg.CertHashes it accepts the server certificate by hash, under the
// browser's rules (ECDSA, valid now, for at most 14 days); else it verifies it against
// cfg.TLS's roots. It returns once the session is established and the message stream is
// open, within cfg.HandshakeTimeout and ctx; the archenet handshake comes next (pass
// the Conn to replication.NewClient). Closing the Conn releases its UDP socket.
//
// Errors name the URL and the phase that failed; a certificate that is not pinned
// matches [ErrCertNotPinned], a timeout context.DeadlineExceeded.
func Dial(ctx context.Context, rawURL string, cfg *Config) (*Conn, error) {
	return DialWithHeader(ctx, rawURL, cfg, nil)
}

// DialWithHeader is Dial sending extra request headers with the session request (e.g.
// the Origin a browser would send, for tests of an origin policy).
func DialWithHeader(ctx context.Context, rawURL string, cfg *Config, header http.Header) (*Conn, error) {
	r, set, u, err := resolveDial(cfg, rawURL)
	if err != nil {
		return nil, err
	}
	fail := func(phase string, err error) (*Conn, error) {
		if quicnet.IsTimeout(err) && !errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w: %w", context.DeadlineExceeded, err)
		}
		return nil, fmt.Errorf("webtransport: dial %s: %s: %w", rawURL, phase, err)
	}
	raddr, err := net.ResolveUDPAddr("udp", u.Host)
	if err != nil {
		return fail("resolving the address", err)
	}
	laddr := &net.UDPAddr{}
	if raddr.IP.IsLoopback() {
		laddr.IP = raddr.IP
	}
	sock, err := quicnet.Bind(laddr)
	if err != nil {
		return fail("binding a local UDP socket", err)
	}
	release := func() { _ = sock.Close(nil) }
	ctx, cancel := context.WithTimeout(ctx, set.HandshakeTimeout)
	defer cancel()
	// The QUIC connection is ours (not the wt.Transport's, which would close it the
	// moment the session ends, before the close capsule is out): Conn closes it after
	// closeLinger.
	qc, err := sock.Tr.DialEarly(ctx, raddr, r.clientTLS(u.Hostname()), quicConfig(&set, false))
	if err != nil {
		release()
		if quicnet.Refused(err) {
			return fail("QUIC handshake refused by the server (too many connections from this address are in the handshake there, "+
				"see webtransport.Config.MaxPendingPerAddress; or new connections come too fast, from this address or from all, "+
				"see NewConnectionRatePerAddress and NewConnectionRate: try again in a moment; or it is closing)", err)
		}
		return fail("QUIC handshake", err)
	}
	abort := func(phase string, err error) (*Conn, error) {
		qc.CloseWithError(0, "")
		release()
		return fail(phase, err)
	}
	cc, err := (&wt.Transport{}).NewClientConn(qc)
	if err != nil {
		return abort("HTTP/3 setup", err)
	}
	rsp, sess, err := cc.Dial(ctx, rawURL, header)
	if err != nil {
		if rsp != nil {
			return abort("session request", fmt.Errorf("%s: %w", rsp.Status, err))
		}
		return abort("session request", err)
	}
	stream, err := sess.OpenStreamSync(ctx)
	if err == nil {
		_, err = stream.Write([]byte{frame.Preamble})
	}
	if err != nil {
		_ = sess.CloseWithError(wt.SessionErrorCode(transport.CodeProtocolError), "opening the message stream: "+err.Error())
		return abort("opening the message stream", err)
	}
	return newConn(session{sess: sess, stream: stream, qc: qc, ownsQC: true}, &set, func(*Conn) {
		time.AfterFunc(closeLinger+50*time.Millisecond, release)
	}), nil
}

// clientTLS is the TLS configuration of a native Dial to host.
func (c *Config) clientTLS(host string) *tls.Config {
	t := quicnet.ClientTLS(c.TLS, http3.NextProtoH3, host)
	if len(c.CertHashes) > 0 {
		// Pinned by hash as a browser does: no chain to verify, the hash is the check.
		t.InsecureSkipVerify = true
		t.VerifyConnection = verifyPinned(c.CertHashes, time.Now)
	}
	return t
}
