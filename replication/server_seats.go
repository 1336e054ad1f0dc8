package replication

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/archenet/archenet/replication/internal/admit"
	"github.com/archenet/archenet/replication/internal/grid"
	"github.com/archenet/archenet/replication/internal/peer"
	"github.com/archenet/archenet/replication/internal/wire"
	"github.com/archenet/archenet/transport"
)

// Seats: a client that loses its connection keeps its seat for
// Limits.SeatWindow and comes back to it on a new connection with the
// ticket its Welcome gave it (Client.Resume). What makes that work:
//
//   - every reliable message the server sends a client is numbered, and
//     kept (seatLog) until the client says, in its datagrams, that it took
//     it (wire.FlagTaken): a resume sends again exactly those the client
//     did not take, so no spawn batch is sent twice and none is lost;
//   - a suspended seat's peer goes on every tick without datagrams
//     (peer.Plan.Suspended): its spawn batches go to the log (deadConn
//     sends nothing), and its baselines age as a stalled client's do (what
//     it holds unchanged stays held: peer.SpawnHeld);
//   - the client keeps its mirrors and its snapshot receiver, so deltas go
//     on from the newest baseline both sides hold.

// ErrSeatExpired is wrapped by the reason OnDisconnect gets for a client
// whose seat was kept for Limits.SeatWindow and that did not come back.
var ErrSeatExpired = errors.New("replication: seat expired")

// ErrResumeRefused is wrapped by the reasons a resume is refused for (a
// client's Err after a refused Client.Resume wraps it too): no such seat,
// a wrong, used or other seat's secret, a seat that expired. The client may
// join again as a new player.
var ErrResumeRefused = &transport.CodeError{Code: transport.CodeResumeRefused, Text: "resume refused"}

// errResumedElsewhere is why a seat the server held connected was
// suspended: its client came back on a new connection.
var errResumedElsewhere = errors.New("replication: the client resumed its seat on a new connection")

// maxSeatLog bounds the bytes of reliable messages a seat keeps for a
// resume. A client that has not taken more than that (a large world's
// first spawn batch in flight) resumes with its replication started over
// (the Welcome says Reset) until it has taken them.
const maxSeatLog = 1 << 20

// seat is what the server keeps of a client so that it can come back.
type seat struct {
	// serial numbers the seat among the server's (ClientInfo.Seat)
	serial uint64
	secret [wire.SecretLen]byte
	// used is the secret the last resume spent (a replay is refused as
	// such); hasUsed: there was one.
	used    [wire.SecretLen]byte
	hasUsed bool
	// suspended: the connection is lost, since then, for why.
	suspended bool
	since     time.Time
	why       error
	log       seatLog
	// taken counts the client's reliable messages (game message batches)
	// the server took since the seat's replication began.
	taken uint32
	// restored: the seat came in a checkpoint (Restore): its replication
	// starts over at the resume.
	restored bool
}

// seatLog holds the reliable messages a peer has not said it took,
// numbered from 1 since the seat's replication began (a client keeps one
// of its own game messages too).
type seatLog struct {
	buf  []byte
	ends []int  // end offset in buf of each message kept
	next uint32 // the number of ends[0] (sent+1 when empty)
	sent uint32 // messages sent
	// lost: messages up to it were not all kept (the bound let go of the
	// oldest); a peer that has not taken them cannot continue from the log.
	lost uint32
	max  int // bound of buf (0: maxSeatLog)
}

func (l *seatLog) reset() { *l = seatLog{buf: l.buf[:0], ends: l.ends[:0], next: 1, max: l.max} }

// add keeps m (copied) as the next message sent, letting go of the oldest
// ones beyond the bound.
func (l *seatLog) add(m []byte) {
	if l.next == 0 {
		l.next = 1
	}
	limit := l.max
	if limit == 0 {
		limit = maxSeatLog
	}
	l.sent++
	if len(m) > limit {
		l.buf, l.ends, l.lost, l.next = l.buf[:0], l.ends[:0], l.sent, l.sent+1
		return
	}
	if over := len(l.buf) + len(m) - limit; over > 0 {
		k, _ := slices.BinarySearch(l.ends, over) // (the first k+1 messages end at or past over)
		l.lost = l.next + uint32(k)
		_ = l.take(l.lost)
	}
	l.buf = append(l.buf, m...)
	l.ends = append(l.ends, len(l.buf))
}

// take lets go of the messages up to n, which the client took; it fails
// for a count beyond those sent.
func (l *seatLog) take(n uint32) error {
	if int32(n-l.sent) > 0 {
		return fmt.Errorf("the client says it took %d reliable messages; %d were sent", n, l.sent)
	}
	k := int(int32(n - l.next + 1))
	if k <= 0 {
		return nil
	}
	k = min(k, len(l.ends))
	cut := l.ends[k-1]
	copy(l.buf, l.buf[cut:])
	l.buf = l.buf[:len(l.buf)-cut]
	copy(l.ends, l.ends[k:])
	l.ends = l.ends[:len(l.ends)-k]
	for i := range l.ends {
		l.ends[i] -= cut
	}
	l.next += uint32(k)
	if len(l.ends) == 0 && cap(l.buf) > keptLogCap {
		l.buf, l.ends = nil, nil // (a join's large batch, taken: its memory goes)
	}
	return nil
}

// keptLogCap is the largest buffer an empty log keeps.
const keptLogCap = 64 << 10

// memoryBytes returns what the log holds.
func (l *seatLog) memoryBytes() int { return cap(l.buf) + 8*cap(l.ends) }

// holds reports whether the log holds every message after n, the count a
// client says it took (the messages up to n it let go of, or n is stale).
func (l *seatLog) holds(n uint32) bool {
	return int32(n-l.sent) <= 0 && int32(n-l.lost) >= 0 && int32(n+1-l.next) >= 0
}

// each calls fn for every message after n, oldest first (holds(n)).
func (l *seatLog) each(n uint32, fn func(m []byte) error) error {
	start := 0
	for i, end := range l.ends {
		if seq := l.next + uint32(i); int32(seq-n) > 0 {
			if err := fn(l.buf[start:end]); err != nil {
				return err
			}
		}
		start = end
	}
	return nil
}

// endedSeat is a seat that ended recently, so that a resume to it is
// refused with why.
type endedSeat struct {
	id     ClientID
	secret [wire.SecretLen]byte
	at     time.Time
	why    string
}

// maxEndedSeats bounds the ended seats remembered.
const maxEndedSeats = 64

// seatsOn reports whether the server keeps seats.
func (s *Server) seatsOn() bool { return s.cfg.Limits.SeatWindow > 0 }

// sameSecret compares two secrets in constant time.
func sameSecret(a, b *[wire.SecretLen]byte) bool {
	var d byte
	for i := range a {
		d |= a[i] ^ b[i]
	}
	return d == 0
}

// sendReliable sends c the reliable message m, keeping it for a resume.
func (s *Server) sendReliable(c *remote, m []byte) error {
	if s.seatsOn() {
		c.seat.log.add(m)
	}
	return c.conn.SendMessage(m)
}

// takeConfirmed lets go of the reliable messages c said it took.
func (s *Server) takeConfirmed(c *remote) error {
	if !c.TakenNew {
		return nil
	}
	c.TakenNew = false
	if !s.seatsOn() {
		return nil
	}
	return c.seat.log.take(c.Taken)
}

// lost handles c, whose connection was lost (why): it keeps c's seat
// (OnSuspend) if seats are on and its source has not used up its suspended
// seats; else c is gone.
func (s *Server) lost(c *remote, why error) {
	s.closeConn(c.conn, transport.CodeTimeout, transport.TruncateReason(why.Error(), 200))
	if !s.seatsOn() || !s.suspendable(c.conn.RemoteAddr()) {
		s.gone(c, why)
		return
	}
	s.suspend(c, why)
}

// suspend keeps c's seat, whose connection is closed (why).
func (s *Server) suspend(c *remote, why error) {
	c.conn = &deadConn{addr: c.conn.RemoteAddr(), local: c.conn.LocalAddr(), mtu: c.conn.MaxDatagramSize(), done: make(chan struct{})}
	c.seat.suspended, c.seat.since, c.seat.why = true, s.cfg.Now(), why
	s.Stats.Suspended++
	s.cfg.Logger.Info("archenet: client suspended: its seat is kept", "client", c.ID, "window", s.cfg.Limits.SeatWindow, "reason", why)
	if s.cfg.OnSuspend != nil {
		s.cfg.OnSuspend(c.ID, why)
	}
}

// timedOut handles c, silent for ClientTimeout (why): a client that joined
// keeps its seat (lost); one that never acknowledged a snapshot is dropped.
func (s *Server) timedOut(c *remote, why string) {
	if c.Tracker.NewestAck == 0 {
		s.drop(c, transport.CodeTimeout, why)
		return
	}
	s.cfg.Logger.Info("archenet: client timed out", "client", c.ID, "reason", why)
	s.lost(c, &transport.CloseError{Code: transport.CodeTimeout, Reason: why})
}

// suspendable reports whether a client from addr may have its seat kept.
func (s *Server) suspendable(addr net.Addr) bool {
	limit := s.cfg.Limits.MaxSuspendedPerAddress
	if limit < 0 {
		return true
	}
	src, n := admit.SourceOf(addr), 0
	for _, c := range s.clients {
		if c != nil && c.seat.suspended && admit.SourceOf(c.conn.RemoteAddr()) == src {
			n++
		}
	}
	return n < limit
}

// expireSeat ends c's seat if its window ran out; it reports whether it
// did.
func (s *Server) expireSeat(c *remote, now time.Time) bool {
	if now.Sub(c.seat.since) <= s.cfg.Limits.SeatWindow {
		return false
	}
	s.Stats.SeatsExpired++
	s.cfg.Logger.Info("archenet: client left: its seat expired", "client", c.ID, "window", s.cfg.Limits.SeatWindow)
	s.gone(c, fmt.Errorf("%w: no resume within %v of losing the connection (%v)", ErrSeatExpired, s.cfg.Limits.SeatWindow, c.seat.why))
	return true
}

// endSeat remembers c's seat, which ends for why.
func (s *Server) endSeat(c *remote, why error) {
	if !s.seatsOn() {
		return
	}
	e := endedSeat{id: c.ID, secret: c.seat.secret, at: s.cfg.Now(), why: why.Error()}
	if len(s.ended) < maxEndedSeats {
		s.ended = append(s.ended, e)
		return
	}
	copy(s.ended, s.ended[1:])
	s.ended[len(s.ended)-1] = e
}

// wasEnded returns why a seat ended whose secret is secret, if it did
// recently.
func (s *Server) wasEnded(secret *[wire.SecretLen]byte) (endedSeat, bool) {
	for i := len(s.ended) - 1; i >= 0; i-- {
		if sameSecret(&s.ended[i].secret, secret) {
			return s.ended[i], true
		}
	}
	return endedSeat{}, false
}

// refuseResume refuses p's resume for why.
func (s *Server) refuseResume(p *admit.Pending, format string, args ...any) {
	s.Stats.ResumesRefused++
	s.hs.desk.Refuse(p, fmt.Errorf("%w: "+format, append([]any{ErrResumeRefused}, args...)...))
}

// resume takes p, whose Hello carries a resume ticket, back into its seat,
// or refuses it with why.
func (s *Server) resume(p *admit.Pending) {
	t, err := wire.ParseTicket(p.Hello.Resume)
	switch {
	case err != nil:
		s.refuseResume(p, "%v", err)
		return
	case !s.seatsOn():
		s.refuseResume(p, "this server keeps no seats (ServerConfig.Limits.SeatWindow)")
		return
	}
	c := s.clients[t.Client]
	if c == nil || !sameSecret(&c.seat.secret, &t.Secret) {
		s.refuseResume(p, "%s", s.whyNoSeat(c, &t))
		return
	}
	now := s.cfg.Now()
	reset := t.Fresh || c.seat.restored || !c.seat.log.holds(t.Taken)
	if !c.seat.suspended {
		// The client came back before the server noticed it was gone (an
		// address change, a quick reconnect): the old connection ends here,
		// and the game hears of it as of any loss (OnSuspend, then
		// OnResume).
		s.closeConn(c.conn, transport.CodeNormal, "the client resumed on a new connection")
		s.suspend(c, errResumedElsewhere)
	}
	if t.Fresh {
		c.seat.taken = 0 // (a new client process: its messages count from 1)
	}
	c.seat.used, c.seat.hasUsed, c.seat.secret = c.seat.secret, true, newSecret()
	info := s.welcomeInfo()
	info.Resumed, info.Reset, info.ClientTaken = true, reset, c.seat.taken
	w := transport.Welcome{ClientID: c.ID, Payload: info.Append(nil)}
	if err := p.Conn.SendMessage(w.Append(nil)); err != nil {
		s.cfg.Logger.Warn("archenet: resume dropped: welcome failed", "client", c.ID, "remote", p.Conn.RemoteAddr(), "err", err)
		s.closeConn(p.Conn, transport.CodeInternal, "welcome failed")
		c.seat.secret = c.seat.used // (the seat stays suspended, for another try)
		return
	}
	c.conn = p.Conn
	pc := s.peerConfig()
	if reset {
		c.Init(c.ID, pc, now)
		c.rel = grid.Relevance{}
		c.seat.log.reset()
		c.seqSeen = false // (a new client's message sections count from 0)
		s.Stats.ResumesReset++
	} else {
		c.Resume(pc, now)
		err = c.seat.log.each(t.Taken, c.conn.SendMessage)
	}
	c.seat.suspended, c.seat.why, c.seat.restored = false, nil, false
	s.Stats.Resumed++
	s.cfg.Logger.Info("archenet: client resumed its seat", "client", c.ID, "remote", p.Conn.RemoteAddr(), "reset", reset)
	if s.cfg.OnResume != nil {
		s.cfg.OnResume(c.ID)
	}
	if err != nil {
		s.sendFailed(c, err)
	}
}

// whyNoSeat says why ticket t names no seat the server holds (c: the
// client of its id, if any).
func (s *Server) whyNoSeat(c *remote, t *wire.Ticket) string {
	if e, ok := s.wasEnded(&t.Secret); ok {
		return fmt.Sprintf("seat %d ended %v ago: %s", e.id, s.cfg.Now().Sub(e.at).Round(time.Millisecond), e.why)
	}
	if c != nil && c.seat.hasUsed && sameSecret(&c.seat.used, &t.Secret) {
		return fmt.Sprintf("the secret of seat %d was used already (each resume gets a new one)", t.Client)
	}
	for _, o := range s.clients {
		if o != nil && o != c && sameSecret(&o.seat.secret, &t.Secret) {
			return fmt.Sprintf("the ticket names seat %d with the secret of another seat", t.Client)
		}
	}
	if c == nil {
		return fmt.Sprintf("no seat %d here", t.Client)
	}
	return fmt.Sprintf("wrong secret for seat %d", t.Client)
}

// peerConfig is what the server's peers are made with.
func (s *Server) peerConfig() peer.Config {
	return peer.Config{Depth: s.cfg.Depth, NetRate: s.cfg.NetRate, MinRate: s.cfg.MinBytesPerSecond, MaxRate: s.cfg.MaxBytesPerSecond, MTU: s.cfg.MTU}
}

// welcomeInfo is the replication part of a Welcome, without a seat's
// fields.
func (s *Server) welcomeInfo() wire.Welcome {
	return wire.Welcome{TickRate: uint16(s.cfg.NetRate), Depth: uint8(s.cfg.Depth), Tick: s.tick, NetDivisor: uint16(s.cfg.NetDivisor),
		Compression: s.cfg.Compression, Dictionary: wire.DictionaryHash(s.cfg.CompressionDictionary), Resumable: s.seatsOn(), Match: s.cfg.Match}
}

// deadConn stands in for a suspended client's connection: datagrams go
// nowhere, reliable messages go only to the seat's log (sendReliable), and
// nothing arrives.
type deadConn struct {
	addr, local net.Addr
	mtu         int
	done        chan struct{} // never closed: the seat's end is the server's
}

func (d *deadConn) SendDatagram([]byte) error { return nil }
func (d *deadConn) ReceiveDatagram(ctx context.Context) ([]byte, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}
func (d *deadConn) PollDatagram() ([]byte, bool) { return nil, false }
func (d *deadConn) MaxDatagramSize() int         { return d.mtu }
func (d *deadConn) SendMessage([]byte) error     { return nil }
func (d *deadConn) ReceiveMessage(ctx context.Context) ([]byte, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}
func (d *deadConn) PollMessage() ([]byte, bool)                       { return nil, false }
func (d *deadConn) MaxMessageSize() int                               { return transport.MaxHandshakeMessageSize }
func (d *deadConn) CloseWithReason(transport.CloseCode, string) error { return nil }
func (d *deadConn) Close() error                                      { return nil }
func (d *deadConn) Done() <-chan struct{}                             { return d.done }
func (d *deadConn) Err() error                                        { return nil }
func (d *deadConn) RemoteAddr() net.Addr                              { return d.addr }
func (d *deadConn) LocalAddr() net.Addr                               { return d.local }
func (d *deadConn) Stats() transport.Stats                            { return transport.Stats{} }
