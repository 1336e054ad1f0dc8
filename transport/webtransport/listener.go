//go:build !js

package webtransport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	quicgo "github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	wt "github.com/quic-go/webtransport-go"

	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/internal/queue"
)

// Listener accepts archenet connections from WebTransport sessions. It implements
// [transport.Listener] and [http.Handler]: [Listen] makes one that owns its UDP socket
// and HTTP/3 server, [NewListener] one to mount on an HTTP/3 server of the caller's.
type Listener struct {
	cfg     Config
	wts     *wt.Server
	udp     net.PacketConn // nil unless Listen made it
	pending *queue.Queue[*Conn]
	slots   chan struct{} // one token per session being set up
	setups  sync.WaitGroup
	serving sync.WaitGroup
	closed  chan struct{}

	mu       sync.Mutex
	conns    map[*Conn]struct{}
	isClosed bool
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
// The QUIC connection's flow-control windows start small (64 KiB per stream, 128 KiB per
// connection) and grow only as the application reads, and at most 8 streams of each kind
// may be open, so a peer that has not completed the handshake holds little memory.
func Listen(addr string, cfg *Config) (*Listener, error) {
	r, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	if r.TLS == nil || (len(r.TLS.Certificates) == 0 && r.TLS.GetCertificate == nil && r.TLS.GetConfigForClient == nil) {
		return nil, errors.New("webtransport: Listen needs Config.TLS with a server certificate (see NewSelfSigned)")
	}
	tlsConf := r.TLS.Clone()
	tlsConf.NextProtos = []string{http3.NextProtoH3}
	tlsConf.MinVersion = tls.VersionTLS13
	uaddr, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, err
	}
	udp, err := net.ListenUDP("udp", uaddr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	h3 := &http3.Server{
		TLSConfig:      tlsConf,
		QUICConfig:     r.quicConfig(true),
		Handler:        mux,
		MaxHeaderBytes: 8 << 10,
		IdleTimeout:    r.IdleTimeout,
	}
	l := newListener(&wt.Server{H3: h3, ReorderingTimeout: r.HandshakeTimeout}, r)
	l.udp = udp
	mux.Handle(r.Path, l)
	l.serving.Add(1)
	go func() {
		defer l.serving.Done()
		_ = l.wts.Serve(udp)
	}()
	return l, nil
}

// NewListener returns a Listener to mount as the http.Handler of a path on s's HTTP/3
// server (s.H3.Handler), for a server that also serves other requests on its UDP port.
// It must be called before s serves anything: it sets s.CheckOrigin (if nil) to
// cfg's origin policy and adds a ConnContext hook to s.H3. s.H3.QUICConfig should
// bound flow-control windows and streams as Listen does ([Config] documents what
// Listen sets). Closing the Listener closes its connections and makes it refuse new
// sessions; serving and closing s stays with the caller. cfg.Path is not used.
func NewListener(s *wt.Server, cfg *Config) (*Listener, error) {
	r, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	if s == nil || s.H3 == nil {
		return nil, errors.New("webtransport: NewListener needs a webtransport.Server with H3 set")
	}
	return newListener(s, r), nil
}

func newListener(s *wt.Server, r Config) *Listener {
	l := &Listener{
		cfg: r, wts: s,
		pending: queue.New[*Conn](r.AcceptBacklog, 0, nil),
		slots:   make(chan struct{}, r.MaxPendingSessions),
		closed:  make(chan struct{}),
		conns:   make(map[*Conn]struct{}),
	}
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
// anything: small initial windows that grow only as the application reads, and few
// streams (HTTP/3 needs three unidirectional ones and a request stream; archenet one
// bidirectional stream per session).
func (c *Config) quicConfig(server bool) *quicgo.Config {
	qc := &quicgo.Config{
		EnableDatagrams:                  true,
		EnableStreamResetPartialDelivery: true,
		HandshakeIdleTimeout:             c.HandshakeTimeout,
		MaxIdleTimeout:                   c.IdleTimeout,
		InitialStreamReceiveWindow:       64 << 10,
		InitialConnectionReceiveWindow:   128 << 10,
		MaxStreamReceiveWindow:           uint64(max(c.MaxMessageSize+16, 1<<20)),
		MaxConnectionReceiveWindow:       uint64(max(c.MaxMessageSize+16, 1<<20)) + 1<<20,
	}
	if server {
		qc.MaxIncomingStreams = 8
		qc.MaxIncomingUniStreams = 8
	}
	if c.KeepAlivePeriod > 0 {
		qc.KeepAlivePeriod = c.KeepAlivePeriod
	}
	return qc
}

// originAllowed is the origin policy: Config.CheckOrigin if set; else no Origin header
// (a native client), the same host and port as the request, or one of
// Config.AllowedOrigins.
func (l *Listener) originAllowed(r *http.Request) bool {
	if l.cfg.CheckOrigin != nil {
		return l.cfg.CheckOrigin(r)
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	if u, err := url.Parse(origin); err == nil && strings.EqualFold(u.Host, r.Host) {
		return true
	}
	for _, a := range l.cfg.AllowedOrigins {
		if a == "*" || strings.EqualFold(strings.TrimSuffix(a, "/"), origin) {
			return true
		}
	}
	return false
}

// ServeHTTP upgrades a WebTransport session request (an extended CONNECT) and sets the
// session up in the background; the connection appears in Accept once the client has
// opened its message stream. Refusals: 403 for an origin the policy does not allow,
// 503 past Config.MaxPendingSessions sessions being set up or after Close, 400 for a
// request that is not a WebTransport session.
func (l *Listener) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	refuse := func(status int, why string) {
		l.cfg.Logger.Warn("archenet/webtransport: session refused", "remote", r.RemoteAddr, "origin", r.Header.Get("Origin"), "status", status, "reason", why)
		http.Error(w, why, status)
	}
	select {
	case <-l.closed:
		refuse(http.StatusServiceUnavailable, "listener closed")
		return
	default:
	}
	if !l.originAllowed(r) {
		refuse(http.StatusForbidden, fmt.Sprintf("origin %q not allowed", r.Header.Get("Origin")))
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
	qc, _ := r.Context().Value(connKey{}).(*quicgo.Conn)
	if qc == nil { // NewListener after the server started serving
		<-l.slots
		sess.CloseWithError(wt.SessionErrorCode(transport.CodeInternal), "listener mounted on a server that was already serving")
		return
	}
	l.setups.Add(1)
	go func() {
		defer l.setups.Done()
		defer func() { <-l.slots }()
		l.setup(sess, qc)
	}()
}

// setup waits for the message stream and its preamble, within HandshakeTimeout.
func (l *Listener) setup(sess *wt.Session, qc *quicgo.Conn) {
	ctx, cancel := context.WithTimeout(sess.Context(), l.cfg.HandshakeTimeout)
	defer cancel()
	fail := func(code transport.CloseCode, reason string) {
		l.cfg.Logger.Warn("archenet/webtransport: session refused before the handshake", "remote", sess.RemoteAddr(), "code", code, "reason", reason)
		sess.CloseWithError(wt.SessionErrorCode(code), reason)
		time.AfterFunc(closeLinger, func() { qc.CloseWithError(0, "") })
	}
	stream, err := sess.AcceptStream(ctx)
	if err != nil {
		fail(transport.CodeTimeout, "message stream not opened in time")
		return
	}
	_ = stream.SetReadDeadline(time.Now().Add(l.cfg.HandshakeTimeout))
	var pre [1]byte
	if _, err := io.ReadFull(stream, pre[:]); err != nil {
		fail(transport.CodeProtocolError, "message stream preamble missing")
		return
	}
	if pre[0] != streamPreamble {
		fail(transport.CodeProtocolError, fmt.Sprintf("bad message stream preamble %#x", pre[0]))
		return
	}
	_ = stream.SetReadDeadline(time.Time{})

	l.mu.Lock()
	if l.isClosed {
		l.mu.Unlock()
		fail(transport.CodeNormal, "listener closed")
		return
	}
	c := newConn(sess, stream, qc, l.cfg, l.forget)
	l.conns[c] = struct{}{}
	l.mu.Unlock()
	if !l.pending.TryPush(c) {
		c.logClose(transport.CodeRejected, "server busy: accept backlog full")
		c.closeNoWait(transport.CodeRejected, "server busy: accept backlog full")
	}
}

func (l *Listener) forget(c *Conn) {
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
}

// Accept implements [transport.Listener].
func (l *Listener) Accept(ctx context.Context) (transport.Conn, error) {
	c, ok, err := l.pending.Wait(ctx, l.closed)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("webtransport: listener: %w", transport.ErrClosed)
	}
	return c, nil
}

// PollAccept implements [transport.Listener].
func (l *Listener) PollAccept() (transport.Conn, bool) {
	c, ok := l.pending.Pop()
	if !ok {
		return nil, false
	}
	return c, true
}

// Close implements [transport.Listener]: it stops accepting, closes every connection it
// produced with CodeNormal and, for a Listener made by Listen, its HTTP/3 server and UDP
// socket. It returns once the Listener's goroutines have exited.
func (l *Listener) Close() error {
	l.mu.Lock()
	if l.isClosed {
		l.mu.Unlock()
		return nil
	}
	l.isClosed = true
	l.mu.Unlock()
	close(l.closed)
	l.setups.Wait()

	l.mu.Lock()
	conns := make([]*Conn, 0, len(l.conns))
	for c := range l.conns {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	for _, c := range conns {
		_ = c.CloseWithReason(transport.CodeNormal, "listener closed")
	}
	l.pending.Drain()
	var err error
	if l.udp != nil {
		time.Sleep(20 * time.Millisecond) // let the close capsules leave before the socket goes
		err = l.wts.Close()
		l.serving.Wait()
		if e := l.udp.Close(); err == nil && !errors.Is(e, net.ErrClosed) {
			err = e
		}
	}
	return err
}

// Addr implements [transport.Listener]: the bound UDP address (nil for a Listener made
// by NewListener, which has no socket of its own).
func (l *Listener) Addr() net.Addr {
	if l.udp == nil {
		return nil
	}
	return l.udp.LocalAddr()
}

// URL returns the session URL for a page that was loaded from host (an HTTP Host,
// "name" or "name:port"): https://name:udpport/path. With an empty host it uses the
// listener's own IP. For a Listener made by NewListener it returns "".
func (l *Listener) URL(host string) string {
	a, ok := l.Addr().(*net.UDPAddr)
	if !ok {
		return ""
	}
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	if name == "" {
		name = a.IP.String()
	}
	return (&url.URL{Scheme: "https", Host: net.JoinHostPort(strings.Trim(name, "[]"), strconv.Itoa(a.Port)), Path: l.cfg.Path}).String()
}
