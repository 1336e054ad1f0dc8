package replication

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/archenet/archenet/replication/internal/closing"
	"github.com/archenet/archenet/replication/internal/peer"
	"github.com/archenet/archenet/replication/internal/wire"
	"github.com/archenet/archenet/transport"
)

// pendingConn is a connection in the handshake: waiting for its Hello, or
// for the Authenticator's verdict on it.
type pendingConn struct {
	conn  transport.Conn
	since time.Time
	hello transport.Hello
	first []byte // the Hello's bytes (hello aliases them)
	// routed: first was read by whoever handed the connection over
	// (Server.AddConnHello) and is judged on the first advance.
	routed bool
	// auth receives the Authenticator's verdict; non-nil while it runs.
	auth   chan error
	cancel context.CancelFunc
}

// handshakes is the connections in the handshake: pending ones, those
// whose Authenticator runs (authing of them), rejected ones left open for a
// moment so that the Reject reaches the client before the close
// (lingering), and the next client id to try.
type handshakes struct {
	pending   []*pendingConn
	lingering closing.Lingering
	authing   int
	nextID    int
}

// stopAuth abandons a running authentication (its goroutine ends when the
// Authenticator returns; the verdict is dropped).
func (p *pendingConn) stopAuth() {
	if p.cancel != nil {
		p.cancel()
		p.cancel = nil
	}
}

// handshakes advances every connection in the handshake by what arrived
// since the last tick. Nothing here waits: the Authenticator runs on a
// goroutine of its own and its verdict is picked up on a later tick.
func (s *Server) handshakes() {
	now := s.cfg.Now()
	s.hs.lingering.Due(now, s.closeConn)
	keep := s.hs.pending[:0]
	for _, p := range s.hs.pending {
		if s.advanceHandshake(p, now) {
			keep = append(keep, p)
		}
	}
	clear(s.hs.pending[len(keep):]) // release the connections that left
	s.hs.pending = keep
}

// advanceHandshake moves p on; it reports whether p is still in the
// handshake.
func (s *Server) advanceHandshake(p *pendingConn, now time.Time) bool {
	select {
	case <-p.conn.Done():
		s.endAuth(p)
		s.cfg.Logger.Info("archenet: connection closed during the handshake", "remote", p.conn.RemoteAddr(), "err", p.conn.Err())
		return false
	default:
	}
	hash := s.cfg.Registry.Hash()
	if p.auth != nil {
		return s.awaitAuth(p, now, hash)
	}
	m, ok := p.first, p.routed
	if p.routed {
		p.routed = false
	} else {
		m, ok = p.conn.PollMessage()
	}
	if !ok {
		if now.Sub(p.since) > s.cfg.HandshakeTimeout {
			s.Stats.Rejected++
			s.Stats.HandshakeTimeouts++
			s.cfg.Logger.Warn("archenet: connection dropped: no hello in time", "remote", p.conn.RemoteAddr(), "timeout", s.cfg.HandshakeTimeout)
			s.closeConn(p.conn, transport.CodeHandshakeFailed, "no hello in time")
			return false
		}
		return true
	}
	// The slot limits are checked before authentication, so junk Hellos
	// cost no auth calls while the server is full.
	refuse := s.slotLimit(p.conn.RemoteAddr())
	h, he := transport.JudgeHello(m, ProtocolVersion, hash, refuse)
	if he != nil {
		s.reject(p.conn, he, hash)
		return false
	}
	p.hello, p.first = h, m
	if s.cfg.Authenticator == nil {
		s.admit(p, hash)
		return false
	}
	s.startAuth(p, now)
	return true
}

// slotLimit returns why a client from addr cannot have a slot now, or nil:
// the server is draining (Server.Drain), every slot is taken or promised to a client whose authentication runs
// (MaxClients), or MaxClientsPerAddress of them are from addr's source.
func (s *Server) slotLimit(addr net.Addr) error {
	if s.draining != nil {
		return s.draining
	}
	n := s.hs.authing + s.connected()
	if n >= s.cfg.MaxClients {
		return fmt.Errorf("%w: %d of %d slots taken (ServerConfig.MaxClients)", errServerFull, n, s.cfg.MaxClients)
	}
	if s.cfg.MaxClientsPerAddress < 0 {
		return nil
	}
	src := sourceOf(addr)
	from := 0
	for _, c := range s.clients {
		if c != nil && sourceOf(c.conn.RemoteAddr()) == src {
			from++
		}
	}
	for _, p := range s.hs.pending {
		if p.auth != nil && sourceOf(p.conn.RemoteAddr()) == src {
			from++
		}
	}
	if from >= s.cfg.MaxClientsPerAddress {
		return fmt.Errorf("%w: %d clients from %s (ServerConfig.MaxClientsPerAddress)", errPerAddress, from, src)
	}
	return nil
}

// sourceOf is the key of the slot limit per address: an IPv4 address, the
// /64 prefix of an IPv6 address (one host usually holds a whole /64), or,
// for other transports, the address without its port.
func sourceOf(addr net.Addr) string {
	var ip netip.Addr
	switch a := addr.(type) {
	case *net.UDPAddr:
		ip, _ = netip.AddrFromSlice(a.IP)
	case *net.TCPAddr:
		ip, _ = netip.AddrFromSlice(a.IP)
	case nil:
		return ""
	default:
		s := addr.String()
		if host, _, err := net.SplitHostPort(s); err == nil {
			return host
		}
		return s
	}
	if ip = ip.Unmap(); ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}

// startAuth runs the Authenticator on p's Hello on a goroutine of its own,
// bounded by what is left of p's handshake time.
func (s *Server) startAuth(p *pendingConn, now time.Time) {
	left := s.cfg.HandshakeTimeout - now.Sub(p.since)
	ctx, cancel := context.WithTimeout(context.Background(), max(left, 0))
	p.auth, p.cancel = make(chan error, 1), cancel
	s.hs.authing++
	auth, remote, token := s.cfg.Authenticator, p.conn.RemoteAddr(), p.hello.Token
	go func(done chan<- error) {
		err := auth(ctx, remote, token)
		if err == nil && ctx.Err() != nil {
			err = fmt.Errorf("authentication did not finish within the handshake timeout")
		}
		done <- err
	}(p.auth)
}

// endAuth releases the client slot p's authentication held.
func (s *Server) endAuth(p *pendingConn) {
	if p.auth != nil {
		p.stopAuth()
		p.auth = nil
		s.hs.authing--
	}
}

// awaitAuth picks up the Authenticator's verdict on p if it is in; it
// reports whether p is still in the handshake.
func (s *Server) awaitAuth(p *pendingConn, now time.Time, hash uint64) bool {
	if m, ok := p.conn.PollMessage(); ok {
		s.endAuth(p)
		s.reject(p.conn, transport.AsHandshakeError(fmt.Errorf("%w: unexpected message of %d bytes during the handshake", ErrMalformed, len(m)), ProtocolVersion, hash), hash)
		return false
	}
	select {
	case err := <-p.auth:
		s.endAuth(p)
		if err != nil {
			s.refuse(p, hash, err)
			return false
		}
		s.admit(p, hash)
		return false
	default:
	}
	if now.Sub(p.since) > s.cfg.HandshakeTimeout {
		s.endAuth(p)
		s.Stats.HandshakeTimeouts++
		s.refuse(p, hash, errAuthTimeout)
		return false
	}
	return true
}

// Reasons the server refuses a client with a well-formed, matching Hello.
var (
	errServerFull  = errors.New("server full")
	errPerAddress  = errors.New("too many clients from one address")
	errAuthTimeout = errors.New("authentication timed out")
)

// refuse rejects p, whose Hello was acceptable, for the server's reason why.
func (s *Server) refuse(p *pendingConn, hash uint64, why error) {
	_, he := transport.JudgeHello(p.first, ProtocolVersion, hash, why)
	s.reject(p.conn, he, hash)
}

// admit welcomes p as a client, unless the server filled up meanwhile.
func (s *Server) admit(p *pendingConn, hash uint64) {
	if s.draining != nil {
		s.refuse(p, hash, s.draining)
		return
	}
	id, full := s.allocClientID()
	if full {
		s.refuse(p, hash, fmt.Errorf("%w: %d of %d slots taken (ServerConfig.MaxClients)", errServerFull, s.cfg.MaxClients, s.cfg.MaxClients))
		return
	}
	info := wire.Welcome{TickRate: uint16(s.cfg.NetRate), Depth: uint8(s.cfg.Depth), Tick: s.tick, NetDivisor: uint16(s.cfg.NetDivisor),
		Compression: s.cfg.Compression, Dictionary: wire.DictionaryHash(s.cfg.CompressionDictionary)}
	w := transport.Welcome{ClientID: id, Payload: info.Append(nil)}
	if err := p.conn.SendMessage(w.Append(nil)); err != nil {
		s.cfg.Logger.Warn("archenet: connection dropped: welcome failed", "remote", p.conn.RemoteAddr(), "err", err)
		s.closeConn(p.conn, transport.CodeInternal, "welcome failed")
		return
	}
	c := &remote{conn: p.conn}
	c.Init(id, peer.Config{Depth: s.cfg.Depth, NetRate: s.cfg.NetRate, MinRate: s.cfg.MinBytesPerSecond, MaxRate: s.cfg.MaxBytesPerSecond, MTU: s.cfg.MTU}, s.cfg.Now())
	s.clients[id] = c
	s.Stats.Connected++
	s.cfg.Logger.Info("archenet: client connected", "client", id, "remote", p.conn.RemoteAddr())
	if s.cfg.OnConnect != nil {
		s.cfg.OnConnect(id)
	}
}

// reject sends the client a Reject saying why and closes the connection after
// a linger.
func (s *Server) reject(c transport.Conn, he *transport.HandshakeError, hash uint64) {
	s.Stats.Rejected++
	rj := rejectFor(he, hash, s.cfg.Registry)
	_ = c.SendMessage(rj.Append(nil))
	// Close after a linger, so the Reject arrives before the close (a QUIC
	// close may discard stream data in flight); the client closes first
	// once it has read the Reject.
	reason := transport.TruncateReason(he.Error(), 200)
	if !s.hs.lingering.Add(c, s.cfg.Now().Add(transport.RejectLinger), he.CloseCode(), reason) {
		s.closeConn(c, he.CloseCode(), reason)
	}
	s.cfg.Logger.Info("archenet: client rejected", "remote", c.RemoteAddr(), "reason", he.Error())
}

func (s *Server) allocClientID() (ClientID, bool) {
	n := 0
	for _, c := range s.clients {
		if c != nil {
			n++
		}
	}
	if n >= s.cfg.MaxClients {
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
