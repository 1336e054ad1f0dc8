package replication

import (
	"errors"
	"fmt"
	"iter"
	"slices"
	"time"

	arche "github.com/mlange-42/arche/ecs"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/bitio"
	"github.com/archenet/archenet/replication/internal/peer"
	"github.com/archenet/archenet/replication/internal/wire"
	"github.com/archenet/archenet/replication/schema"
	"github.com/archenet/archenet/transport"
)

// ServerEndpoint is a server's end of one message type: it sends messages
// of type T to clients and receives theirs. Get it with [ServerMessages].
// Like the Server, it is used on the simulation goroutine.
type ServerEndpoint[T any] struct {
	endpoint[T]
	s *Server
}

// ServerMessages returns the server's endpoint for message type T (the same
// one on every call). T must be registered with schema.RegisterMessage.
func ServerMessages[T any](s *Server) (*ServerEndpoint[T], error) {
	p, err := messagePlan[T](s.cfg.Registry)
	if err != nil {
		return nil, err
	}
	if ep := s.msgs.eps[p.ID]; ep != nil {
		return ep.(*ServerEndpoint[T]), nil
	}
	ep := &ServerEndpoint[T]{endpoint: endpoint[T]{plan: p}, s: s}
	s.msgs.eps[p.ID] = ep
	return ep, nil
}

// Send sends m to client to. It goes with the next [Server.Send], stamped
// with that net tick. Its references must name replicated entities (or
// none). An error says why nothing was queued: no such client, a reference
// to an entity that is not replicated, or a delivery this server cannot
// give.
func (e *ServerEndpoint[T]) Send(to ClientID, m T, d Delivery) error {
	if to == 0 || e.s.clients[to] == nil {
		return fmt.Errorf("replication: %s to client %d: no such client", e.plan.Name, to)
	}
	return queueMessage(e.s, e.plan, &m, d, outMsg{to: to})
}

// Broadcast sends m to every client connected at the next [Server.Send].
func (e *ServerEndpoint[T]) Broadcast(m T, d Delivery) error {
	return queueMessage(e.s, e.plan, &m, d, outMsg{all: true})
}

// SendAbout sends m to the clients for which entity about is relevant: an
// entity-scoped event (a hit, an explosion, a line of the kill feed). A
// client that does not see the entity never gets it; one that sees it gets
// it after the entity's spawn, even when the entity was spawned this tick.
// An entity despawned after the call (a kill) still counts for the clients
// that held it. about must be replicated (have components.Replicated).
func (e *ServerEndpoint[T]) SendAbout(about arche.Entity, m T, d Delivery) error {
	o := outMsg{scoped: true}
	if slot, ok := e.s.slots.Of(about); ok {
		o.slot, o.gen, o.resolved = slot, e.s.slots.Infos[slot].Gen, true
	} else if e.s.replicatedPending(about) {
		o.about = about
	} else {
		return fmt.Errorf("replication: %s about entity %v: not a replicated entity", e.plan.Name, about)
	}
	return queueMessage(e.s, e.plan, &m, d, o)
}

// Received iterates over the messages of type T that clients sent, taken
// in by the last [Server.Receive] (the game's systems read them in the
// same tick). Messages naming a stale or unknown entity, or one the sender
// does not see, are not among them.
func (e *ServerEndpoint[T]) Received() iter.Seq[Message[T]] { return e.received() }

// Handle calls fn for each message of type T a client sends, during
// [Server.Receive], in arrival order (clients in ClientID order), after its
// references resolved.
func (e *ServerEndpoint[T]) Handle(fn func(Message[T])) { e.handlers = append(e.handlers, fn) }

// MaxServerMessages bounds the messages a server queues between two Sends
// (a game that queues without sending fails instead of growing without
// bound).
const MaxServerMessages = 1 << 16

// replicatedPending reports whether e is alive and replicated but has no
// slot yet (it was created since the last Send).
func (s *Server) replicatedPending(e arche.Entity) bool {
	return !e.IsZero() && s.world.Alive(e) && s.world.Has(e, s.ids.rep)
}

// serverMsgs is the server's game-message state: the endpoints, this
// tick's outgoing messages and the limits on what clients send.
type serverMsgs struct {
	plans  []*schema.Plan
	idBits uint
	eps    []inbox // by message id; nil: the game has no endpoint for it

	out    []outMsg
	lanes  []uint64     // the out messages' quantized lanes
	refs   []pendingRef // references to entities that had no slot yet
	bodies bitio.Writer // the out messages' encodings, each byte-aligned (prepare)
	batch  wire.MessageWriter
	buf    []byte // the batch's message
	scoped int    // scoped out messages
	unrel  int    // unreliable out messages
	body   []byte // bodies' bytes, after prepare (read by the workers)
	// sectionFn is Server.sectionFor and resolveFn resolveFrom's, made
	// once; from is the client whose messages are being delivered.
	sectionFn func(p *peer.Peer, sw *wire.SectionWriter, dst []byte) ([]byte, int, int)
	resolveFn func(*components.Ref) (bool, string)
	from      *remote
	s         *Server
	// the pending delivery of a batch or section (deliverAllowed)
	allowed int
	tick    uint32
	onMsg   func(tick uint32, p *schema.Plan, lanes []uint64) error
	onSec   func(p *schema.Plan, lanes []uint64) error

	scratch []uint64
}

// clientMsgState is what the server keeps of one client's messages.
type clientMsgState struct {
	msgRate  msgRate
	msgBytes int    // batch bytes taken in by this Receive
	msgHeld  []bool // by out message: p held a scoped message's entity before this tick
	// seq is the newest message section taken (seqSeen: one was)
	seq     uint16
	seqSeen bool
}

// outMsg is one queued server message: its plan and lanes, who gets it,
// and (after prepare) its encoding.
type outMsg struct {
	plan     *schema.Plan
	to       ClientID // a client; 0 with all or scoped
	all      bool
	scoped   bool
	about    arche.Entity // scoped, until it has a slot
	slot     uint32       // scoped: the entity's slot and generation
	gen      uint32
	resolved bool // scoped: slot and gen are set
	unrel    bool // Unreliable: in the tick's datagrams
	held     bool // scoped: a client that held the slot before this tick held this entity
	lane0    int
	body0    int // byte offset in bodies
	nbits    int
}

// pendingRef is a reference lane of an out message whose entity had no slot
// when it was queued.
type pendingRef struct {
	lane int // in serverMsgs.lanes
	e    arche.Entity
}

func (m *serverMsgs) init(s *Server, reg *schema.Registry) {
	m.sectionFn, m.s = s.sectionFor, s
	m.resolveFn = func(r *components.Ref) (bool, string) { return s.resolveFor(m.from, r) }
	m.onMsg = func(tick uint32, p *schema.Plan, lanes []uint64) error {
		m.tick = tick
		return m.onSec(p, lanes)
	}
	m.onSec = func(p *schema.Plan, lanes []uint64) error {
		if m.allowed > 0 {
			m.allowed--
			m.deliver(m.s, m.from, m.tick, p, lanes)
		}
		return nil
	}
	m.plans = reg.Messages()
	m.idBits = wire.IDBits(len(m.plans))
	m.eps = make([]inbox, len(m.plans))
	m.scratch = make([]uint64, wire.MaxMessageLanes(m.plans))
}

// queueMessage quantizes v (of p's type) into this tick's out messages,
// for o's receivers.
func queueMessage[T any](s *Server, p *schema.Plan, v *T, d Delivery, o outMsg) error {
	if err := d.check(); err != nil {
		return err
	}
	m := &s.msgs
	if len(m.out) >= MaxServerMessages {
		return fmt.Errorf("replication: %s not queued: %d messages wait for the next Server.Send (MaxServerMessages)", p.Name, len(m.out))
	}
	nrefs := len(m.refs)
	for _, f := range p.Refs() {
		r := refAt(v, f.Offset)
		r.ID, r.Set = components.NetID{}, false
		switch {
		case r.Entity.IsZero():
		case s.netIDInto(r):
		case s.replicatedPending(r.Entity):
			r.Set = true // (its lane is set in prepare)
			m.refs = append(m.refs, pendingRef{lane: len(m.lanes) + f.Lane, e: r.Entity})
		default:
			m.refs = m.refs[:nrefs]
			return fmt.Errorf("replication: %s names entity %v, which is not replicated", p.Name, r.Entity)
		}
	}
	o.plan, o.lane0, o.unrel = p, len(m.lanes), d == Unreliable
	if o.unrel {
		m.unrel++
	}
	m.lanes = slices.Grow(m.lanes, p.NumLanes())[:o.lane0+p.NumLanes()]
	schema.QuantizeValue(p, v, m.lanes[o.lane0:])
	if o.scoped {
		m.scoped++
	}
	m.out = append(m.out, o)
	return nil
}

// netIDInto sets r's ID from its entity's slot, if it has one.
func (s *Server) netIDInto(r *components.Ref) bool {
	id, ok := s.NetID(r.Entity)
	if ok {
		r.ID, r.Set = id, true
	}
	return ok
}

// prepare resolves what waited for this tick's slots (after capture) and
// encodes every out message once.
func (m *serverMsgs) prepare(s *Server) {
	if len(m.out) == 0 {
		return
	}
	for _, r := range m.refs {
		m.lanes[r.lane] = schema.RefNone // (removed before the Send)
		if id, ok := s.NetID(r.e); ok {
			m.lanes[r.lane] = schema.RefLane(id.Handle, id.Gen)
		}
	}
	m.bodies.Reset(m.bodies.Bytes()[:0])
	for i := range m.out {
		o := &m.out[i]
		if o.scoped {
			if !o.resolved {
				slot, ok := s.slots.Of(o.about)
				if !ok {
					o.scoped, o.to = false, 0 // never replicated: nobody sees it
					continue
				}
				o.slot, o.gen, o.resolved = slot, s.slots.Infos[slot].Gen, true
			}
			gen, alive := s.slots.Before(o.slot)
			o.held = alive && gen == o.gen
		}
		o.body0 = len(m.bodies.Bytes())
		wire.MessageBody(&m.bodies, o.plan, m.idBits, m.lanes[o.lane0:o.lane0+o.plan.NumLanes()])
		o.nbits = m.bodies.BitLen() - 8*o.body0
		m.bodies.Bytes() // (pad: the next body starts on a byte)
	}
	m.body = m.bodies.Bytes()
}

// planPeer notes, for each scoped message, whether client p held its
// entity before this tick's spawns and despawns (p.msgHeld), and has p's
// plan ask for its message section when there are unreliable messages.
func (m *serverMsgs) planPeer(p *remote) {
	p.msgHeld = p.msgHeld[:0]
	if m.unrel > 0 {
		p.plan.Messages = m.sectionFn
	}
	if m.scoped == 0 {
		return
	}
	for i := range m.out {
		o := &m.out[i]
		p.msgHeld = append(p.msgHeld, o.scoped && o.held && p.Spawned.Has(o.slot))
	}
}

// flushPeer sends p this tick's messages for it, after its spawns (in
// batches of at most wire.MaxBatchMessages that fit its connection).
func (m *serverMsgs) flushPeer(s *Server, p *remote) error {
	if len(m.out) == 0 {
		return nil
	}
	maxLen := p.conn.MaxMessageSize() - 16 // (kind, tick and count)
	body := m.body
	m.batch.Reset()
	for i := range m.out {
		o := &m.out[i]
		if o.unrel || !m.reaches(s, p, i) {
			continue
		}
		if n := m.batch.Len(); n == wire.MaxBatchMessages || (n > 0 && m.batch.Bytes()+(o.nbits+7)/8 > maxLen) {
			if err := m.sendBatch(s, p); err != nil {
				return err
			}
		}
		m.batch.Add(body[o.body0:], o.nbits)
	}
	return m.sendBatch(s, p)
}

// reaches reports whether out message i is for client c: to it, to
// everyone, or about an entity c sees after its spawns of this tick (or
// held before them).
func (m *serverMsgs) reaches(s *Server, c *remote, i int) bool {
	o := &m.out[i]
	switch {
	case o.all, o.to == c.ID:
		return true
	case o.scoped:
		si := &s.slots.Infos[o.slot]
		return si.Alive && si.Gen == o.gen && c.Spawned.Has(o.slot) || i < len(c.msgHeld) && c.msgHeld[i]
	}
	return false
}

// sectionFor returns client p's message section of this tick's unreliable
// messages (on a worker: it reads the server and writes only sw and dst),
// with the count in it and of those that did not fit.
func (s *Server) sectionFor(p *peer.Peer, sw *wire.SectionWriter, dst []byte) ([]byte, int, int) {
	m, c := &s.msgs, s.clients[p.ID]
	sw.Reset()
	left := 0
	for i := range m.out {
		o := &m.out[i]
		if !o.unrel || !m.reaches(s, c, i) {
			continue
		}
		if !sw.Fits(o.nbits, false) {
			left++
			continue
		}
		sw.Add(m.body[o.body0:], o.nbits)
	}
	return sw.Append(dst, false, 0), sw.Len(), left
}

// sendBatch sends the batch built for p, if any, and empties it.
func (m *serverMsgs) sendBatch(s *Server, p *remote) error {
	n := m.batch.Len()
	if n == 0 {
		return nil
	}
	m.buf = m.batch.Append(m.buf[:0], wire.KindMessages, s.tick)
	m.batch.Reset()
	if err := s.sendReliable(p, m.buf); err != nil {
		return err
	}
	s.Stats.MessagesOut += uint64(n)
	s.Stats.MessageBytes += uint64(len(m.buf))
	return nil
}

// endTick forgets this tick's out messages.
func (m *serverMsgs) endTick() {
	clear(m.out)
	m.out, m.lanes, m.refs, m.scoped, m.unrel = m.out[:0], m.lanes[:0], m.refs[:0], 0, 0
}

// beginReceive forgets the messages the last Receive took in.
func (m *serverMsgs) beginReceive() {
	for _, ep := range m.eps {
		if ep != nil {
			ep.reset()
		}
	}
}

// errMessageFlood and errMessageSize tag the errors that close a client
// with transport.CodeFlood and CodeMessageTooLarge.
var (
	errMessageFlood = errors.New("message flood")
	errMessageSize  = errors.New("message too large")
)

// msgRate is a client's message allowance: a token bucket of
// Limits.MaxMessagesPerSecond refilled continuously (a burst of a second's
// worth), and the messages over it in the current one-second window.
type msgRate struct {
	tokens float64
	last   time.Time
	window time.Time
	over   int
}

// take takes n messages' tokens at now and returns how many were allowed.
func (r *msgRate) take(n int, now time.Time, perSec int) int {
	if r.last.IsZero() {
		r.tokens, r.last, r.window = float64(perSec), now, now
	}
	if dt := now.Sub(r.last); dt > 0 {
		r.tokens = min(float64(perSec), r.tokens+dt.Seconds()*float64(perSec))
		r.last = now
	}
	if now.Sub(r.window) >= time.Second {
		r.window, r.over = now, 0
	}
	ok := min(n, int(r.tokens))
	r.tokens -= float64(ok)
	r.over += n - ok
	return ok
}

// receive takes one reliable message batch from client c: it checks it
// whole, then hands each message within c's allowance to its endpoint,
// refusing those with a reference c may not name. An error closes c.
func (m *serverMsgs) receive(s *Server, c *remote, b []byte, now time.Time) error {
	if l := s.cfg.Limits.MaxMessageBytes; len(b) > l {
		return fmt.Errorf("%w: a message batch of %d bytes (ServerConfig.Limits.MaxMessageBytes %d)", errMessageSize, len(b), l)
	}
	_, n, err := wire.ParseMessages(b, wire.KindClientMessages, m.plans, m.scratch, nil)
	if err != nil {
		return err
	}
	allowed, err := m.admit(s, c, n, len(b), now)
	if err != nil || allowed == 0 {
		return err
	}
	m.from, m.allowed = c, allowed
	_, _, err = wire.ParseMessages(b, wire.KindClientMessages, m.plans, m.scratch, m.onMsg)
	m.from = nil
	return err
}

// receiveSection takes the message section of a client datagram that
// acked tick: once (by its seq), and none older than the newest taken.
func (m *serverMsgs) receiveSection(s *Server, c *remote, sec []byte, tick uint32, now time.Time) error {
	seq, n, err := wire.ParseSection(sec, true, m.plans, m.scratch, nil)
	if err != nil {
		return err
	}
	if c.seqSeen && int16(seq-c.seq) <= 0 {
		s.Stats.MessagesStale += uint64(n) // a duplicate, or overtaken
		return nil
	}
	c.seq, c.seqSeen = seq, true
	allowed, err := m.admit(s, c, n, len(sec), now)
	if err != nil || allowed == 0 {
		return err
	}
	m.from, m.allowed, m.tick = c, allowed, tick
	_, _, err = wire.ParseSection(sec, true, m.plans, m.scratch, m.onSec)
	m.from = nil
	return err
}

// admit counts n messages of size bytes from c against its allowance and
// returns how many it may deliver; a flood is an error.
func (m *serverMsgs) admit(s *Server, c *remote, n, size int, now time.Time) (int, error) {
	l := &s.cfg.Limits
	allowed := c.msgRate.take(n, now, l.MaxMessagesPerSecond)
	if c.msgRate.over > l.MaxMessagesPerSecond {
		return 0, fmt.Errorf("%w: %d messages over ServerConfig.Limits.MaxMessagesPerSecond (%d) within a second", errMessageFlood, c.msgRate.over, l.MaxMessagesPerSecond)
	}
	s.Stats.MessagesIn += uint64(n)
	s.Stats.MessagesDropped += uint64(n - allowed)
	if c.msgBytes += size; c.msgBytes > l.MaxQueuedMessageBytes {
		s.Stats.MessagesDropped += uint64(allowed)
		return 0, nil
	}
	return allowed, nil
}

// deliver hands one message of client c to its endpoint, which refuses it
// if a reference does not resolve for c.
func (m *serverMsgs) deliver(s *Server, c *remote, tick uint32, p *schema.Plan, lanes []uint64) {
	ep := m.eps[p.ID]
	if ep == nil {
		s.Stats.MessagesUnhandled++
		return
	}
	if ok, why := ep.deliver(c.ID, tick, lanes, m.resolveFn); !ok {
		s.Stats.MessagesRefused++
		s.cfg.Logger.Debug("archenet: client message refused", "client", c.ID, "message", p.Name, "reason", why)
	}
}

// resolveFor resolves a reference in client c's message to the live
// entity, or refuses it: stale (the generation moved on), never spawned, or
// not relevant to c (it was never told of the entity).
func (s *Server) resolveFor(c *remote, r *components.Ref) (bool, string) {
	if !r.Set {
		return true, ""
	}
	e, ok := s.Resolve(r.ID)
	if !ok {
		return false, fmt.Sprintf("reference %#x/%d names no live entity (stale or never spawned)", r.ID.Handle, r.ID.Gen)
	}
	if !c.Spawned.Has(r.ID.Index()) {
		return false, fmt.Sprintf("reference %#x/%d names an entity the client does not see", r.ID.Handle, r.ID.Gen)
	}
	r.Entity = e
	return true, ""
}

// closeCode is the close code for an error of a client's messages.
func closeCode(err error) transport.CloseCode {
	switch {
	case errors.Is(err, errMessageFlood):
		return transport.CodeFlood
	case errors.Is(err, errMessageSize):
		return transport.CodeMessageTooLarge
	}
	return transport.CodeProtocolError
}
