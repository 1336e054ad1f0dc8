package replication

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	"reflect"
	"time"
	"unsafe"

	"github.com/archenet/archenet/components"
	anecs "github.com/archenet/archenet/ecs"
	"github.com/archenet/archenet/replication/schema"
	"github.com/archenet/archenet/replication/snapshot"
	"github.com/archenet/archenet/transport"
	"github.com/mlange-42/arche/ecs"
	"github.com/mlange-42/arche/ecs/event"
)

// ClientID identifies a connected client (1..254); 0 is the server.
type ClientID = uint8

// ServerConfig configures a [Server]. Every zero value has a documented
// default.
type ServerConfig struct {
	// Registry holds the replicated component types. Required.
	Registry *schema.Registry
	// NetRate is the number of net ticks per second (snapshot rate). 0: 30.
	NetRate int
	// NetDivisor is the number of simulation ticks per net tick
	// (ecs.Config.NetDivisor). The Welcome carries it, so clients can turn
	// snapshot ticks into simulation ticks (Client.SimTick). 0: 1.
	NetDivisor int
	// Tick, if set, names the net tick each Send builds, e.g.
	// func() uint32 { return sched.Info().NetTick }, so that snapshot ticks
	// are the simulation's net ticks even for a server created after the
	// simulation started. The first Send takes its number from it; Send
	// must then run once per net tick: a number that is not the previous
	// one plus one is logged and replaced by it. Nil: net ticks count Send
	// calls from 1.
	Tick func() uint32
	// Depth is the snapshot ring depth in net ticks. 0: 32.
	Depth int
	// MTU is the largest snapshot datagram. 0: 1200 bytes.
	MTU int
	// MaxBytesPerSecond caps each client's snapshot bandwidth; the adaptive
	// budget moves below it. 0: 512 KiB/s (4 Mbit/s), enough for every
	// change of a busy physics scene of a few hundred bodies at 60 Hz; a
	// client's share is what its link carries without loss or queueing.
	MaxBytesPerSecond int
	// MinBytesPerSecond is the floor of the adaptive budget: how far it goes
	// down on a congested link (and during an outage). A link that is fine —
	// jitter, reordering and standing random loss included — never brings
	// the budget near it: only rising loss or a standing queue do. 0: 4 KiB/s
	// (32 kbit/s), so that even a very slow link carries the most important
	// changes without a standing queue.
	MinBytesPerSecond int
	// MaxClients bounds connected clients (≤ 254). 0: 64.
	MaxClients int
	// Authenticator, if set, decides whether a client may join (after the
	// version and protocol-hash checks, and only while the server is not
	// full). It runs on a goroutine of its own, never on the simulation's,
	// with a context that ends at the client's HandshakeTimeout; a client
	// whose authentication has not finished by then is rejected. Nil:
	// everyone may.
	Authenticator transport.Authenticator
	// Interest limits what each client receives. Nil: every entity.
	Interest *Interest
	// HandshakeTimeout drops connections that are not through the handshake
	// (Hello received, Authenticator done) in time. 0: 5 s.
	HandshakeTimeout time.Duration
	// MaxHandshakes bounds connections in the handshake at once (accepted,
	// not yet welcomed); more are refused at once with "server busy", so a
	// flood of connections that never say Hello holds bounded memory. 0: 256.
	MaxHandshakes int
	// Input receives the input section of each client datagram (package
	// input decodes it). A returned error drops that client with the error
	// as the reason. Nil: input sections are ignored.
	Input func(c ClientID, ackTick uint32, section []byte) error
	// InputAck, if set, returns the newest input tick the server applied for
	// a client; it rides in that client's snapshot datagrams (see
	// Client.InputAck) so predicted entities reconcile at the right tick.
	InputAck func(c ClientID) (tick uint32, ok bool)
	// InputFeedback, if set, returns a client's input feedback, e.g. from
	// input.Log.Feedback: the newest input tick the server holds and the
	// depth (ticks of input held beyond the one consumed, negative when
	// inputs arrive late). It is called once per snapshot datagram built for
	// the client, when InputAck reports a tick, and rides along with it
	// (Client.InputReport) for the client's input sender (Sender.Ack) and
	// clock (TickSync.ObserveFeedback).
	InputFeedback func(c ClientID) (held uint32, depth int, ok bool)
	// OnConnect and OnDisconnect, if set, are called when a client completes
	// the handshake and when it is gone (with the reason).
	OnConnect    func(c ClientID)
	OnDisconnect func(c ClientID, reason error)
	// Now is the clock for RTT and timeouts. Nil: time.Now.
	Now func() time.Time
	// Logger receives connection events. Nil: slog.Default().
	Logger *slog.Logger
}

func (c *ServerConfig) defaults() error {
	if c.Registry == nil {
		return errors.New("replication: ServerConfig.Registry is required")
	}
	if c.NetRate <= 0 {
		c.NetRate = 30
	}
	if c.NetRate > 1<<16-1 {
		return fmt.Errorf("replication: NetRate %d > 65535", c.NetRate)
	}
	if c.NetDivisor <= 0 {
		c.NetDivisor = 1
	}
	if c.NetDivisor > 1<<16-1 {
		return fmt.Errorf("replication: NetDivisor %d > 65535", c.NetDivisor)
	}
	if c.Depth <= 0 {
		c.Depth = snapshot.DefaultDepth
	}
	if c.Depth > 128 {
		return fmt.Errorf("replication: Depth %d > 128", c.Depth)
	}
	if c.MTU <= 0 {
		c.MTU = snapshot.DefaultMTU
	}
	if c.MaxBytesPerSecond <= 0 {
		c.MaxBytesPerSecond = DefaultMaxBytesPerSecond
	}
	if c.MinBytesPerSecond <= 0 {
		c.MinBytesPerSecond = DefaultMinBytesPerSecond
	}
	c.MinBytesPerSecond = min(c.MinBytesPerSecond, c.MaxBytesPerSecond)
	if c.MaxClients <= 0 {
		c.MaxClients = 64
	}
	c.MaxClients = min(c.MaxClients, 254)
	if c.HandshakeTimeout <= 0 {
		c.HandshakeTimeout = 5 * time.Second
	}
	if c.MaxHandshakes <= 0 {
		c.MaxHandshakes = 256
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	// Connection events can come in floods (hostile peers): each kind of
	// message is rate-limited, and the count of suppressed ones is reported.
	c.Logger = slog.New(transport.RateLimit(c.Logger.Handler(), 10, time.Second))
	return nil
}

// Defaults of the adaptive per-client budget (ServerConfig).
const (
	DefaultMaxBytesPerSecond = 512 << 10
	DefaultMinBytesPerSecond = 4 << 10
)

// slotInfo is the server's record of one net slot.
type slotInfo struct {
	entity ecs.Entity
	gen    uint32
	meta   snapshot.Meta
	alive  bool
	dirty  bool // MarkDirty since the last frame
	rep    components.Replicated
}

// Server replicates an arche world to the clients of a transport listener.
// Add [Server.ReceiveSystem] first and [Server.SendSystem] last to the
// server's scheduler (as net-tick systems), or call [Server.Receive] and
// [Server.Send] yourself once per net tick. Not safe for concurrent use;
// everything runs on the simulation goroutine.
type Server struct {
	cfg      ServerConfig
	world    *ecs.World
	listener transport.Listener
	plans    []*schema.Plan
	compIDs  []ecs.ID
	idRep    ecs.ID
	idOwner  ecs.ID
	idTrans  ecs.ID
	hasTrans bool
	transPl  *schema.Plan

	snap *snapshot.World
	enc  *snapshot.Encoder
	tick uint32
	// tickWarned: a ServerConfig.Tick mismatch was logged.
	tickWarned bool

	slots    []slotInfo
	free     []uint32
	byEntity map[ecs.Entity]uint32
	touched  map[ecs.Entity]struct{}
	order    []ecs.Entity // touched entities in event order (deterministic)
	relayout []uint32     // slots whose gen or set changed this tick
	weights  []float32
	ptrs     []unsafe.Pointer
	alive    snapshot.Bitset

	clients  []*serverClient // index = ClientID
	pending  []*pendingConn
	closing  []closingConn
	authing  int // pending connections whose Authenticator runs
	nextID   int
	pkts     snapshot.Packets
	msgBuf   []byte
	spawnW   spawnWriter
	interest *interestGrid

	// Stats since start.
	Stats ServerStats
}

// ServerStats are cumulative server counters.
type ServerStats struct {
	Connected, Disconnected, Rejected int
	// HandshakeTimeouts counts connections closed because they were not
	// through the handshake within HandshakeTimeout (also in Rejected).
	HandshakeTimeouts int
	// Busy counts connections refused because MaxHandshakes were in
	// progress.
	Busy int
	// BacklogDrops counts clients disconnected because they did not take
	// reliable messages (transport.CodeSendBacklog; also in Disconnected).
	BacklogDrops              int
	SnapshotBytes, SpawnBytes uint64
	// SnapshotDatagrams counts snapshot datagrams sent (a tick may take
	// several per client).
	SnapshotDatagrams uint64
	// SnapshotHeaderBits counts the bits of the snapshot datagrams' kind
	// bytes and headers: the per-datagram overhead.
	SnapshotHeaderBits uint64
	// Deferred counts changed records a client's budget left for a later
	// tick (summed over clients and ticks).
	Deferred                 uint64
	Spawns, Despawns         uint64
	BuildFrame, BuildClients time.Duration // time in frame building / per-client work
}

// NewServer attaches replication to world, serving clients that connect
// through l (nil: add connections with [Server.AddConn]). It installs an
// arche listener through archenet's listener fan-out (ecs.AddListener), so
// the game's own listeners keep working.
func NewServer(world *ecs.World, l transport.Listener, cfg ServerConfig) (*Server, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	s := &Server{
		cfg: cfg, world: world, listener: l, plans: cfg.Registry.Plans(),
		byEntity: map[ecs.Entity]uint32{}, touched: map[ecs.Entity]struct{}{},
		clients: make([]*serverClient, 256), nextID: 1,
	}
	for _, p := range s.plans {
		s.compIDs = append(s.compIDs, ecs.TypeID(world, p.Type))
	}
	s.idRep = ecs.ComponentID[components.Replicated](world)
	s.idOwner = ecs.ComponentID[components.Owner](world)
	if p := cfg.Registry.ByType(reflect.TypeFor[components.Transform]()); p != nil {
		s.hasTrans, s.transPl = true, p
		s.idTrans = ecs.ComponentID[components.Transform](world)
	}
	s.snap = snapshot.NewWorld(cfg.Registry, cfg.Depth)
	s.enc = snapshot.NewEncoder(s.snap)
	if cfg.Interest != nil {
		if err := cfg.Interest.validate(); err != nil {
			return nil, err
		}
		if !s.hasTrans {
			return nil, errors.New("replication: Interest needs components.Transform in the registry")
		}
		s.interest = newInterestGrid(cfg.Interest)
	}
	anecs.AddListener(world, s)
	// Entities that exist already are replicated too.
	q := world.Query(ecs.All(s.idRep))
	for q.Next() {
		s.touch(q.Entity())
	}
	return s, nil
}

// Notify implements arche's Listener: structural changes are collected and
// applied at the next Send.
func (s *Server) Notify(_ *ecs.World, e ecs.EntityEvent) { s.touch(e.Entity) }

func (s *Server) touch(e ecs.Entity) {
	if _, ok := s.touched[e]; !ok {
		s.touched[e] = struct{}{}
		s.order = append(s.order, e)
	}
}

// Subscriptions implements arche's Listener.
func (s *Server) Subscriptions() event.Subscription {
	return event.EntityCreated | event.EntityRemoved | event.ComponentAdded | event.ComponentRemoved
}

// Components implements arche's Listener: all components (the server
// filters on Replicated itself, so adding any replicated component to a
// replicated entity is seen).
func (s *Server) Components() *ecs.Mask { return nil }

// Tick returns the current net tick (the tick of the newest snapshot).
func (s *Server) Tick() uint32 { return s.tick }

// Registry returns the component registry.
func (s *Server) Registry() *schema.Registry { return s.cfg.Registry }

// NetID returns the network identity of a replicated entity.
func (s *Server) NetID(e ecs.Entity) (components.NetID, bool) {
	slot, ok := s.byEntity[e]
	if !ok {
		return components.NetID{}, false
	}
	si := &s.slots[slot]
	return components.NetID{Handle: components.MakeHandle(si.meta.Owner, slot), Gen: si.gen}, true
}

// Resolve returns the entity a client names by net handle and generation.
// A stale reference (the slot was reused, or the entity is gone) or a
// handle whose owner bits disagree is rejected: ok is false and the caller
// must not change any state.
func (s *Server) Resolve(id components.NetID) (ecs.Entity, bool) {
	slot := id.Index()
	if int(slot) >= len(s.slots) {
		return ecs.Entity{}, false
	}
	si := &s.slots[slot]
	if !si.alive || si.gen != id.Gen || si.meta.Owner != id.Owner() || !s.world.Alive(si.entity) {
		return ecs.Entity{}, false
	}
	return si.entity, true
}

// MarkDirty tells the server that a dormant entity's state changed; it is
// re-read at the next snapshot (push model). No effect on other entities,
// which are compared every tick.
func (s *Server) MarkDirty(e ecs.Entity) {
	if slot, ok := s.byEntity[e]; ok {
		s.slots[slot].dirty = true
	}
}

// AddConn adds a connection that was accepted elsewhere; it goes through
// the handshake like an accepted one.
func (s *Server) AddConn(c transport.Conn) {
	s.pending = append(s.pending, &pendingConn{conn: c, since: s.cfg.Now()})
}

// Clients returns the ids of connected clients (after the handshake).
func (s *Server) Clients() []ClientID {
	var ids []ClientID
	for id, c := range s.clients {
		if c != nil {
			ids = append(ids, ClientID(id))
		}
	}
	return ids
}

// ClientInfo is a snapshot of one client's replication state.
type ClientInfo struct {
	ID    ClientID
	Ready bool
	// RTT is measured from snapshot send to ack processing, so it includes
	// up to a net tick of waiting on each side; TransportRTT is the
	// transport's own estimate (0 if it has none).
	RTT               time.Duration
	TransportRTT      time.Duration
	Loss              float64 // fraction of snapshots not acked (recent window)
	BytesPerSecond    int     // current adaptive budget
	SnapshotBytes     uint64
	SpawnBytes        uint64
	Spawned, Relevant int
	NewestAck         uint32
	// Transport is the connection's own counters: datagrams dropped before
	// they left (a stalled path), the reliable backlog, ...
	Transport transport.Stats
}

// Client returns the replication state of client id.
func (s *Server) Client(id ClientID) (ClientInfo, bool) {
	c := s.clients[id]
	if c == nil {
		return ClientInfo{}, false
	}
	ts := c.conn.Stats()
	return ClientInfo{ID: id, Ready: c.ready, RTT: c.rtt.srtt, TransportRTT: ts.RTT, Loss: c.budget.loss, BytesPerSecond: c.snap.Rate(),
		SnapshotBytes: c.snapBytes, SpawnBytes: c.spawnBytes, Spawned: c.spawned.Count(), Relevant: c.relevant.Count(),
		NewestAck: c.snap.NewestAck, Transport: ts}, true
}

// Kick disconnects a client with a reason.
func (s *Server) Kick(id ClientID, reason string) {
	if c := s.clients[id]; c != nil {
		s.drop(c, transport.CodeApplication, reason)
	}
}

// Close disconnects every client and closes the listener.
func (s *Server) Close() error {
	for _, c := range s.clients {
		if c != nil {
			s.drop(c, transport.CodeNormal, "server closing")
		}
	}
	for _, p := range s.pending {
		p.stopAuth()
		_ = p.conn.CloseWithReason(transport.CodeNormal, "server closing")
	}
	s.pending = nil
	s.authing = 0
	for _, cc := range s.closing {
		_ = cc.conn.CloseWithReason(cc.code, cc.reason)
	}
	s.closing = nil
	if s.listener != nil {
		return s.listener.Close()
	}
	return nil
}

func (s *Server) drop(c *serverClient, code transport.CloseCode, reason string) {
	level := slog.LevelWarn
	if code == transport.CodeNormal {
		level = slog.LevelInfo
	}
	s.cfg.Logger.Log(context.Background(), level, "archenet: client dropped", "client", c.id, "code", code, "reason", reason)
	_ = c.conn.CloseWithReason(code, reason)
	s.gone(c, &transport.CloseError{Code: code, Reason: reason})
}

// sendFailed handles a failed send to c: a connection that closed (the
// transport gave up on a peer that does not take its reliable messages, or
// the peer went away) is gone; any other failure drops the client.
func (s *Server) sendFailed(c *serverClient, err error) {
	var ce *transport.CloseError
	if !errors.As(err, &ce) {
		s.drop(c, transport.CodeInternal, err.Error())
		return
	}
	s.disconnected(c, err)
}

// disconnected ends c, whose connection closed with err.
func (s *Server) disconnected(c *serverClient, err error) {
	var ce *transport.CloseError
	if errors.As(err, &ce) && ce.Code == transport.CodeSendBacklog {
		s.cfg.Logger.Warn("archenet: client dropped", "client", c.id, "code", ce.Code, "reason", ce.Reason)
	} else {
		s.cfg.Logger.Info("archenet: client disconnected", "client", c.id, "err", err)
	}
	s.gone(c, err)
}

func (s *Server) gone(c *serverClient, reason error) {
	s.clients[c.id] = nil
	s.Stats.Disconnected++
	var ce *transport.CloseError
	if errors.As(reason, &ce) && ce.Code == transport.CodeSendBacklog {
		s.Stats.BacklogDrops++
	}
	if s.cfg.OnDisconnect != nil {
		s.cfg.OnDisconnect(c.id, reason)
	}
}

// ReceiveSystem returns an ecs.System that runs [Server.Receive]: add it
// first, as a net-tick system.
func (s *Server) ReceiveSystem() anecs.System { return systemFunc{update: s.Receive} }

// SendSystem returns an ecs.System that runs [Server.Send]: add it last,
// as a net-tick system.
func (s *Server) SendSystem() anecs.System {
	return systemFunc{update: s.Send, final: func() { _ = s.Close() }}
}

type systemFunc struct {
	update func()
	final  func()
}

func (f systemFunc) Initialize(*ecs.World) {}
func (f systemFunc) Update(*ecs.World)     { f.update() }
func (f systemFunc) Finalize(*ecs.World) {
	if f.final != nil {
		f.final()
	}
}

// Receive accepts connections, runs handshakes, and drains every client's
// datagrams (acks and inputs) and messages. Call it at the start of a net
// tick.
func (s *Server) Receive() {
	if s.listener != nil {
		for {
			c, ok := s.listener.PollAccept()
			if !ok {
				break
			}
			if len(s.pending) >= s.cfg.MaxHandshakes {
				s.Stats.Busy++
				s.cfg.Logger.Warn("archenet: connection refused: server busy", "remote", c.RemoteAddr(), "handshakes", len(s.pending))
				_ = c.CloseWithReason(transport.CodeRejected, "server busy: too many handshakes in progress")
				continue
			}
			s.AddConn(c)
		}
	}
	s.handshakes()
	now := s.cfg.Now()
	for _, c := range s.clients {
		if c == nil {
			continue
		}
		select {
		case <-c.conn.Done():
			s.disconnected(c, c.conn.Err())
			continue
		default:
		}
		if err := s.receiveClient(c, now); err != nil {
			s.drop(c, transport.CodeProtocolError, err.Error())
		}
	}
}

func (s *Server) receiveClient(c *serverClient, now time.Time) error {
	for n := 0; ; n++ {
		d, ok := c.conn.PollDatagram()
		if !ok {
			break
		}
		ack, rest, err := parseClientHeader(d)
		if err != nil {
			return err
		}
		if ack.Newest != 0 && int32(ack.Newest-s.tick) > 0 {
			return fmt.Errorf("ack of tick %d from the future (server tick %d)", ack.Newest, s.tick)
		}
		c.onAck(&ack, now)
		if len(rest) > 0 && s.cfg.Input != nil {
			if err := s.cfg.Input(c.id, ack.Newest, rest); err != nil {
				return err
			}
		}
	}
	if m, ok := c.conn.PollMessage(); ok {
		return fmt.Errorf("unexpected reliable message of %d bytes (type 0x%02x)", len(m), transport.TypeOf(m))
	}
	return nil
}

// Send applies structural changes, builds this net tick's snapshot frame
// (one pass over replicated entities), and sends every client its spawn and
// despawn messages and its snapshot datagram. Call it at the end of a net
// tick.
// advanceTick numbers the net tick Send builds (see ServerConfig.Tick).
func (s *Server) advanceTick() {
	next := s.tick + 1
	if s.cfg.Tick != nil {
		t := s.cfg.Tick()
		switch {
		case s.tick == 0 && t != 0:
			next = t // the first Send: align with the simulation
		case t != next && !s.tickWarned:
			s.tickWarned = true
			s.cfg.Logger.Warn("replication: ServerConfig.Tick did not advance by one net tick per Send; counting instead",
				"tick", t, "expected", next)
		}
	}
	s.tick = next
}

func (s *Server) Send() {
	t0 := time.Now()
	s.advanceTick()
	s.applyStructure()
	s.buildFrame()
	t1 := time.Now()
	s.Stats.BuildFrame += t1.Sub(t0)
	if s.interest != nil {
		if s.interest.due(s.tick) {
			s.interest.rebuild(s)
			s.interest.fresh.Reset()
		}
	}
	now := s.cfg.Now()
	for _, c := range s.clients {
		if c == nil {
			continue
		}
		if err := s.sendClient(c, now); err != nil {
			s.sendFailed(c, err)
		}
	}
	s.snap.EndTick()
	s.relayout = s.relayout[:0]
	s.Stats.BuildClients += time.Since(t1)
}

// applyStructure turns the entities touched by listener events into slot
// allocations, layout changes and frees.
func (s *Server) applyStructure() {
	for _, e := range s.order {
		delete(s.touched, e)
		slot, has := s.byEntity[e]
		if !s.world.Alive(e) || !s.world.Has(e, s.idRep) {
			if has {
				s.freeSlot(slot)
			}
			continue
		}
		set := s.setOf(e)
		if set == 0 {
			if has {
				s.freeSlot(slot)
			}
			continue
		}
		var owner uint8
		if s.world.Has(e, s.idOwner) {
			owner = (*components.Owner)(s.world.Get(e, s.idOwner)).Client
		}
		if !has {
			slot = s.allocSlot(e)
		}
		si := &s.slots[slot]
		m := snapshot.Meta{Gen: si.gen, Owner: owner, Set: set}
		if !has || si.meta != m {
			si.meta = m
			s.relayout = append(s.relayout, slot)
		}
		si.rep = *(*components.Replicated)(s.world.Get(e, s.idRep))
		w := si.rep.Priority
		if w <= 0 {
			w = 1
		}
		s.weights[slot] = w
	}
	s.order = s.order[:0]
}

func (s *Server) setOf(e ecs.Entity) uint64 {
	var set uint64
	for i, id := range s.compIDs {
		if s.world.Has(e, id) {
			set |= 1 << i
		}
	}
	return set
}

func (s *Server) allocSlot(e ecs.Entity) uint32 {
	var slot uint32
	if n := len(s.free); n > 0 {
		slot = s.free[n-1]
		s.free = s.free[:n-1]
		s.slots[slot].gen++ // a reused slot is a new incarnation
	} else {
		slot = uint32(len(s.slots))
		s.slots = append(s.slots, slotInfo{})
		s.weights = append(s.weights, 1)
	}
	si := &s.slots[slot]
	si.entity, si.alive, si.dirty = e, true, true
	s.byEntity[e] = slot
	s.alive.Set(slot)
	if s.interest != nil {
		s.interest.fresh.Set(slot)
	}
	return slot
}

func (s *Server) freeSlot(slot uint32) {
	si := &s.slots[slot]
	delete(s.byEntity, si.entity)
	si.alive = false
	si.entity = ecs.Entity{}
	s.alive.Clear(slot)
	s.free = append(s.free, slot)
	s.relayout = append(s.relayout, slot)
}

// buildFrame runs the one pass over replicated entities.
func (s *Server) buildFrame() {
	s.snap.Begin(s.tick)
	for slot := range s.slots {
		si := &s.slots[slot]
		if !si.alive {
			continue
		}
		m := si.meta
		// Dormant entities and send-rate divisors keep last frame's state.
		if (si.rep.Dormant && !si.dirty) || (si.rep.SendEvery > 1 && (s.tick+uint32(slot))%uint32(si.rep.SendEvery) != 0) {
			if s.snap.Keep(uint32(slot), m) {
				continue
			}
		}
		si.dirty = false
		s.ptrs = s.ptrs[:0]
		for set := m.Set; set != 0; set &= set - 1 {
			s.ptrs = append(s.ptrs, s.world.Get(si.entity, s.compIDs[bits.TrailingZeros64(set)]))
		}
		s.snap.Put(uint32(slot), m, s.ptrs)
	}
	s.snap.Commit()
}
