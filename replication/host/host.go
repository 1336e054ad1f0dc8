package host

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/archenet/archenet/replication/internal/closing"
	"github.com/archenet/archenet/transport"
)

// Errors of [Host.Open].
var (
	ErrExists   = errors.New("host: a match of that name is open")
	ErrDraining = errors.New("host: draining: no new matches")
	ErrClosed   = errors.New("host: closed")
	ErrFull     = errors.New("host: MaxMatches matches are open")
)

// Host runs many matches in one process behind one listener: it reads each
// new connection's Hello off every match's tick, routes the connection by
// it (a connect token, or a match name) to that match's server, runs every
// match on its own goroutine, and drains. Its methods are safe for
// concurrent use.
type Host struct {
	cfg Config
	l   transport.Listener

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	matches map[string]*Match
	state   hostState
	drain   atomic.Pointer[drainInfo]
	done    chan struct{}
	isDone  bool

	// heartbeat is when the host's loop (janitor) last ran, unix ns.
	heartbeat atomic.Int64
	// handshakes counts connections whose Hello the host waits for.
	handshakes atomic.Int32
	pending    []pendingHello // Manual mode: those connections
	closer     closing.Closer
	lingering  closing.Lingering
	stats      counters
}

type hostState uint8

const (
	admitting hostState = iota
	draining
	closed
)

// drainInfo is a drain's reason and deadline (zero: none).
type drainInfo struct {
	reason   string
	deadline time.Time
	refusal  *transport.CloseError
}

// pendingHello is a connection whose Hello the host waits for (Manual).
type pendingHello struct {
	conn  transport.Conn
	since time.Time
}

// New returns a host accepting on l (QUIC, or several listeners merged
// into one); it admits clients at once. An invalid Config is an error.
// Unless cfg.Manual, it starts accepting on a goroutine of its own.
func New(l transport.Listener, cfg Config) (*Host, error) {
	cfg, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	h := &Host{cfg: cfg, l: l, matches: map[string]*Match{}, done: make(chan struct{})}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	h.heartbeat.Store(time.Now().UnixNano())
	if !cfg.Manual {
		h.wg.Add(2)
		go h.acceptLoop()
		go h.janitor()
	}
	return h, nil
}

// Open creates the match name with cfg.Start and starts running it (on a
// goroutine of its own unless Config.Manual); connections routed to name go
// to it from then on. It fails if a match of that name is open, the host is
// draining or closed, MaxMatches are open, the config is invalid, or Start
// fails.
func (h *Host) Open(name string, cfg MatchConfig) (*Match, error) {
	if err := checkName(name, false); err != nil {
		return nil, fmt.Errorf("host: Open: %w", err)
	}
	cfg, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	if err := h.reserve(name); err != nil {
		return nil, err
	}
	m := newMatch(h, name, cfg)
	game, err := m.start()
	if err != nil {
		h.unreserve(name)
		return nil, fmt.Errorf("starting match %q: %w", name, err)
	}
	m.game, m.srv = game, game.Replication()
	h.mu.Lock()
	h.matches[name] = m
	h.mu.Unlock()
	h.stats.opened.Add(1)
	h.cfg.Logger.Info("archenet/host: match open", "match", name)
	if fn := h.cfg.OnMatch; fn != nil {
		fn(MatchEvent{Match: name, Opened: true})
	}
	if !h.cfg.Manual {
		go m.run() // (not in h.wg: Close waits for a match's end, not for a stalled frame)
	}
	return m, nil
}

// reserve holds name for a match being started (a nil entry).
func (h *Host) reserve(name string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.state == draining:
		return ErrDraining
	case h.state == closed:
		return ErrClosed
	case len(h.matches) >= h.cfg.MaxMatches:
		return ErrFull
	}
	if _, ok := h.matches[name]; ok {
		return fmt.Errorf("%w: %q", ErrExists, name)
	}
	h.matches[name] = nil
	return nil
}

func (h *Host) unreserve(name string) {
	h.mu.Lock()
	delete(h.matches, name)
	h.mu.Unlock()
	h.checkDone()
}

// Match returns the open match name.
func (h *Host) Match(name string) (*Match, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.matches[name]
	return m, m != nil
}

// Matches returns the open matches, by name.
func (h *Host) Matches() []*Match {
	h.mu.Lock()
	ms := make([]*Match, 0, len(h.matches))
	for _, m := range h.matches {
		if m != nil {
			ms = append(ms, m)
		}
	}
	h.mu.Unlock()
	sort.Slice(ms, func(i, j int) bool { return ms[i].name < ms[j].name })
	return ms
}

// removed takes an ended match out of the table.
func (h *Host) removed(m *Match) {
	h.mu.Lock()
	if h.matches[m.name] == m {
		delete(h.matches, m.name)
	}
	h.mu.Unlock()
	h.checkDone()
}

// Admitting reports whether the host admits new clients: it is neither
// draining nor closed (readiness).
func (h *Host) Admitting() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.state == admitting
}

// Done is closed when the host has no more to do: after [Host.Drain], once
// every match has ended (or StallAfter past the drain deadline, with
// stalled matches left behind), and after [Host.Close]. The process may
// exit then.
func (h *Host) Done() <-chan struct{} { return h.done }

// checkDone closes Done if the host drains and no match is left.
func (h *Host) checkDone() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.state != admitting && len(h.matches) == 0 {
		h.closeDone()
	}
}

func (h *Host) closeDone() {
	if !h.isDone {
		h.isDone = true
		close(h.done)
	}
}

// Close ends every match with transport.CodeNormal ("server closing"),
// stops accepting, closes the listener, and waits for the host's and the
// matches' goroutines (a match stalled in a frame is not waited for).
func (h *Host) Close() error {
	h.mu.Lock()
	if h.state == closed {
		h.mu.Unlock()
		return nil
	}
	h.state = closed
	ms := make([]*Match, 0, len(h.matches))
	for _, m := range h.matches {
		if m != nil {
			ms = append(ms, m)
		}
	}
	h.mu.Unlock()
	h.cancel()
	err := h.l.Close()
	h.lingering.Due(time.Time{}, h.closeConn) // refused connections still lingering
	for _, m := range ms {
		m.Close(transport.CodeNormal, "server closing")
		if h.cfg.Manual {
			m.frame(h.cfg.Now()) // (ends it)
		}
	}
	for _, m := range ms {
		m.waitEnded(h.cfg.StallAfter)
	}
	h.wg.Wait()
	h.closer.Wait()
	h.mu.Lock()
	h.closeDone()
	h.mu.Unlock()
	return err
}

// Step runs the host once on the caller's goroutine (Config.Manual): it
// accepts new connections and routes those whose Hello arrived, then runs
// one frame of every match at Now, then closes refused connections whose
// linger is over. It does nothing on a host that is not Manual.
func (h *Host) Step() {
	if !h.cfg.Manual {
		return
	}
	now := h.cfg.Now()
	h.pollAccept(now)
	for _, m := range h.Matches() {
		m.frame(now)
	}
	h.sweep(now)
}

// acceptLoop accepts connections until the host closes, and reads each
// one's Hello on a goroutine of its own (at most MaxHandshakes at once).
func (h *Host) acceptLoop() {
	defer h.wg.Done()
	for {
		c, err := h.l.Accept(h.ctx)
		if err != nil {
			return
		}
		h.stats.accepted.Add(1)
		if !h.takeHandshake(c) {
			continue
		}
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			defer h.handshakes.Add(-1)
			h.readHello(c)
		}()
	}
}

// takeHandshake counts c in MaxHandshakes, or refuses it when they are
// taken.
func (h *Host) takeHandshake(c transport.Conn) bool {
	if n := h.handshakes.Add(1); int(n) > h.cfg.MaxHandshakes {
		h.handshakes.Add(-1)
		h.stats.refused[refuseBusy].Add(1)
		h.cfg.Logger.Warn("archenet/host: connection refused: host busy", "remote", c.RemoteAddr())
		h.closeConn(c, transport.CodeBusy, fmt.Sprintf("host busy: %d connections are in the handshake (host.Config.MaxHandshakes)", h.cfg.MaxHandshakes))
		return false
	}
	return true
}

// readHello waits up to HandshakeTimeout for c's Hello and routes c by it.
func (h *Host) readHello(c transport.Conn) {
	ctx, cancel := context.WithTimeout(h.ctx, h.cfg.HandshakeTimeout)
	b, err := c.ReceiveMessage(ctx)
	cancel()
	if err != nil {
		if ctx.Err() != nil && h.ctx.Err() == nil {
			h.helloTimeout(c)
		} else {
			h.closeConn(c, transport.CodeNormal, "server closing")
		}
		return
	}
	h.route(c, b)
}

func (h *Host) helloTimeout(c transport.Conn) {
	h.stats.refused[refuseHelloTimeout].Add(1)
	h.cfg.Logger.Info("archenet/host: connection dropped: no hello in time", "remote", c.RemoteAddr(), "timeout", h.cfg.HandshakeTimeout)
	h.closeConn(c, transport.CodeHandshakeFailed, "no hello in time")
}

// pollAccept is acceptLoop and readHello for Manual mode.
func (h *Host) pollAccept(now time.Time) {
	for {
		c, ok := h.l.PollAccept()
		if !ok {
			break
		}
		h.stats.accepted.Add(1)
		if h.takeHandshake(c) {
			h.pending = append(h.pending, pendingHello{conn: c, since: now})
		}
	}
	keep := h.pending[:0]
	for _, p := range h.pending {
		if b, ok := p.conn.PollMessage(); ok {
			h.handshakes.Add(-1)
			h.route(p.conn, b)
			continue
		}
		select {
		case <-p.conn.Done():
			h.handshakes.Add(-1)
			continue
		default:
		}
		if now.Sub(p.since) > h.cfg.HandshakeTimeout {
			h.handshakes.Add(-1)
			h.helloTimeout(p.conn)
			continue
		}
		keep = append(keep, p)
	}
	clear(h.pending[len(keep):])
	h.pending = keep
}

// janitor closes refused connections after their linger and ends a drain
// whose deadline passed long ago, until the host closes.
func (h *Host) janitor() {
	defer h.wg.Done()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-h.ctx.Done():
			h.sweep(time.Now().Add(time.Hour)) // close what lingers
			return
		case <-t.C:
			h.heartbeat.Store(time.Now().UnixNano())
			h.sweep(h.cfg.Now())
			h.endStalled(time.Now())
		}
	}
}

// sweep closes the refused connections whose linger is over and, StallAfter
// past a drain's deadline, closes Done even if stalled matches are left.
func (h *Host) sweep(now time.Time) {
	h.lingering.Due(now, h.closeConn)
	d := h.drain.Load()
	if d == nil || d.deadline.IsZero() || now.Before(d.deadline.Add(h.cfg.StallAfter)) {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.isDone {
		names := make([]string, 0, len(h.matches))
		for n := range h.matches {
			names = append(names, n)
		}
		if len(names) > 0 {
			h.cfg.Logger.Error("archenet/host: drain deadline passed with matches that did not end (stalled)", "matches", names)
		}
		h.closeDone()
	}
}

// endStalled ends the matches stalled at now (wall time) for more than
// StallAfter, unless Config.KeepStalled.
func (h *Host) endStalled(now time.Time) {
	if h.cfg.KeepStalled {
		return
	}
	for _, m := range h.Matches() {
		if d := m.stalled(now, h.cfg.StallAfter); d > 0 {
			m.abandon(d)
		}
	}
}
