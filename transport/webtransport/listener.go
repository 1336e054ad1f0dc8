//go:build !js

package webtransport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	quicgo "github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	wt "github.com/quic-go/webtransport-go"

	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/internal/connio"
	"github.com/archenet/archenet/transport/internal/frame"
	"github.com/archenet/archenet/transport/internal/origin"
	"github.com/archenet/archenet/transport/internal/quicnet"
)

// Listener accepts archenet connections from WebTransport sessions. It implements
// [transport.Listener] and [http.Handler]: [Listen] makes one that owns its UDP socket
// and HTTP/3 server, [NewListener] one to mount on an HTTP/3 server of the caller's.
type Listener struct {
	cfg   Config          // for its own settings (origins, path)
	set   connio.Settings // the settings every transport has
	wts   *wt.Server
	sock  *quicnet.Socket // Listen's (with its pre-handshake budget), nil for NewListener
	ql    *quicgo.EarlyListener
	conns *connio.Accepted[*Conn]
	slots chan struct{} // one token per session being set up
	// capsuleClose: the server's sessions have no WebTransport flow control, so
	// one session per QUIC connection and nothing but the close writes to the
	// CONNECT stream (see closeSession).
	capsuleClose bool
	setups       sync.WaitGroup
	serving      sync.WaitGroup
	ctx          context.Context // cancelled by Close
	cancel       context.CancelFunc
}

var (
	_ transport.Listener = (*Listener)(nil)
	_ http.Handler       = (*Listener)(nil)
)

// connKey is the context key under which the Listener's HTTP/3 server stores each
// request's QUIC connection.
type connKey struct{}

// Listen listens for WebTransport sessions at https://addr[Config].Path on the UDP
// address addr (e.g. "127.0.0.1:0"). cfg.TLS must hold a certificate (for browsers
// without a CA-signed one: [SelfSigned]). A connection appears in Accept once its
// session is established and the client opened the message stream, within
// cfg.HandshakeTimeout; the archenet handshake is up to the caller (replication.Server
// runs it).
//
// Until this end sends a transport.Welcome a connection holds little: its QUIC
// flow-control windows stay at Config.HandshakeWindow, at most 8 streams of each kind
// may be open, at most Config.MaxPendingPerAddress such connections come from one
// address (more are refused at their first packet, before any TLS work), above
// Config.RetryAbove of them new ones must pass a QUIC Retry, and it queues at most 16
// datagrams ([Listener.Admission] counts them).
func Listen(addr string, cfg *Config) (*Listener, error) {
	r, set, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	tlsConf := quicnet.ServerTLS(r.TLS, http3.NextProtoH3)
	if tlsConf == nil {
		return nil, errors.New("webtransport: Listen needs Config.TLS with a server certificate (see NewSelfSigned)")
	}
	if err := set.CheckListen(); err != nil {
		return nil, err
	}
	sock, err := quicnet.Listen(addr, &set)
	if err != nil {
		return nil, err
	}
	ql, err := sock.Tr.ListenEarly(tlsConf, quicConfig(&set, true))
	if err != nil {
		_ = sock.Close(nil)
		return nil, err
	}
	mux := http.NewServeMux()
	h3 := &http3.Server{
		TLSConfig:      tlsConf,
		Handler:        mux,
		MaxHeaderBytes: 8 << 10,
		IdleTimeout:    set.IdleTimeout,
	}
	l := newListener(&wt.Server{H3: h3, ReorderingTimeout: set.HandshakeTimeout}, r, set)
	l.sock, l.ql = sock, ql
	mux.Handle(r.Path, l)
	// Hand each QUIC connection to the HTTP/3 server.
	quicnet.Serve(l.ctx, &l.serving, ql.Accept, func(qc *quicgo.Conn) { _ = l.wts.ServeQUICConn(qc) })
	return l, nil
}

// NewListener returns a Listener to mount as the http.Handler of a path on s's HTTP/3
// server (s.H3.Handler), for a server that also serves other requests on its UDP port.
// It must be called before s serves anything: it sets s.CheckOrigin (if nil) to
// cfg's origin policy and adds a ConnContext hook to s.H3. The QUIC transport is the
// caller's, so the pre-handshake bounds Listen sets there (HandshakeWindow,
// MaxPendingPerAddress, RetryAbove) are the caller's to set too; MaxPendingSessions,
// HandshakeTimeout and the origin policy apply. With WebTransport flow control on
// (s.Config), several sessions may share a QUIC connection: a session's close then
// leaves the connection open, and Chromium shows the page "Connection lost" rather
// than the close code. Closing the Listener closes its connections and makes it refuse
// new sessions; serving and closing s stays with the caller. cfg.Path is not used.
func NewListener(s *wt.Server, cfg *Config) (*Listener, error) {
	r, set, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	if s == nil || s.H3 == nil {
		return nil, errors.New("webtransport: NewListener needs a webtransport.Server with H3 set")
	}
	return newListener(s, r, set), nil
}

func newListener(s *wt.Server, r Config, set connio.Settings) *Listener {
	l := &Listener{
		cfg: r, set: set, wts: s,
		conns: connio.NewAccepted(set.AcceptBacklog, "webtransport", func(c *Conn, code transport.CloseCode, reason string) {
			c.core.Violation(code, reason)
		}),
		slots:        make(chan struct{}, r.MaxPendingSessions),
		capsuleClose: s.Config == nil || s.Config.MaxIncomingStreams <= 0 && s.Config.MaxIncomingUniStreams <= 0 && s.Config.MaxIncomingData <= 0,
	}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	if s.CheckOrigin == nil {
		s.CheckOrigin = l.originAllowed
	}
	prev := s.H3.ConnContext
	s.H3.ConnContext = func(ctx context.Context, c *quicgo.Conn) context.Context {
		if prev != nil {
			ctx = prev(ctx, c)
		}
		return context.WithValue(ctx, connKey{}, c)
	}
	return l
}

// quicConfig bounds what a peer can make the server hold before it has proven
// anything: handshake-sized windows that grow only once this end sent its Welcome, and
// few streams (HTTP/3 needs three unidirectional ones and a request stream; archenet
// one bidirectional stream per session).
func quicConfig(s *connio.Settings, server bool) *quicgo.Config {
	qc := quicnet.Config(s, server)
	qc.EnableStreamResetPartialDelivery = true
	qc.MaxStreamReceiveWindow = uint64(max(s.MaxMessageSize+16, 1<<20))
	qc.MaxConnectionReceiveWindow = qc.MaxStreamReceiveWindow + 1<<20
	if server {
		qc.MaxIncomingStreams = 8
		qc.MaxIncomingUniStreams = 8
	} else {
		// Small windows that grow as the application reads (quic-go's auto-tuning).
		qc.InitialStreamReceiveWindow = 64 << 10
		qc.InitialConnectionReceiveWindow = 128 << 10
	}
	return qc
}

// originAllowed is the origin policy: Config.CheckOrigin if set; else no Origin header
// (a native client), the same host and port as the request, or one of
// Config.AllowedOrigins.
func (l *Listener) originAllowed(r *http.Request) bool {
	return origin.Allowed(r, l.cfg.AllowedOrigins, l.cfg.CheckOrigin)
}

// ServeHTTP upgrades a WebTransport session request (an extended CONNECT) and sets the
// session up in the background; the connection appears in Accept once the client has
// opened its message stream. Refusals: 403 for an origin the policy does not allow,
// 503 past Config.MaxPendingSessions sessions being set up or after Close, 400 for a
// request that is not a WebTransport session.
func (l *Listener) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	refuse := func(status int, why string) {
		l.set.Logger.Log(context.Background(), slog.LevelWarn, "archenet/webtransport: session refused", "remote", r.RemoteAddr, "origin", r.Header.Get("Origin"), "status", status, "reason", why)
		http.Error(w, why, status)
	}
	if status, why := origin.Check(r, l.conns.Closed(), l.cfg.AllowedOrigins, l.cfg.CheckOrigin); status != 0 {
		refuse(status, why)
		return
	}
	select {
	case l.slots <- struct{}{}:
	default:
		refuse(http.StatusServiceUnavailable, fmt.Sprintf("server busy: %d sessions being set up", cap(l.slots)))
		return
	}
	sess, err := l.wts.Upgrade(w, r)
	if err != nil {
		<-l.slots
		refuse(http.StatusBadRequest, "webtransport upgrade: "+err.Error())
		return
	}
	s := session{sess: sess, server: true, ownsQC: l.capsuleClose}
	if l.capsuleClose {
		s.connect = w.(http3.HTTPStreamer).HTTPStream() // (Upgrade took it over already)
	}
	s.qc, _ = r.Context().Value(connKey{}).(*quicgo.Conn)
	if s.qc == nil { // NewListener after the server started serving
		<-l.slots
		_ = sess.CloseWithError(wt.SessionErrorCode(transport.CodeInternal), "listener mounted on a server that was already serving")
		return
	}
	l.setups.Add(1)
	go func() {
		defer l.setups.Done()
		defer func() { <-l.slots }()
		l.setup(s)
	}()
}

// setup waits for the message stream and its preamble, within HandshakeTimeout (or
// until Close).
func (l *Listener) setup(s session) {
	sess := s.sess
	ctx, cancel := context.WithTimeout(l.ctx, l.set.HandshakeTimeout)
	defer cancel()
	defer context.AfterFunc(sess.Context(), cancel)()
	fail := func(code transport.CloseCode, reason string) {
		l.set.Logger.Log(context.Background(), slog.LevelWarn, "archenet/webtransport: session refused before the handshake", "remote", sess.RemoteAddr(), "code", code, "reason", reason)
		closeSession(sess, s.connect, code, reason)
		if s.ownsQC {
			qc := s.qc
			time.AfterFunc(closeLinger, func() { _ = qc.CloseWithError(0, "") })
		}
	}
	stream, fe := frame.Accept(ctx, sess.AcceptStream, l.set.HandshakeTimeout)
	if fe != nil {
		fail(fe.Code, fe.Reason)
		return
	}
	s.stream = stream
	if !l.conns.Add(func() *Conn { return newConn(s, &l.set, l.conns.Forget) }) {
		fail(transport.CodeNormal, "listener closed")
	}
}

// Accept implements [transport.Listener].
func (l *Listener) Accept(ctx context.Context) (transport.Conn, error) { return l.conns.Accept(ctx) }

// PollAccept implements [transport.Listener].
func (l *Listener) PollAccept() (transport.Conn, bool) { return l.conns.PollAccept() }

// Close implements [transport.Listener]: it stops accepting, closes every connection it
// produced with CodeNormal (at once, each waiting at most about half a second for its
// peer) and, for a Listener made by Listen, its QUIC transport and UDP socket. It
// returns once the Listener's goroutines have exited.
func (l *Listener) Close() error {
	if !l.conns.Close() {
		return nil
	}
	l.cancel()
	l.setups.Wait()
	l.conns.CloseAll("listener closed")
	if l.sock == nil {
		return nil
	}
	err := l.wts.Close()
	if e := l.ql.Close(); err == nil {
		err = e
	}
	err = l.sock.Close(err)
	l.serving.Wait()
	return err
}

// AdmissionStats are a Listen listener's counts of connections before their handshake
// ends.
type AdmissionStats struct {
	// Pending is the number of connections this end has not sent a Welcome yet.
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

// Admission returns the listener's pre-handshake counts (zero for a Listener made by
// NewListener, whose QUIC transport is the caller's).
func (l *Listener) Admission() AdmissionStats {
	if l.sock == nil {
		return AdmissionStats{}
	}
	return AdmissionStats(l.sock.Adm.Stats())
}

// Addr implements [transport.Listener]: the bound UDP address (nil for a Listener made
// by NewListener, which has no socket of its own).
func (l *Listener) Addr() net.Addr {
	if l.sock == nil {
		return nil
	}
	return l.sock.UDP.LocalAddr()
}

// URL returns the session URL for a page that was loaded from host (an HTTP Host,
// "name" or "name:port"): https://name:udpport/path. With an empty host it uses the
// listener's own IP. For a Listener made by NewListener it returns "".
func (l *Listener) URL(host string) string {
	a, ok := l.Addr().(*net.UDPAddr)
	if !ok {
		return ""
	}
	return origin.SessionURL("https", host, a.IP, a.Port, l.cfg.Path)
}
