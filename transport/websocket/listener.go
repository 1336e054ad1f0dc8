//go:build !js

package websocket

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	ws "github.com/coder/websocket"

	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/internal/connio"
	"github.com/archenet/archenet/transport/internal/origin"
	"github.com/archenet/archenet/transport/internal/ratelimit"
)

// Listener accepts archenet connections over WebSockets. It implements
// [transport.Listener] and [http.Handler]: [Listen] makes one that owns its
// TCP socket and HTTP server, [NewListener] one to mount on the game's own
// HTTP server (the page's: the socket then shares its origin).
type Listener struct {
	cfg   Config
	set   connio.Settings
	conns *connio.Accepted[*Conn]

	mu      sync.Mutex
	pending int                          // connections not welcomed
	perAddr map[netip.Addr]int           // of them, by source
	rate    ratelimit.TokenBucket        // new connections, from everywhere
	rates   map[netip.Addr]*sourceBucket // new connections, by source
	refused RefusedStats

	srv *http.Server // Listen's (nil for NewListener)
	ln  net.Listener
	tls bool
	wg  sync.WaitGroup
}

// sourceBucket is one source's connection rate and when it was last used.
type sourceBucket struct {
	b    ratelimit.TokenBucket
	used time.Time
}

// RefusedStats counts the requests a Listener refused before the upgrade, by
// reason, and the most connections it held not welcomed at once.
type RefusedStats struct {
	Origin, Busy, PerAddress, Rate, RatePerAddress, NotWebSocket uint64
	// PendingMax is the most connections not welcomed at once.
	PendingMax int
}

var (
	_ transport.Listener = (*Listener)(nil)
	_ http.Handler       = (*Listener)(nil)
)

// Listen serves WebSocket sessions at ws://addr[Config].Path (wss:// with
// Config.TLS) on the TCP address addr (e.g. "127.0.0.1:0"); other paths are
// answered 404.
func Listen(addr string, cfg *Config) (*Listener, error) {
	l, err := NewListener(cfg)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle(l.cfg.Path, l)
	l.srv = &http.Server{Handler: mux, ReadHeaderTimeout: l.set.HandshakeTimeout, MaxHeaderBytes: 8 << 10,
		ErrorLog: nil}
	l.ln = ln
	if l.cfg.TLS != nil {
		tc := l.cfg.TLS.Clone()
		tc.NextProtos = []string{"http/1.1"}
		ln = tls.NewListener(ln, tc)
		l.tls = true
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		_ = l.srv.Serve(ln)
	}()
	return l, nil
}

// NewListener returns a Listener to mount on an HTTP server of the caller's
// (http.Handle("/archenet.ws", l)); Config.Path is not used. Closing it
// closes its connections and makes it refuse new ones; the HTTP server stays
// the caller's.
func NewListener(cfg *Config) (*Listener, error) {
	r, set, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	l := &Listener{cfg: r, set: set, perAddr: map[netip.Addr]int{}, rates: map[netip.Addr]*sourceBucket{},
		rate: ratelimit.New(set.NewConnectionRate, max(set.NewConnectionRate, 1), time.Now())}
	l.conns = connio.NewAccepted(set.AcceptBacklog, "websocket", func(c *Conn, code transport.CloseCode, reason string) {
		c.core.Violation(code, reason)
	})
	return l, nil
}

// sourceOf is the key of a request's source: its IPv4 address, or the /64
// of its IPv6 one.
func sourceOf(remote string) netip.Addr {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		return netip.Addr{}
	}
	a := ap.Addr().Unmap()
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.Addr()
	}
	return a
}

// admit takes a pending slot for a request from src, or says why not.
func (l *Listener) admit(src netip.Addr, now time.Time) (int, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.set.NewConnectionRate > 0 && !l.rate.Allow(now) {
		l.refused.Rate++
		return http.StatusServiceUnavailable, fmt.Sprintf("server busy: more than %d new connections a second", l.set.NewConnectionRate)
	}
	if l.set.NewConnectionRatePerAddress > 0 {
		b := l.rates[src]
		if b == nil {
			if len(l.rates) >= 4096 {
				for a, sb := range l.rates { // (sources idle for 10 s have a full bucket again)
					if now.Sub(sb.used) > 10*time.Second {
						delete(l.rates, a)
					}
				}
			}
			r := l.set.NewConnectionRatePerAddress
			b = &sourceBucket{b: ratelimit.New(r, 2*r, now)}
			l.rates[src] = b
		}
		b.used = now
		if !b.b.Allow(now) {
			l.refused.RatePerAddress++
			return http.StatusServiceUnavailable, fmt.Sprintf("too many new connections from %v: more than %d a second", src, l.set.NewConnectionRatePerAddress)
		}
	}
	if l.pending >= l.cfg.MaxPendingSessions {
		l.refused.Busy++
		return http.StatusServiceUnavailable, fmt.Sprintf("server busy: %d connections not yet welcomed", l.pending)
	}
	if m := l.set.MaxPendingPerAddress; m > 0 && l.perAddr[src] >= m {
		l.refused.PerAddress++
		return http.StatusServiceUnavailable, fmt.Sprintf("too many connections from %v not yet welcomed (%d)", src, m)
	}
	l.pending++
	l.perAddr[src]++
	l.refused.PendingMax = max(l.refused.PendingMax, l.pending)
	return 0, ""
}

// release gives src's pending slot back.
func (l *Listener) release(src netip.Addr) {
	l.mu.Lock()
	l.pending--
	if l.perAddr[src]--; l.perAddr[src] <= 0 {
		delete(l.perAddr, src)
	}
	l.mu.Unlock()
}

// ServeHTTP upgrades a WebSocket request to a connection, which appears in
// Accept. Refusals, before the upgrade: 403 for an origin the policy does not
// allow, 503 past the pending or rate limits or after Close, 400 for a
// request that is not a WebSocket upgrade.
func (l *Listener) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	refuse := func(status int, why string) {
		l.set.Logger.Log(context.Background(), slog.LevelWarn, "archenet/websocket: connection refused", "remote", r.RemoteAddr, "origin", r.Header.Get("Origin"), "status", status, "reason", why)
		http.Error(w, why, status)
	}
	if status, why := origin.Check(r, l.conns.Closed(), l.cfg.AllowedOrigins, l.cfg.CheckOrigin); status != 0 {
		if status == http.StatusForbidden {
			l.mu.Lock()
			l.refused.Origin++
			l.mu.Unlock()
		}
		refuse(status, why)
		return
	}
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		l.mu.Lock()
		l.refused.NotWebSocket++
		l.mu.Unlock()
		refuse(http.StatusBadRequest, "not a WebSocket upgrade")
		return
	}
	src := sourceOf(r.RemoteAddr)
	if status, why := l.admit(src, time.Now()); status != 0 {
		refuse(status, why)
		return
	}
	c, err := ws.Accept(w, r, &ws.AcceptOptions{InsecureSkipVerify: true, CompressionMode: ws.CompressionDisabled}) // (the origin is checked above)
	if err != nil {
		l.release(src)
		l.set.Logger.Log(context.Background(), slog.LevelWarn, "archenet/websocket: upgrade failed", "remote", r.RemoteAddr, "err", err)
		return
	}
	var once sync.Once
	give := func() { once.Do(func() { l.release(src) }) }
	local := addr{"websocket", r.Host}
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		local = addr{"websocket", a.String()}
	}
	remote := addr{"websocket", r.RemoteAddr}
	if !l.conns.Add(func() *Conn {
		return newConn(nativeSocket{c}, &l.set, true, local, remote, give, func(k *Conn) { give(); l.conns.Forget(k) })
	}) {
		give()
		_ = c.Close(ws.StatusCode(closeStatusBase+int(transport.CodeNormal)), "listener closed")
	}
}

// Accept implements [transport.Listener].
func (l *Listener) Accept(ctx context.Context) (transport.Conn, error) { return l.conns.Accept(ctx) }

// PollAccept implements [transport.Listener].
func (l *Listener) PollAccept() (transport.Conn, bool) { return l.conns.PollAccept() }

// Close implements [transport.Listener]: it stops accepting, closes every
// connection it produced with CodeNormal and, for a Listener made by Listen,
// its HTTP server and TCP socket.
func (l *Listener) Close() error {
	if !l.conns.Close() {
		return nil
	}
	var err error
	if l.srv != nil {
		err = l.srv.Close()
		l.wg.Wait()
	}
	l.conns.CloseAll("listener closed")
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// Refused returns the requests refused before the upgrade, by reason.
func (l *Listener) Refused() RefusedStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.refused
}

// Addr implements [transport.Listener]: the bound TCP address (nil for a
// Listener made by NewListener).
func (l *Listener) Addr() net.Addr {
	if l.ln == nil {
		return nil
	}
	return l.ln.Addr()
}

// URL returns the session URL for a page loaded from host (an HTTP Host,
// "name" or "name:port"): ws://name:port/path (wss:// with TLS). With an
// empty host it uses the listener's own IP. For a Listener made by
// NewListener it returns "".
func (l *Listener) URL(host string) string {
	a, ok := l.Addr().(*net.TCPAddr)
	if !ok {
		return ""
	}
	scheme := "ws"
	if l.tls {
		scheme = "wss"
	}
	return origin.SessionURL(scheme, host, a.IP, a.Port, l.cfg.Path)
}
