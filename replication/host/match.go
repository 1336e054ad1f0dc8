package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/replication/host/token"
	"github.com/archenet/archenet/transport"
)

// Match is one match of a [Host]: its game, its replication server and its
// goroutine. Its methods are safe for concurrent use, except where they say
// they belong to the match's goroutine.
type Match struct {
	h      *Host
	name   string
	cfg    MatchConfig
	period time.Duration
	log    *slog.Logger
	ln     *matchListener

	game Game
	srv  *replication.Server

	endReq atomic.Pointer[transport.CloseError] // Close asked for the end
	ended  chan struct{}
	cpReqs chan checkpointReq       // Checkpoint calls (move.go)
	move   atomic.Pointer[moveInfo] // MoveTo's

	// Liveness: unix nanoseconds when the running frame started (0 between
	// frames) and when the last one ended (or the match opened).
	frameStart, lastFrame atomic.Int64

	// The match's goroutine's own.
	due       time.Time
	drainSeen *drainInfo
	moveSeen  *moveInfo
	routed    map[transport.Conn]routedConn // connections not yet welcomed
	isEnded   bool

	// players are the match's players: the match's goroutine changes them,
	// and the host's ends a stalled match (abandoned). Lock order: emitMu
	// (held while their events go out, so they go in order), then pmu.
	emitMu    sync.Mutex
	pmu       sync.Mutex
	players   map[replication.ClientID]player
	abandoned bool
	finished  sync.Once
	events    []PlayerEvent // trackPlayers' buffer

	mu     sync.Mutex
	window frameWindow
	stats  MatchStats
}

// player is a client the match tracks for PlayerEvents.
type player struct {
	seat uint64         // replication.ClientInfo.Seat
	conn transport.Conn // its connection as of the last frame (nil: suspended)
	info Player
	// token is the player's connect token until it acknowledged its first
	// snapshot (it is then spent for good); given back if the player
	// leaves before (a join that timed out).
	token []byte
}

// Player is who a client of a match is.
type Player struct {
	// ID names the player: with connect tokens the token's client id in
	// decimal, else "match/client" (e.g. "duel-7/3").
	ID string
	// Client is the player's id on the match's server.
	Client replication.ClientID
	// Token is what the player's connect token said (nil without tokens).
	Token *token.Claims
}

// PlayerEvent is a player joining or leaving a match (Config.OnPlayer).
type PlayerEvent struct {
	Match  string
	Player Player
	Joined bool // false: left
}

// MatchEvent is a match opening or ending (Config.OnMatch).
type MatchEvent struct {
	Match  string
	Opened bool // false: ended
	// Why is why the match ended (nil when it opened): the code and reason
	// its clients were disconnected with.
	Why *transport.CloseError
}

func newMatch(h *Host, name string, cfg MatchConfig) *Match {
	m := &Match{h: h, name: name, cfg: cfg, period: time.Second / time.Duration(cfg.FrameRate),
		log: h.cfg.Logger.With("match", name), ended: make(chan struct{}), cpReqs: make(chan checkpointReq),
		players: map[replication.ClientID]player{}, routed: map[transport.Conn]routedConn{}}
	m.ln = &matchListener{m: m, queue: make(chan handoff, cfg.Handoffs), closed: make(chan struct{})}
	m.stats.Name = name
	m.lastFrame.Store(time.Now().UnixNano()) // (liveness is wall time)
	return m
}

// start runs the game's Start, recovering a panic.
func (m *Match) start() (g Game, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("host: MatchConfig.Start panicked: %v", r)
		}
	}()
	g, err = m.cfg.Start(m)
	if err == nil && (g == nil || g.Replication() == nil) {
		err = errors.New("host: MatchConfig.Start returned no game or no replication server")
	}
	return g, err
}

// Name returns the match's name.
func (m *Match) Name() string { return m.name }

// Listener is the match's listener: give it to replication.NewServer. It
// yields the connections the host routes to the match with their Hello
// (transport.HelloListener).
func (m *Match) Listener() transport.Listener { return m.ln }

// Configure sets what a match's server needs on a host, where cfg leaves it
// at zero: one worker (ServerConfig.Workers = 1: the host spreads its
// matches over the cores, each on its own goroutine, rather than each
// match's Send spinning GOMAXPROCS helpers), the host's clock and the
// host's logger with the match's name, and the match's name
// (ServerConfig.Match: a client that comes back to its seat names it).
// Call it before replication.NewServer.
func (m *Match) Configure(cfg *replication.ServerConfig) {
	if cfg.Workers == 0 {
		cfg.Workers = 1
	}
	if cfg.Match == "" {
		cfg.Match = m.name
	}
	if cfg.Now == nil {
		cfg.Now = m.h.cfg.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = m.log
	}
}

// Player returns who client id of the match is (nil Token without connect
// tokens).
func (m *Match) Player(id replication.ClientID) (Player, bool) {
	m.pmu.Lock()
	defer m.pmu.Unlock()
	p, ok := m.players[id]
	return p.info, ok
}

// Close ends the match: at its next frame its clients are disconnected
// with code and reason (Client.Err), its server and game are closed, and
// the host forgets it. Safe from any goroutine, the game's Frame included;
// only the first Close counts.
func (m *Match) Close(code transport.CloseCode, reason string) {
	m.endReq.CompareAndSwap(nil, &transport.CloseError{Code: code, Reason: reason})
}

// Ended is closed once the match has ended.
func (m *Match) Ended() <-chan struct{} { return m.ended }

func (m *Match) waitEnded(limit time.Duration) {
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-m.ended:
	case <-t.C:
	}
}

// Stats returns the match's figures.
func (m *Match) Stats() MatchStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.stats
	s.FrameMean, s.FrameP99, s.FrameWorst = m.window.figures()
	return s
}

// run is the match's goroutine: a frame every period until the match ends.
// A frame that runs late is not made up for: the next is due a period
// after it started.
func (m *Match) run() {
	t := time.NewTicker(m.period)
	defer t.Stop()
	for m.frame(time.Now()) {
		select {
		case <-t.C:
		case <-m.h.ctx.Done():
			m.Close(transport.CodeNormal, "server closing")
		}
	}
}

// frame runs one frame of the match at now: the game's Frame (a panic ends
// the match), then what the host keeps: players, stats, drain and end. It
// reports whether the match goes on.
func (m *Match) frame(now time.Time) bool {
	if m.isEnded {
		return false
	}
	late := !m.due.IsZero() && now.Sub(m.due) > m.period
	m.due = now.Add(m.period)
	m.serveCheckpoints()
	m.noticeDrain()
	m.noticeMove()
	start := time.Now()
	m.frameStart.Store(start.UnixNano())
	crash := m.runFrame(now)
	end := time.Now()
	m.frameStart.Store(0)
	m.lastFrame.Store(end.UnixNano())
	if crash != nil {
		m.h.stats.crashed.Add(1)
		m.log.Error("archenet/host: match crashed", "panic", crash.Reason)
		m.end(crash)
		return false
	}
	m.record(end.Sub(start), m.trackPlayers(), late) // (nothing once abandoned)
	if why := m.endWhy(now); why != nil {
		m.end(why)
		return false
	}
	return true
}

// runFrame calls Game.Frame, turning a panic into the match's end.
func (m *Match) runFrame(now time.Time) (crash *transport.CloseError) {
	defer func() {
		if r := recover(); r != nil {
			m.log.Debug("archenet/host: panic stack", "stack", string(debug.Stack()))
			crash = &transport.CloseError{Code: transport.CodeInternal, Reason: transport.TruncateReason(fmt.Sprintf("match crashed: %v", r), 200)}
		}
	}()
	m.game.Frame(now)
	return nil
}

// record adds a frame's time, the clients after it, and whether it was
// late to the match's figures.
func (m *Match) record(d time.Duration, clients int, late bool) {
	m.mu.Lock()
	m.window.add(d)
	m.stats.Frames++
	if late {
		m.stats.Late++
	}
	m.stats.Suspended = len(m.srv.Suspended())
	m.stats.Clients = clients - m.stats.Suspended // (clients: the seats)
	m.stats.Resumed, m.stats.SeatsExpired = m.srv.Stats.Resumed, m.srv.Stats.SeatsExpired
	m.stats.Routed = m.ln.routed.Load()
	m.stats.BytesDown = m.srv.Stats.SnapshotBytes + m.srv.Stats.SpawnBytes
	m.mu.Unlock()
}

// noticeDrain passes a new drain on to the match's server.
func (m *Match) noticeDrain() {
	if d := m.h.drain.Load(); d != nil && d != m.drainSeen {
		m.drainSeen = d
		m.srv.Drain(d.reason, d.deadline)
	}
}

// endWhy returns why the match ends after this frame, or nil: Close was
// called; or the host drains and the deadline passed or no client is left.
func (m *Match) endWhy(now time.Time) *transport.CloseError {
	if e := m.endReq.Load(); e != nil {
		return e
	}
	if e := m.moveEnd(now); e != nil {
		return e
	}
	d := m.drainSeen
	if d == nil {
		return nil
	}
	if !d.deadline.IsZero() && !now.Before(d.deadline) {
		return d.refusal
	}
	if len(m.players) == 0 {
		return &transport.CloseError{Code: transport.CodeDraining, Reason: d.refusal.Reason}
	}
	return nil
}

// end closes the match's server with why, then its game and listener,
// reports its players gone, and takes it out of the host (unless it was
// abandoned already). It runs on the match's goroutine.
func (m *Match) end(why *transport.CloseError) {
	m.isEnded = true
	m.mu.Lock()
	if m.stats.Ending == "" {
		m.stats.Ending = why.Reason
	}
	m.mu.Unlock()
	m.log.Info("archenet/host: match ended", "code", why.Code, "reason", why.Reason)
	func() {
		defer func() {
			if r := recover(); r != nil {
				m.log.Error("archenet/host: match panicked while closing", "panic", r)
			}
		}()
		_ = m.srv.CloseWithReason(why.Code, why.Reason)
		m.game.Close()
	}()
	m.ln.Close()
	m.leaveAll(nil)
	m.finish(why)
}

// leaveAll forgets every player (closing its connection with why, if not
// nil) and reports it gone, once: it reports whether the match was not
// abandoned yet (it is from now on).
func (m *Match) leaveAll(why *transport.CloseError) bool {
	m.emitMu.Lock()
	defer m.emitMu.Unlock()
	m.pmu.Lock()
	if m.abandoned {
		m.pmu.Unlock()
		return false
	}
	m.abandoned = true
	gone := make([]Player, 0, len(m.players))
	for id, p := range m.players {
		delete(m.players, id)
		gone = append(gone, p.info)
		m.h.releaseToken(p.token)
		if why != nil && p.conn != nil {
			m.h.closeConn(p.conn, why.Code, why.Reason)
		}
	}
	m.pmu.Unlock()
	for _, p := range gone {
		m.emit(p, false)
	}
	return true
}

// finish reports the match ended and takes it out of the host, once.
func (m *Match) finish(why *transport.CloseError) {
	m.finished.Do(func() {
		if fn := m.h.cfg.OnMatch; fn != nil {
			fn(MatchEvent{Match: m.name, Why: why})
		}
		m.h.stats.ended.Add(1)
		close(m.ended) // before the host may report Done
		m.h.removed(m)
	})
}

// abandon ends a match stalled for d from the host's goroutine: its
// players are disconnected with why and reported gone, queued connections
// closed, and the match taken out of the host; when its stuck frame
// returns, its goroutine closes its server and game (Close was called).
func (m *Match) abandon(d time.Duration) {
	why := &transport.CloseError{Code: transport.CodeInternal,
		Reason: fmt.Sprintf("match stalled: no frame done for %v", d.Round(time.Millisecond))}
	m.Close(why.Code, why.Reason)
	if !m.leaveAll(why) {
		return // ended, or abandoned, already
	}
	m.mu.Lock()
	m.stats.Ending = why.Reason
	m.mu.Unlock()
	m.h.stats.stalled.Add(1)
	m.log.Error("archenet/host: match stalled: ended; its frame is left to return", "stalled", d.Round(time.Millisecond))
	m.ln.Close()
	m.finish(why)
}

// stalled returns for how long the match has been stuck at now: in one
// frame, or without a frame, for more than after (0: not stalled).
func (m *Match) stalled(now time.Time, after time.Duration) time.Duration {
	select {
	case <-m.ended:
		return 0
	default:
	}
	if s := m.frameStart.Load(); s != 0 {
		if d := now.Sub(time.Unix(0, s)); d > after {
			return d
		}
		return 0
	}
	if d := now.Sub(time.Unix(0, m.lastFrame.Load())); d > after {
		return d
	}
	return 0
}

// handoff is a connection routed to a match, with its Hello and the claims
// of its connect token (nil without tokens).
type handoff struct {
	conn   transport.Conn
	hello  []byte
	claims *token.Claims
	token  []byte // the connect token (nil without tokens)
}

// routedConn is a connection the match's server took but did not welcome
// yet: its token's claims and the token, released if it never joins.
type routedConn struct {
	claims *token.Claims
	token  []byte
}

// handoff queues c for the match's server; false if the queue is full or
// the match ended.
func (m *Match) handoff(c handoff) bool {
	select {
	case <-m.ln.closed:
		return false
	default:
	}
	select {
	case m.ln.queue <- c:
		return true
	default:
		return false
	}
}

// matchListener is a match's transport.HelloListener: the connections the
// host routed to the match, with their Hello.
type matchListener struct {
	m      *Match
	queue  chan handoff
	routed atomic.Uint64

	once   sync.Once
	closed chan struct{}
}

var _ transport.HelloListener = (*matchListener)(nil)

// PollAcceptHello implements transport.HelloListener. It belongs to the
// match's goroutine (the server's Receive).
func (l *matchListener) PollAcceptHello() (transport.Conn, []byte, bool) {
	select {
	case c := <-l.queue:
		l.took(c)
		return c.conn, c.hello, true
	default:
		return nil, nil, false
	}
}

// took notes a routed connection's claims for when it joins.
func (l *matchListener) took(c handoff) {
	l.routed.Add(1)
	l.m.routed[c.conn] = routedConn{claims: c.claims, token: c.token}
}

// PollAccept implements transport.Listener: the connection without its
// Hello, which the host read (a replication.Server uses PollAcceptHello).
func (l *matchListener) PollAccept() (transport.Conn, bool) {
	c, _, ok := l.PollAcceptHello()
	return c, ok
}

// Accept implements transport.Listener, like PollAccept. Like
// PollAcceptHello it belongs to the match's goroutine.
func (l *matchListener) Accept(ctx context.Context) (transport.Conn, error) {
	select {
	case c := <-l.queue:
		l.took(c)
		return c.conn, nil
	case <-l.closed:
		return nil, fmt.Errorf("host: match %q: %w", l.m.name, transport.ErrClosed)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Close implements transport.Listener: the connections still queued are
// closed ("match closed"). The host's listener stays open.
func (l *matchListener) Close() error {
	l.once.Do(func() {
		close(l.closed)
		for {
			select {
			case c := <-l.queue:
				l.m.h.releaseToken(c.token)
				l.m.h.closeConn(c.conn, transport.CodeNormal, "match closed")
			default:
				return
			}
		}
	})
	return nil
}

// Addr implements transport.Listener: the host's listener's address.
func (l *matchListener) Addr() net.Addr { return l.m.h.l.Addr() }
