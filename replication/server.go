package replication

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/ecs"
	"github.com/archenet/archenet/replication/internal/capture"
	"github.com/archenet/archenet/replication/internal/clampwatch"
	"github.com/archenet/archenet/replication/internal/closing"
	"github.com/archenet/archenet/replication/internal/encode"
	"github.com/archenet/archenet/replication/internal/gang"
	"github.com/archenet/archenet/replication/internal/grid"
	"github.com/archenet/archenet/replication/internal/peer"
	"github.com/archenet/archenet/replication/internal/slots"
	"github.com/archenet/archenet/replication/internal/store"
	"github.com/archenet/archenet/replication/internal/wire"
	"github.com/archenet/archenet/replication/schema"
	"github.com/archenet/archenet/transport"
	arche "github.com/mlange-42/arche/ecs"
)

// ClientID identifies a connected client (1..254); 0 is the server.
type ClientID = uint8

// Server replicates an arche world to the clients of a transport listener.
// Add [Server.ReceiveSystem] first and [Server.SendSystem] last to the
// server's scheduler (as net-tick systems), or call [Server.Receive] and
// [Server.Send] yourself once per net tick. Not safe for concurrent use;
// everything runs on the simulation goroutine.
type Server struct {
	cfg      ServerConfig
	world    *arche.World
	listener transport.Listener
	plans    []*schema.Plan
	ids      componentIDs

	ring  *store.Ring   // the frames every client's datagrams are built from
	group *encode.Group // what the workers' encoders share
	tick  uint32
	// tickWarned: a ServerConfig.Tick mismatch was logged.
	tickWarned bool

	slots    *slots.Table     // net slot ↔ entity, generations, layout changes, spawn keys
	capture  *capture.Capture // reads the world into the slot table and the ring
	interest *grid.Grid       // nil without ServerConfig.Interest

	clients []*remote   // index = ClientID
	ended   []endedSeat // seats that ended recently (server_seats.go)
	// seatSerial numbers the seats given (ClientInfo.Seat)
	seatSerial uint64
	hs         handshakes // connections in the handshake (server_handshake.go)
	// draining: Drain was called; new clients are refused with it.
	draining *transport.CloseError

	msgs   serverMsgs       // game messages (messages_server.go)
	refs   []refComp        // components with references (refs.go)
	rels   []refComp        // relation components (refs.go)
	work   tickWork         // the tick's parallel phases (workers.go)
	clampW clampwatch.Watch // warns of values quantization clamped
	closer closing.Closer   // closes off the tick
	pace   pacing           // liveness of the caller's Receive and Send

	// Stats since start.
	Stats ServerStats
}

// componentIDs are the arche ids of the components the server reads:
// the registered ones (by registry id), Replicated, Owner, and the one
// interest reads positions from (posPl its plan; nil without Interest).
type componentIDs struct {
	comps      []arche.ID
	rep, owner arche.ID
	posPl      *schema.Plan
	pos        arche.ID
}

// pacing is what the server knows of its caller's pace: when Receive last
// ran (and when it warned about it), and whether the step between Receive
// and Send is short enough for Receive to wake the worker helpers.
type pacing struct {
	lastReceive, warnedStall time.Time
	// received: when the last Receive returned (wall clock); earlyWake:
	// the step between it and Send was short, so Receive wakes the worker
	// helpers for Send (see wakeEarly)
	received  time.Time
	earlyWake bool
}

// remote is the server's hold on one client: its connection, which the
// server pumps; its peer, the protocol's state machine (its baselines,
// progress, rate control and counters); its relevance, which the server
// computes; and its plan for the tick.
type remote struct {
	peer.Peer
	conn  transport.Conn
	rel   grid.Relevance
	plan  peer.Plan
	focus components.Vec3 // the game's Interest.Focus, asked in planPeer
	// hasFocus: the game named a focus this tick
	hasFocus bool
	built    atomic.Bool // the peer's output is this tick's (sendPeers)
	seat     seat        // what lets the client come back (server_seats.go)
	clientMsgState
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
	// JoinsEvicted counts welcomed clients that had acknowledged no snapshot
	// for a quarter of the JoinTimeout, dropped to give their slot to a newer
	// client while every slot was taken (also in Disconnected).
	JoinsEvicted int
	// BacklogDrops counts clients disconnected because they did not take
	// reliable messages (transport.CodeSendBacklog; also in Disconnected).
	BacklogDrops int
	// ClosesDropped counts connection closes not run because thousands
	// were already waiting for the transport (whose closes then hang): those
	// connections end by the transport's idle timeout instead.
	ClosesDropped             int
	SnapshotBytes, SpawnBytes uint64
	// SnapshotDatagrams counts snapshot datagrams sent (a tick may take
	// several per client).
	SnapshotDatagrams uint64
	// SnapshotHeaderBits counts the bits of the snapshot datagrams' kind
	// bytes and headers: the per-datagram overhead.
	SnapshotHeaderBits uint64
	// Deferred counts changed records a client's budget left for a later
	// tick (summed over clients and ticks).
	Deferred         uint64
	Spawns, Despawns uint64
	// Compressed counts snapshot datagrams sent zstd-compressed
	// (ServerConfig.Compression).
	Compressed uint64
	// PredictedSpawns counts entities keyed with Server.PredictedSpawn.
	PredictedSpawns          uint64
	BuildFrame, BuildClients time.Duration // time in frame building / per-client work
	// HelperTime is how long the worker helpers (ServerConfig.Workers)
	// were awake, spinning or working, up to their last park: the CPU time
	// they used besides the caller's goroutine. (Process CPU clocks lag
	// for threads that are running on another core when read.)
	HelperTime time.Duration
	// Deltas, Fulls and Removals count the records of each kind sent in
	// snapshot datagrams (summed over clients and ticks).
	Deltas, Fulls, Removals uint64
	// Builds counts the clients' snapshot ticks built (one per client and
	// net tick with datagrams), SharedBuilds those that copied another
	// client's datagrams, built in the same tick for the same view, with
	// their own headers (clients that see the same state: the most when
	// everything is in every view). Where one of the two clients owns an
	// entity with owner-only fields (a player's avatar), the datagrams
	// that carry its records of such entities are written anew.
	Builds, SharedBuilds uint64
	// SharedCandidates counts the clients' snapshot ticks that took
	// another client's records, as above, but whose records of entities
	// with owner-only fields packed into other datagrams: they packed and
	// wrote their own.
	SharedCandidates uint64
	// MessagesOut counts game messages sent (one per receiving client) and
	// MessageBytes the bytes of their batches; MessagesIn counts those
	// clients sent.
	MessagesOut, MessageBytes, MessagesIn uint64
	// MessagesDropped counts client messages over a client's allowance
	// (Limits.MaxMessagesPerSecond, Limits.MaxQueuedMessageBytes);
	// MessagesRefused those naming an entity the sender may not name (stale,
	// unknown, or not relevant to it), which the game never sees;
	// MessagesUnhandled those of a type the server has no endpoint for
	// (ServerMessages).
	MessagesDropped, MessagesRefused, MessagesUnhandled uint64
	// MessagesStale counts unreliable client messages that came twice or
	// after newer ones (not delivered); MessagesUnsent unreliable server
	// messages that found no room in a client's tick (its section full, or
	// its budget left no datagram).
	MessagesStale, MessagesUnsent uint64
	// Suspended counts clients that lost their connection and whose seat
	// the server kept (ServerConfig.OnSuspend); Resumed those that came
	// back to it (ResumesReset of them with their replication started
	// over: a reloaded page, or a client that had not taken what the seat
	// could keep); SeatsExpired seats whose window ran out (also in
	// Disconnected); ResumesRefused resumes refused (also in Rejected).
	Suspended, Resumed, ResumesReset, SeatsExpired, ResumesRefused int
}

// NewServer attaches replication to world, serving clients that connect
// through l (nil: add connections with [Server.AddConn]). It installs an
// arche listener through archenet's listener fan-out (arche.AddListener), so
// the game's own listeners keep working. A server adds itself to its world as
// a resource unless another open one has (it leaves at Close), for the
// helpers that run there
// (arche's ecs.GetResource[replication.Server](world)): input.Authority
// bounds lag compensation by each client's measured round trip from it.
func NewServer(world *arche.World, l transport.Listener, cfg ServerConfig) (*Server, error) {
	cfg, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg: cfg, world: world, listener: l, plans: cfg.Registry.Plans(),
		slots: slots.NewTable(), clients: make([]*remote, 256),
	}
	s.hs.nextID = 1
	s.hs.desk = s.newDesk()
	s.msgs.init(s, cfg.Registry)
	s.refs = refComps(world, cfg.Registry)
	s.rels = relationComps(world, cfg.Registry)
	for _, p := range s.plans {
		s.ids.comps = append(s.ids.comps, arche.TypeID(world, p.Type))
	}
	s.ids.rep = arche.ComponentID[components.Replicated](world)
	s.ids.owner = arche.ComponentID[components.Owner](world)
	s.ring = store.New(cfg.Registry, cfg.Depth)
	s.group = encode.NewGroup(s.ring)
	if s.work.workers, err = newWorkers(&s.cfg, s.group); err != nil {
		return nil, err
	}
	s.work.gang.Start(len(s.work.workers) - 1)
	s.work.readPos = s.readPosition // (once: a method value is a closure)
	if cfg.Interest != nil {
		if err := cfg.Interest.validate(); err != nil {
			return nil, err
		}
		typ := cfg.Interest.Position.Type()
		if s.ids.posPl = cfg.Registry.ByType(typ); s.ids.posPl == nil {
			return nil, fmt.Errorf("replication: Interest reads positions from %s, which is not in the registry (register it, or name the component that holds positions with Interest.Position = replication.PositionOf(...))", typ)
		}
		s.ids.pos = arche.TypeID(world, typ)
		s.interest = grid.New(cfg.Interest.gridConfig())
	}
	ids := capture.IDs{Comps: s.ids.comps, Rep: s.ids.rep, Owner: s.ids.owner, PosID: -1}
	if s.interest != nil {
		ids.PosID, ids.Pos = int(s.ids.posPl.ID), cfg.Interest.Position.at
	}
	parallel := 0
	if len(s.work.workers) > 1 {
		parallel = max(cfg.ParallelFrame, 1)
	}
	s.capture = capture.New(world, ids, s.slots, s.ring, s.interest, &s.work.gang, parallel)
	ecs.AddListener(world, s.capture.Listener())
	// Entities that exist already are replicated too.
	q := world.Query(arche.All(s.ids.rep))
	for q.Next() {
		s.capture.Touch(q.Entity())
	}
	if id := arche.ResourceID[Server](world); !world.Resources().Has(id) {
		world.Resources().Add(id, s)
	}
	return s, nil
}

// Tick returns the current net tick (the tick of the newest snapshot).
func (s *Server) Tick() uint32 { return s.tick }

// Registry returns the component registry.
func (s *Server) Registry() *schema.Registry { return s.cfg.Registry }

// Interest returns the interest configuration (nil without one), e.g. for
// replicationtest.Within.
func (s *Server) Interest() *Interest { return s.cfg.Interest }

// NetID returns the network identity of a replicated entity.
func (s *Server) NetID(e arche.Entity) (components.NetID, bool) {
	slot, ok := s.slots.Of(e)
	if !ok {
		return components.NetID{}, false
	}
	si := &s.slots.Infos[slot]
	return components.NetID{Handle: components.MakeHandle(si.Meta.Owner, slot), Gen: si.Gen}, true
}

// Resolve returns the entity a client names by net handle and generation.
// A stale reference (the slot was reused, or the entity is gone) or a
// handle whose owner bits disagree is rejected: ok is false and the caller
// must not change any state.
func (s *Server) Resolve(id components.NetID) (arche.Entity, bool) {
	slot := id.Index()
	if int(slot) >= len(s.slots.Infos) {
		return arche.Entity{}, false
	}
	si := &s.slots.Infos[slot]
	if !si.Alive || si.Gen != id.Gen || si.Meta.Owner != id.Owner() || !s.world.Alive(si.Entity) {
		return arche.Entity{}, false
	}
	return si.Entity, true
}

// MarkDirty tells the server that a dormant entity's state changed; it is
// re-read at the next snapshot (push model). No effect on other entities,
// which are compared every tick.
func (s *Server) MarkDirty(e arche.Entity) {
	if slot, ok := s.slots.Of(e); ok {
		s.slots.Infos[slot].Dirty = true
	}
}

// AddConn adds a connection that was accepted elsewhere; it goes through
// the handshake like an accepted one.
func (s *Server) AddConn(c transport.Conn) {
	s.hs.desk.Add(c, nil)
}

// AddConnHello adds a connection whose first message, hello, the caller has
// already read from it (a host that routes connections by their Hello,
// package replication/host): the handshake judges hello as if it had just
// arrived. hello must not be modified afterwards. See also
// [transport.HelloListener], which hands connections over this way.
func (s *Server) AddConnHello(c transport.Conn, hello []byte) {
	s.hs.desk.Add(c, hello)
}

// Conn returns the connection of client id (nil if id is not connected):
// e.g. to find what a host learnt about it when it routed it.
func (s *Server) Conn(id ClientID) transport.Conn {
	if c := s.clients[id]; c != nil && !c.seat.suspended {
		return c.conn
	}
	return nil
}

// Clients returns the ids of connected clients (after the handshake; not
// the suspended seats: Suspended).
func (s *Server) Clients() []ClientID {
	var ids []ClientID
	for id, c := range s.clients {
		if c != nil && !c.seat.suspended {
			ids = append(ids, ClientID(id))
		}
	}
	return ids
}

// Suspended returns the ids of the clients whose connection was lost and
// whose seat the server keeps (ServerConfig.OnSuspend).
func (s *Server) Suspended() []ClientID {
	var ids []ClientID
	for id, c := range s.clients {
		if c != nil && c.seat.suspended {
			ids = append(ids, ClientID(id))
		}
	}
	return ids
}

// ClientInfo is a snapshot of one client's replication state.
type ClientInfo struct {
	ID    ClientID
	Ready bool
	// Seat numbers the client's seat among the server's: the same across
	// its resumes, another for the next client of its id (a host's player
	// tracking tells a resume from a leave and a join by it).
	Seat uint64
	// Suspended: the client lost its connection and the server keeps its
	// seat (since SuspendedFor).
	Suspended    bool
	SuspendedFor time.Duration
	// RTT is the transport's smoothed round-trip time, the path's delay
	// (0 if the transport has none).
	RTT time.Duration
	// AckDelay is the smoothed time from sending a snapshot to receiving
	// its ack: RTT plus up to a net tick of waiting on each side (the
	// client acks on its next send, the server reads acks at its next
	// Receive, and takes them in at the Send after it: AckDelay and
	// NewestAck move then). The server's loss detection and congestion
	// control use it.
	AckDelay          time.Duration
	Loss              float64 // fraction of snapshots not acked (recent window)
	BytesPerSecond    int     // current adaptive budget
	SnapshotBytes     uint64
	SpawnBytes        uint64
	Spawned, Relevant int
	NewestAck         uint32
	// Transport is the connection's own counters: datagrams dropped before
	// they left (a stalled path), the reliable backlog, ...
	Transport transport.Stats
	// StateBytes is the memory the server holds for the client's
	// replication: its acked and sent views, spawned set, send history,
	// relevance and the reliable messages it has not said it took.
	StateBytes int
}

// Client returns the replication state of client id.
func (s *Server) Client(id ClientID) (ClientInfo, bool) {
	c := s.clients[id]
	if c == nil {
		return ClientInfo{}, false
	}
	ts := c.conn.Stats()
	loss, _ := c.Rate.Loss()
	var away time.Duration
	if c.seat.suspended {
		away = s.cfg.Now().Sub(c.seat.since)
	}
	return ClientInfo{ID: id, Ready: c.Ready, Seat: c.seat.serial, Suspended: c.seat.suspended, SuspendedFor: away, RTT: ts.RTT, AckDelay: c.RTT.SRTT(), Loss: loss, BytesPerSecond: int(c.Rate.Rate()),
		SnapshotBytes: c.Counters.SnapshotBytes, SpawnBytes: c.Counters.SpawnBytes, Spawned: c.Spawned.Count(), Relevant: c.rel.Relevant.Count(),
		NewestAck: c.Tracker.NewestAck, Transport: ts, StateBytes: c.MemoryBytes() + c.rel.MemoryBytes() + c.seat.log.memoryBytes()}, true
}

// RTT returns the round-trip time the server measured for client id: the
// transport's smoothed RTT where it has one, else the time from sending a
// snapshot to its ack (ClientInfo.AckDelay, which includes up to a net tick
// of waiting on each side); 0 if unknown or id is not connected. Bound what
// a client may claim with it (replication/lagcomp.Rewinds), never with what
// the client reports.
func (s *Server) RTT(id ClientID) time.Duration {
	c := s.clients[id]
	if c == nil {
		return 0
	}
	if rtt := c.conn.Stats().RTT; rtt > 0 {
		return rtt
	}
	return c.RTT.SRTT()
}

// Kick disconnects a client with a reason.
func (s *Server) Kick(id ClientID, reason string) {
	if c := s.clients[id]; c != nil {
		s.drop(c, transport.CodeApplication, reason)
	}
}

// Close disconnects every client and closes the listener:
// CloseWithReason(transport.CodeNormal, "server closing").
func (s *Server) Close() error { return s.CloseWithReason(transport.CodeNormal, "server closing") }

// CloseWithReason disconnects every client with code and reason (clients
// see them in Client.Err), closes the connections in the handshake with
// them too, and closes the listener. It waits for closes queued for a
// transport that may block (not for a transport.CloseStarter's).
func (s *Server) CloseWithReason(code transport.CloseCode, reason string) error {
	defer s.work.gang.Stop()
	if id := arche.ResourceID[Server](s.world); s.world.Resources().Get(id) == s {
		s.world.Resources().Remove(id) // (a server made on the world later takes its place)
	}
	for _, c := range s.clients {
		if c != nil {
			s.drop(c, code, reason)
		}
	}
	s.hs.desk.Close(code, reason)
	s.closer.Wait()
	if s.listener != nil {
		return s.listener.Close()
	}
	return nil
}

// Drain stops admitting clients and tells the connected ones: each is sent
// a drain notice with reason and what is left until deadline (the zero
// time: none), which [Client.Draining] reports; new connections, and those
// still in the handshake when they would be admitted, are refused with
// transport.CodeDraining and "server draining: " + reason. The match goes
// on: the caller ends it when the game is over or at the deadline
// (CloseWithReason with transport.CodeDraining; a host of many matches
// does both, package replication/host). A second Drain notifies again
// with the new reason and deadline.
func (s *Server) Drain(reason string, deadline time.Time) { s.DrainTo("", reason, deadline) }

// DrainTo is Drain with the address where the match goes on (a checkpoint
// of it, Server.Checkpoint, restored there with Restore): its clients are
// told it in the drain notice (DrainNotice.Address), and resume their seats
// there. An address over 256 bytes is not sent.
func (s *Server) DrainTo(address, reason string, deadline time.Time) {
	if len(address) > wire.MaxAddressLen {
		address = ""
	}
	s.draining = &transport.CloseError{Code: transport.CodeDraining, Reason: transport.TruncateReason("server draining: "+reason, transport.MaxReasonLen)}
	var left time.Duration
	if !deadline.IsZero() {
		left = max(deadline.Sub(s.cfg.Now()), time.Millisecond)
	}
	msg := wire.AppendDrain(nil, wire.Drain{Left: left, Reason: reason, Address: address})
	for _, c := range s.clients {
		if c == nil {
			continue
		}
		if err := s.sendReliable(c, msg); err != nil {
			s.sendFailed(c, err)
		}
	}
	s.cfg.Logger.Info("archenet: draining", "reason", reason, "left", left, "clients", s.connected(), "to", address)
}

// Draining reports whether Drain was called.
func (s *Server) Draining() bool { return s.draining != nil }

// connected counts the connected clients.
func (s *Server) connected() int {
	n := 0
	for _, c := range s.clients {
		if c != nil {
			n++
		}
	}
	return n
}

// closeConn closes c without waiting for the transport, so that no close,
// kick, reject or drop holds up a tick: a transport.CloseStarter starts its
// close at once; any other connection's close runs on one of the closer's
// goroutines.
func (s *Server) closeConn(c transport.Conn, code transport.CloseCode, reason string) {
	if !s.closer.Close(c, code, reason) {
		s.Stats.ClosesDropped++
		s.cfg.Logger.Warn("archenet: close not run: too many closes waiting for the transport", "remote", c.RemoteAddr(), "code", code)
	}
}

func (s *Server) drop(c *remote, code transport.CloseCode, reason string) {
	level := slog.LevelWarn
	if code == transport.CodeNormal {
		level = slog.LevelInfo
	}
	s.cfg.Logger.Log(context.Background(), level, "archenet: client dropped", "client", c.ID, "code", code, "reason", reason)
	s.closeConn(c.conn, code, reason)
	s.gone(c, &transport.CloseError{Code: code, Reason: reason})
}

// sendFailed handles a failed send to c: a connection that closed (the
// transport gave up on a peer that does not take its reliable messages, or
// the peer went away) is gone; any other failure drops the client.
func (s *Server) sendFailed(c *remote, err error) {
	var ce *transport.CloseError
	if !errors.As(err, &ce) {
		s.drop(c, transport.CodeInternal, err.Error())
		return
	}
	s.disconnected(c, err)
}

// disconnected ends c, whose connection closed with err: a close of the
// player's own (Client.Close: a normal close from its end that says so), a
// close for a backlog it did not take, or of a client that never
// acknowledged a snapshot is a leave; any other loss keeps its seat
// (lost).
func (s *Server) disconnected(c *remote, err error) {
	var ce *transport.CloseError
	switch {
	case errors.As(err, &ce) && ce.Code == transport.CodeSendBacklog:
		s.cfg.Logger.Warn("archenet: client dropped", "client", c.ID, "code", ce.Code, "reason", ce.Reason)
	case errors.As(err, &ce) && ce.Remote && ce.Code == transport.CodeNormal && ce.Reason == leaveReason || c.Tracker.NewestAck == 0:
		s.cfg.Logger.Info("archenet: client disconnected", "client", c.ID, "err", err)
	default:
		s.lost(c, err)
		return
	}
	s.gone(c, err)
}

func (s *Server) gone(c *remote, reason error) {
	s.endSeat(c, reason)
	s.clients[c.ID] = nil
	s.Stats.Disconnected++
	var ce *transport.CloseError
	if errors.As(reason, &ce) && ce.Code == transport.CodeSendBacklog {
		s.Stats.BacklogDrops++
	}
	if s.cfg.OnDisconnect != nil {
		s.cfg.OnDisconnect(c.ID, reason)
	}
}

// ReceiveSystem returns an arche.System that runs [Server.Receive]: add it
// first, as a net-tick system.
func (s *Server) ReceiveSystem() ecs.System { return systemFunc{update: s.Receive} }

// SendSystem returns an arche.System that runs [Server.Send]: add it last,
// as a net-tick system. Its Finalize (when the scheduler closes) closes the
// server ([Server.Close]: every client is disconnected and the listener
// closed).
func (s *Server) SendSystem() ecs.System {
	return systemFunc{update: s.Send, final: func() { _ = s.Close() }}
}

type systemFunc struct {
	update func()
	final  func()
}

func (f systemFunc) Initialize(*arche.World) {}
func (f systemFunc) Update(*arche.World)     { f.update() }
func (f systemFunc) Finalize(*arche.World) {
	if f.final != nil {
		f.final()
	}
}

// Receive accepts connections, runs handshakes, and drains every client's
// datagrams (acks and inputs) and messages. Call it at the start of a net
// tick.
func (s *Server) Receive() {
	if s.pace.earlyWake {
		s.work.gang.Wake() // for Send: their threads take a while to wake
	}
	s.accept()
	s.handshakes()
	now := s.cfg.Now()
	s.clampW.Check(now, s.cfg.Registry, s.cfg.Logger)
	s.msgs.beginReceive()
	s.work.active = s.work.active[:0]
	for _, c := range s.clients {
		if c == nil || c.seat.suspended && s.expireSeat(c, now) {
			continue
		}
		if c.seat.suspended {
			continue // (nothing arrives)
		}
		select {
		case <-c.conn.Done():
			s.disconnected(c, c.conn.Err())
			continue
		default:
		}
		s.work.active = append(s.work.active, c)
	}
	// Datagrams are parsed on this goroutine (their input sections go to
	// the user's hook, in client order, before the simulation step); their
	// acks are taken in by each peer's tick in Send, on the workers.
	for _, p := range s.work.active {
		s.drain(p, now)
	}
	for _, c := range s.work.active {
		if err := s.deliverInput(c); err != nil {
			s.drop(c, closeCode(err), err.Error())
		} else if why := c.Silent(now, s.cfg.Limits.ClientTimeout, s.cfg.Limits.JoinTimeout, s.clientSender()); why != "" {
			s.timedOut(c, why)
		}
	}
	s.pace.lastReceive = now
	s.pace.received = time.Now()
}

// accept takes the listener's new connections into the handshake (with
// their Hello if the listener read it: transport.HelloListener); beyond
// MaxHandshakes they are refused at once.
func (s *Server) accept() {
	if s.listener == nil {
		return
	}
	hl, _ := s.listener.(transport.HelloListener)
	for {
		var c transport.Conn
		var hello []byte
		var ok bool
		if hl != nil {
			c, hello, ok = hl.PollAcceptHello()
		} else {
			c, ok = s.listener.PollAccept()
		}
		if !ok {
			return
		}
		if s.hs.desk.Len() >= s.cfg.Limits.MaxHandshakes {
			s.Stats.Busy++
			s.cfg.Logger.Warn("archenet: connection refused: server busy", "remote", c.RemoteAddr(), "handshakes", s.hs.desk.Len())
			s.closeConn(c, transport.CodeRejected, fmt.Sprintf("server busy: %d handshakes in progress (ServerConfig.Limits.MaxHandshakes)", s.hs.desk.Len()))
			continue
		}
		if hl != nil {
			s.AddConnHello(c, hello)
		} else {
			s.AddConn(c)
		}
	}
}

// wakeEarly is the longest step between Receive and Send for which
// Receive wakes the worker helpers: they spin through it (yielding) so
// that they are up when Send starts. After a longer step they would have
// parked again (gangSpin), so Send wakes them.
const wakeEarly = gang.Spin / 2

// warnStalled warns, at most every 10 s, when Send runs with clients while
// Receive has not run for a while: clients' acks and inputs go unread, so
// their budgets collapse and their input is missing.
func (s *Server) warnStalled(now time.Time) {
	const after, every = 2 * time.Second, 10 * time.Second
	if len(s.work.active) == 0 || now.Sub(s.pace.lastReceive) < after || now.Sub(s.pace.warnedStall) < every {
		return
	}
	s.pace.warnedStall = now
	since := "ever"
	if !s.pace.lastReceive.IsZero() {
		since = "for " + now.Sub(s.pace.lastReceive).Round(time.Millisecond).String()
	}
	s.cfg.Logger.Warn("archenet: Server.Send runs but Server.Receive has not run "+since+
		": acks and input are not read (add Server.ReceiveSystem to the scheduler)", "clients", len(s.work.active))
}

// drain takes every datagram the client sent since the last tick into its
// peer (acks, and input sections for deliverInput). It touches only the
// peer and its connection.
func (s *Server) drain(c *remote, now time.Time) {
	c.BeginReceive()
	c.msgBytes = 0
	for {
		d, ok := c.conn.PollDatagram()
		if !ok {
			break
		}
		d, sec, err := wire.SplitSection(d, wire.FlagClientMessages)
		if err != nil {
			c.RxErr = err
			return
		}
		if c.Receive(d, now, s.tick) != nil {
			return
		}
		if err := s.takeConfirmed(c); err != nil {
			c.RxErr = err
			return
		}
		if sec != nil {
			if err := s.msgs.receiveSection(s, c, sec, c.HeardTick, now); err != nil {
				c.RxErr = err
				return
			}
		}
	}
	for range maxMessagesPolled {
		m, ok := c.conn.PollMessage()
		if !ok {
			break
		}
		if len(m) == 0 || m[0] != wire.KindClientMessages {
			c.RxErr = fmt.Errorf("unexpected reliable message of %d bytes (type 0x%02x)", len(m), transport.TypeOf(m))
			return
		}
		if err := s.msgs.receive(s, c, m, now); err != nil {
			c.RxErr = err
			return
		}
		c.seat.taken++
	}
}

// maxMessagesPolled bounds the reliable messages (game message batches)
// taken from one client per Receive; more wait in its connection, whose
// flow control holds the sender back.
const maxMessagesPolled = 64

// deliverInput hands what drain kept to the Input hook; an error (the
// peer's or the hook's) drops the client.
func (s *Server) deliverInput(c *remote) error {
	defer clear(c.RX) // release the datagrams
	if c.RxErr != nil {
		return c.RxErr
	}
	if s.cfg.Input == nil {
		return nil
	}
	for _, in := range c.RX {
		if err := s.cfg.Input(c.ID, in.Ack, in.Section); err != nil {
			return err
		}
	}
	return nil
}

// Send applies structural changes, builds this net tick's snapshot frame
// (one pass over replicated entities), and sends every client its spawn and
// despawn messages and its snapshot datagrams. Call it at the end of a net
// tick.
//
// The per-client work runs in three phases: a sequential one that calls the
// user's hooks (ServerConfig.InputAck, InputFeedback) and asks the
// connections their datagram size; the clients' datagrams and spawn batches,
// built in parallel by ServerConfig.Workers goroutines over the read-only
// frame ring and slot table (Interest.Focus and Interest.Filter run there);
// and a sequential hand-over of everything built to the connections, in
// client order, none of which waits for a peer.
func (s *Server) Send() {
	t0 := time.Now()
	s.work.gang.Wake() // (unless Receive did)
	s.pace.earlyWake = !s.pace.received.IsZero() && t0.Sub(s.pace.received) < wakeEarly
	defer s.work.gang.Rest()
	s.commitTick()
	s.msgs.prepare(s)
	s.preencode()
	t1 := time.Now()
	s.Stats.BuildFrame += t1.Sub(t0)
	now := s.cfg.Now()
	s.work.active = s.work.active[:0]
	for _, p := range s.clients {
		if p != nil {
			s.planPeer(p, now, p.conn.MaxDatagramSize())
			s.work.active = append(s.work.active, p)
		}
	}
	s.warnStalled(now)
	s.sendPeers(now)
	s.endTick()
	s.Stats.BuildClients += time.Since(t1)
	s.Stats.HelperTime = s.work.gang.AwakeTime()
}

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
	s.slots.Begin(next)
}

// commitTick starts a net tick: it numbers it, applies structural changes,
// builds its frame and, when due, the interest grid.
func (s *Server) commitTick() {
	s.advanceTick()
	s.capture.Apply()
	s.relationsToNet()
	s.refsToNet()
	s.capture.Frame(s.tick, s.interest != nil && s.interest.Due(s.tick))
	s.group.BeginTick()
	if s.interest != nil && s.interest.Due(s.tick) {
		s.interest.Rebuild(s.gridSource())
		s.slots.Fresh.Reset()
	}
}

// endTick ends a net tick after its peers were built.
func (s *Server) endTick() {
	s.endPreencode()
	s.ring.EndTick()
	s.msgs.endTick()
	s.slots.EndTick()
	s.slots.Keys.ClearEnded()
}

// planPeer runs a peer's sequential phase — the user's hooks — and leaves
// its plan in the peer; maxDatagram is what its connection takes.
func (s *Server) planPeer(p *remote, now time.Time, maxDatagram int) {
	p.plan = peer.Plan{MTU: min(s.cfg.MTU, maxDatagram), Suspended: p.seat.suspended}
	p.hasFocus = false
	s.msgs.planPeer(p)
	if s.interest != nil && (s.interest.Due(s.tick) || p.rel.Relevant == nil) {
		p.focus, p.hasFocus = s.focusOf(p.ID)
	}
	if s.cfg.InputAck != nil {
		o := &p.plan.Opt
		o.InputAck, o.HasInputAck = s.cfg.InputAck(p.ID)
		if o.HasInputAck && s.cfg.InputFeedback != nil {
			o.InputHeld, o.InputDepth, o.HasInputFeedback = s.cfg.InputFeedback(p.ID)
		}
	}
}

// updateRelevance sets the client's relevance for this tick into its plan
// (on a worker: Interest.Filter runs here): recomputed when due, else the
// last one narrowed to the slots still alive and not reallocated. It may
// differ from the last tick's when recomputed or when an entity was
// spawned, despawned or changed its components (s.relayout: the only
// changes of the alive set).
func (s *Server) updateRelevance(c *remote, w *worker) {
	changed := len(s.slots.Relayout) > 0
	switch {
	case s.interest == nil:
		c.rel.Relevant = append(c.rel.Relevant[:0], s.slots.Alive...)
	case s.interest.Due(s.tick) || c.rel.Relevant == nil:
		s.interest.RelevantFor(c.ID, c.focus, c.hasFocus, s.slots.Alive, s.slots.Infos, &c.rel, &w.relevance)
		changed = true
	case changed:
		grid.Effective(&c.rel, s.slots.Alive, s.slots.Fresh)
	default:
		// No slot was allocated, freed or reallocated since the last
		// tick: the alive and fresh sets are the ones the relevance
		// was narrowed to then.
	}
	c.plan.Relevant, c.plan.RelevanceChanged = c.rel.Relevant, changed
}

// clientSender names what sends a client's datagrams, for the liveness
// messages: with an input hook (input.Authority), the client's input helper
// (input.Player.System) sends them.
func (s *Server) clientSender() string {
	if s.cfg.Input != nil {
		return "input.Player.System (or Client.Send)"
	}
	return "Client.Send"
}

// focusOf asks the game's Interest.Focus for client id's point of interest.
func (s *Server) focusOf(id ClientID) (components.Vec3, bool) {
	if f := s.cfg.Interest.Focus; f != nil {
		return f(id)
	}
	return components.Vec3{}, false
}

// gridSource is what the interest grid's rebuild reads of the server.
func (s *Server) gridSource() *grid.Source {
	src := &s.work.gridSrc
	*src = grid.Source{Slots: s.slots.Infos, PosID: int(s.ids.posPl.ID), Read: s.work.readPos, Gang: &s.work.gang,
		Chunked: len(s.work.workers) > 1 && len(s.slots.Infos) >= s.cfg.ParallelFrame}
	return src
}

// readPosition reads e's position from the world (for the grid).
func (s *Server) readPosition(e arche.Entity) components.Vec3 {
	return s.cfg.Interest.Position.at(s.world.Get(e, s.ids.pos))
}

// flush hands what a peer built this tick to its connection.
func (s *Server) flush(p *remote) error {
	o := &p.Out
	if o.SpawnMsg != nil {
		if err := s.sendReliable(p, o.SpawnMsg); err != nil {
			return err
		}
		s.Stats.SpawnBytes += uint64(len(o.SpawnMsg))
		s.Stats.Spawns += uint64(o.Spawns)
		s.Stats.Despawns += uint64(o.Despawns)
	}
	if o.ReadyMsg {
		o.ReadyMsg = false
		if err := s.sendReliable(p, wire.AppendReady(nil, s.tick)); err != nil {
			return err
		}
	}
	if keys := s.slots.Keys.Ended(p.ID); len(keys) > 0 {
		if err := s.sendReliable(p, wire.AppendSpawnsEnded(nil, keys)); err != nil {
			return err
		}
	}
	if err := s.msgs.flushPeer(s, p); err != nil {
		return err
	}
	for i := range o.Pkts.Len() {
		if err := p.conn.SendDatagram(o.Pkts.At(i)); err != nil {
			return err
		}
	}
	n := uint64(o.Pkts.Len())
	s.Stats.SnapshotBytes += uint64(o.Info.Bytes - o.SectionBytes)
	s.Stats.MessageBytes += uint64(o.SectionBytes)
	s.Stats.MessagesOut += uint64(o.Messages)
	s.Stats.MessagesUnsent += uint64(o.MessagesLeft)
	s.Stats.SnapshotDatagrams += n
	s.Stats.SnapshotHeaderBits += uint64(o.Info.HeaderBits)
	s.Stats.Deferred += uint64(o.Info.Deferred)
	s.Stats.Compressed += uint64(o.Info.Compressed)
	s.Stats.Deltas += uint64(o.Info.Deltas)
	s.Stats.Fulls += uint64(o.Info.Fulls)
	s.Stats.Removals += uint64(o.Info.Removals)
	if n > 0 {
		s.Stats.Builds++
		if o.Info.Shared {
			s.Stats.SharedBuilds++
		}
		if o.Info.SharedCands {
			s.Stats.SharedCandidates++
		}
	}
	return nil
}
