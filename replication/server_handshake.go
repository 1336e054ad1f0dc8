package replication

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/archenet/archenet/replication/internal/admit"
	"github.com/archenet/archenet/transport"
)

// newDesk returns the server's admission desk (package admit).
func (s *Server) newDesk() *admit.Desk {
	hash := s.cfg.Registry.Hash()
	return admit.New(admit.Config{Version: ProtocolVersion, Hash: hash, Authenticator: s.cfg.Authenticator,
		HandshakeTimeout: s.cfg.Limits.HandshakeTimeout, Match: s.cfg.Match, Now: s.cfg.Now, Logger: s.cfg.Logger, Close: s.closeConn,
		Reject: func(he *transport.HandshakeError) transport.Reject { return rejectFor(he, hash, s.cfg.Registry) }})
}

// handshakes advances every connection in the handshake by what arrived
// since the last tick and welcomes those through it. Nothing here waits:
// the Authenticator runs on a goroutine of its own and its verdict is
// picked up on a later tick.
func (s *Server) handshakes() {
	if s.hs.limit == nil {
		s.hs.limit = s.slotLimit // (once: a method value is a closure)
	}
	s.hs.admitted = s.hs.desk.Advance(s.cfg.Now(), s.hs.limit, s.hs.admitted[:0])
	for _, p := range s.hs.admitted {
		s.admit(p)
	}
	clear(s.hs.admitted)
	s.Stats.Rejected, s.Stats.HandshakeTimeouts = s.hs.desk.Counts.Rejected, s.hs.desk.Counts.HandshakeTimeouts
}

// handshakes is the server's side of admission: the desk (package admit),
// the connections it admitted this tick, the slot limit it asks (made
// once), and the next client id to try.
type handshakes struct {
	desk     *admit.Desk
	admitted []*admit.Pending
	limit    func(net.Addr) error
	nextID   int
}

// slotLimit returns why a client from addr cannot have a slot now, or nil:
// the server is draining (Server.Drain), MaxClientsPerAddress of them are
// from addr's source, or every slot is taken or promised to a client whose
// authentication runs (MaxClients) and none could be freed (evictJoining).
func (s *Server) slotLimit(addr net.Addr) error {
	if s.draining != nil {
		return s.draining
	}
	if err := s.perAddressLimit(addr); err != nil {
		return err
	}
	n := s.hs.desk.Authing() + s.connected()
	if n < s.cfg.Limits.MaxClients {
		return nil
	}
	// A stale join's slot is taken only for a client that may have it: at
	// once without an Authenticator, else once it authenticated (admit), so
	// that a Hello with a bad token cannot evict anyone.
	if s.cfg.Authenticator == nil && s.evictJoining(s.cfg.Now()) {
		return nil
	}
	if s.cfg.Authenticator != nil && s.staleJoins(s.cfg.Now()) > n-s.cfg.Limits.MaxClients {
		return nil // (a stale join for each client promised a slot, this one too)
	}
	return fmt.Errorf("%w: %d of %d slots taken (ServerConfig.Limits.MaxClients)", errServerFull, n, s.cfg.Limits.MaxClients)
}

// evictJoining frees a slot while every one is taken: it drops the client
// that has acknowledged no snapshot for the longest since the server built
// it its first, if that is at least a quarter of the JoinTimeout (a real
// client acknowledges within a few round trips; a peer that joined and
// vanished never does). Without it, sources joining and vanishing faster
// than MaxClients per JoinTimeout would keep the server full of joins that
// never finish. It reports whether it freed one.
func (s *Server) evictJoining(now time.Time) bool {
	c := s.staleJoin(now)
	if c == nil {
		return false
	}
	since, _ := c.Joining(now)
	s.Stats.JoinsEvicted++
	s.drop(c, transport.CodeTimeout, fmt.Sprintf("the client acknowledged no snapshot in the %v since its first, and the full server gave its slot to a newer client (ServerConfig.Limits.JoinTimeout)", since.Round(time.Millisecond)))
	return true
}

// staleJoin returns the client evictJoining would drop, or nil.
func (s *Server) staleJoin(now time.Time) *remote {
	var oldest *remote
	var age time.Duration
	for _, c := range s.clients {
		if since, ok := s.stale(c, now); ok && since > age {
			oldest, age = c, since
		}
	}
	return oldest
}

// staleJoins counts the clients staleJoin may pick: how many slots
// evictJoining could free.
func (s *Server) staleJoins(now time.Time) int {
	n := 0
	for _, c := range s.clients {
		if _, ok := s.stale(c, now); ok {
			n++
		}
	}
	return n
}

// stale reports whether c is a join evictJoining may drop (it has
// acknowledged no snapshot in a quarter of the JoinTimeout since its
// first), and for how long it has been joining.
func (s *Server) stale(c *remote, now time.Time) (time.Duration, bool) {
	if c == nil || s.cfg.Limits.JoinTimeout <= 0 {
		return 0, false
	}
	since, joining := c.Joining(now)
	return since, joining && since >= s.cfg.Limits.JoinTimeout/4
}

// perAddressLimit returns why a client from addr cannot have a slot now
// because MaxClientsPerAddress of the clients are from its source, or nil.
func (s *Server) perAddressLimit(addr net.Addr) error {
	if s.cfg.Limits.MaxClientsPerAddress < 0 {
		return nil
	}
	src := admit.SourceOf(addr)
	from := 0
	for _, c := range s.clients {
		if c != nil && admit.SourceOf(c.conn.RemoteAddr()) == src {
			from++
		}
	}
	s.hs.desk.Each(func(p *admit.Pending) {
		if admit.SourceOf(p.Conn.RemoteAddr()) == src {
			from++
		}
	})
	if from >= s.cfg.Limits.MaxClientsPerAddress {
		return fmt.Errorf("%w: %d clients from %s (ServerConfig.Limits.MaxClientsPerAddress)", errPerAddress, from, src)
	}
	return nil
}

// Reasons the server refuses a client with a well-formed, matching Hello.
var (
	errServerFull = &transport.CodeError{Code: transport.CodeBusy, Text: "server full"}
	errPerAddress = errors.New("too many clients from one address")
)

// admit welcomes p as a client, unless the server filled up meanwhile.
func (s *Server) admit(p *admit.Pending) {
	if len(p.Hello.Resume) > 0 {
		s.resume(p) // (while draining too: the seat is the client's)
		return
	}
	if s.draining != nil {
		s.hs.desk.Refuse(p, s.draining)
		return
	}
	id, full := s.allocClientID()
	if full && s.evictJoining(s.cfg.Now()) {
		id, full = s.allocClientID()
	}
	if full {
		s.hs.desk.Refuse(p, fmt.Errorf("%w: %d of %d slots taken (ServerConfig.Limits.MaxClients)", errServerFull, s.cfg.Limits.MaxClients, s.cfg.Limits.MaxClients))
		return
	}
	info := s.welcomeInfo()
	secret := newSecret()
	info.Secret = secret
	w := transport.Welcome{ClientID: id, Payload: info.Append(nil)}
	if err := p.Conn.SendMessage(w.Append(nil)); err != nil {
		s.cfg.Logger.Warn("archenet: connection dropped: welcome failed", "remote", p.Conn.RemoteAddr(), "err", err)
		s.closeConn(p.Conn, transport.CodeInternal, "welcome failed")
		return
	}
	c := &remote{conn: p.Conn}
	c.Init(id, s.peerConfig(), s.cfg.Now())
	c.seat.secret = secret
	s.seatSerial++
	c.seat.serial = s.seatSerial
	c.seat.log.reset()
	s.clients[id] = c
	s.Stats.Connected++
	s.cfg.Logger.Info("archenet: client connected", "client", id, "remote", p.Conn.RemoteAddr())
	if s.cfg.OnConnect != nil {
		s.cfg.OnConnect(id)
	}
}

func (s *Server) allocClientID() (ClientID, bool) {
	n := 0
	for _, c := range s.clients {
		if c != nil {
			n++
		}
	}
	if n >= s.cfg.Limits.MaxClients {
		return 0, true
	}
	for i := 0; i < 254; i++ {
		id := (s.hs.nextID-1+i)%254 + 1
		if s.clients[id] == nil {
			s.hs.nextID = id%254 + 1
			return ClientID(id), false
		}
	}
	return 0, true
}
