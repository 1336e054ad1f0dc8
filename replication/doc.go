// Package replication makes an arche world multiplayer: a [Server]
// replicates the entities of an authoritative world to every connected
// [Client]'s own arche world.
//
// # Setup
//
// Register the replicated component types (with `net` precision tags, see
// package schema) in a schema.Registry — the same types in the same order on
// both sides. On the server, give entities components.Replicated (and
// components.Owner for the client that owns them); [NewServer] attaches to the
// world and a transport listener. On each client, [NewClient] attaches to the
// client's world and a connection. Both offer a ReceiveSystem (add it first)
// and a SendSystem (add it last) for archenet's ecs.Scheduler, as net-tick
// systems; or call Receive and Send once per net tick yourself.
//
// # What travels how
//
//   - Handshake (reliable): protocol version, the registry's protocol hash
//     and an auth token; a mismatch fails on both sides with a clear
//     *transport.HandshakeError ("protocol hash mismatch: server 0x…, client
//     0x…"). On a hash mismatch the server's Reject lists its components
//     (name, own hash, fields), and the client's error names what differs:
//     `…: component 2 differs: server "Avatar" (fields X,Z) vs client
//     "Avatar" (fields X,Y)`, `client lacks component "Foo"`, or `server
//     registers "Projectile" where the client registers "Avatar"`. The Welcome assigns the client id (1..254) and carries the net
//     rate, the snapshot depth and the net divisor ([Client.SimTick]).
//   - Spawns and despawns (reliable, ordered, batched per tick): net handle
//     slot, generation, owner, component set and full initial state; also
//     component add/remove. A late joiner gets every relevant entity, then a
//     "ready" message ([Client.Ready], [Client.OnReady]).
//   - State (unreliable datagrams): package snapshot's deltas against the
//     client's acknowledged baseline, with field masks; lost datagrams cost
//     nothing. The client acks with every datagram it sends.
//   - Game messages (see [Messages and references] below), reliable on the
//     stream right after the tick's spawns, or unreliable at the end of the
//     tick's datagrams.
//
// # Messages and references
//
// A message type is a struct with `net` tags, registered with
// schema.RegisterMessage (it joins the protocol hash; a Reject names a
// message that differs). [ServerMessages] and [ClientMessages] return a
// type's endpoint on each side:
//
//	hits, _ := replication.ServerMessages[Hit](server)
//	hits.SendAbout(victim, Hit{Target: components.RefTo(victim)}, replication.Reliable)
//	hits.Broadcast(RoundOver{}, replication.Reliable)  // or Send(client, …)
//	for m := range uses.Received() { … m.From, m.Tick, m.Value … } // or uses.Handle(fn)
//
// SendAbout sends to exactly the clients that see the entity, after its
// spawn (also when it was spawned in the same tick; a kill's victim,
// despawned in the same tick, still counts for the clients that held it).
// Every message carries the server tick it belongs to ([Message].Tick). A
// client's messages carry its [ClientID] and count against
// [ServerLimits].MaxMessageBytes, MaxMessagesPerSecond and
// MaxQueuedMessageBytes: the excess is dropped and counted, a flood or a
// malformed message closes that client (transport.CodeFlood,
// CodeMessageTooLarge, CodeProtocolError) and nobody else notices.
// [Reliable] messages arrive once and in order; [Unreliable] ones ride in
// the tick's datagrams (an 8-byte message costs 2 bytes more) and arrive at
// most once, never older than the newest applied, or not at all.
//
// A components.Ref field names an entity: in a message, and in a replicated
// component (an unchanged one costs no bits in a delta). The server reads
// its own entity, a client its mirror: none while the entity has no mirror
// there (not spawned yet, outside its interest, despawned), never another
// one, and resolved once it has ([Client.ResolveRef] for a received
// message). A reference in a client's message that is stale, unknown or
// not relevant to that client is refused before the game's handler runs
// (ServerStats.MessagesRefused). A registered arche relation component
// (its first field embeds ecs.Relation) keeps its target on the clients,
// mapped to the target's mirror, and says none while the target is not
// there.
//
// # Server features
//
//   - Net handles (owner:8 | slot:24) with a generation bumped on slot reuse;
//     [Server.Resolve] rejects stale references before any state change.
//   - Dirty detection by comparing quantized values with the last frame; for
//     large static sets, components.Replicated.Dormant plus [Server.MarkDirty]
//     (push model); Replicated.SendEvery sends an entity every N-th net tick.
//   - Owner-only fields (tag option owner) reach only the owning client.
//   - [Interest]: per-client relevance from a spatial hash grid around a focus
//     point, with hysteresis, plus a filter; entering interest spawns the
//     entity on that client, leaving despawns it there.
//   - Adaptive budget: each client's snapshot byte rate backs off on loss
//     spikes, queueing delay or silent acks and grows back while the link is
//     clean ([ClientInfo].BytesPerSecond).
//   - Clamped values are loud: a value a field cannot represent (Health 300
//     in range=0:100, NaN, ±Inf, a position past the world limit) reaches
//     clients clamped while the server keeps its own; quantization counts
//     each such value per component type and field ([Server.Clamps],
//     schema.Registry.Clamps; counted when the entity's value is quantized,
//     i.e. when its bytes changed), and the server warns at most once per
//     [ClampWarnEvery] per field ("archenet: value clamped by quantization",
//     component, field, kind, count). Checking costs one atomic load per
//     net tick.
//   - Input hooks: [ServerConfig].Input and [ClientConfig].Input carry the
//     input section (package input) in the client's datagrams; in the other
//     direction [ServerConfig].InputAck and [ServerConfig].InputFeedback put
//     the applied input tick and the input feedback (held tick, depth) in
//     each snapshot datagram's header ([Client.InputAck],
//     [Client.InputReport]) for reconciliation, the input sender and the
//     client's input clock (package input).
//
// # Isolation
//
// Nothing on the server's tick waits for a peer. Sends go to the transport's
// bounded queues (transport.Conn never blocks): a client whose path is dead
// or congested loses its own datagrams, oldest first; a client that does not
// take its reliable messages is disconnected once its backlog passes the
// transport's bound (transport.CodeSendBacklog, counted in
// [ServerStats].BacklogDrops). The [ServerConfig].Authenticator runs on a
// goroutine of its own, bounded by [ServerLimits].HandshakeTimeout, and only
// after the version, protocol-hash and server-full checks; at most
// [ServerLimits].MaxHandshakes connections wait in the handshake at once.
// Every close is logged, rate-limited per kind. On the client, mirrors are
// kept by slot in memory bounded by [ClientConfig].MaxEntities, whatever slot
// numbers a server names.
//
// # Structure
//
// Server and Client are pumps: they own the connections and the game's
// hooks, and hand everything else to parts that do no I/O (in
// replication/internal, each a package of its own):
//
//	server, per net tick     admit (the handshake desk) → capture (the world into
//	                         the slot table and the ring: store) → grid (interest)
//	                         → peer per client (baselines: baseline; progress; rate
//	                         control: congestion) building its datagrams with
//	                         encode (record cache, lanes, selection, packing) →
//	                         the connections, in client order
//	client                   link (the channel's state machine: wire messages in,
//	                         receive's decoded views and the ack out) → mirror (the
//	                         mirrors in the client's world, interpolation,
//	                         predicted spawns); watch names a frame system that
//	                         does not run
//	shared                   wire (every message), codec (the record coding both
//	                         ends read), entity (the tables every part shares)
//
// The peers' datagrams are built in parallel by [ServerConfig].Workers
// goroutines (gang) over the read-only frame ring (the bytes a client gets
// do not depend on the number of workers): the caller's and long-lived
// helpers, which Send (or, when the step between them is short, Receive)
// wakes and which spin until Send is done, since a parked thread wakes
// slowly. Worlds of at least [ServerConfig].ParallelFrame entities have the
// frame itself built by the workers too, on ticks when no entity spawned,
// despawned or changed its components. Between the frame and the peers,
// the workers pre-encode the delta records of the baseline and prediction
// views most clients coded against last tick, a tick on, for the entities
// some client holds: each record once, read by every worker's peers
// ([ServerConfig].NoPreencode turns it off; the bytes are the same). A
// client whose tick has the same inputs as the one its worker built just
// before (the same acked views, the same entities in view: everything in
// every view, say) copies that one's datagrams and writes its own headers
// into them; where a client owns entities with owner-only fields, the
// datagrams that carry its own records of them are written anew
// ([ServerConfig].NoSharedBuilds turns it off; the bytes are the same). In a
// steady state (a ring's worth of ticks built, buffers grown to their
// peak) the server's own tick work — frame, interest grid, pre-encoding,
// the peers' datagrams — allocates nothing (the transport's may), and nor
// does a net tick of the client's mirrors (decode, apply, interpolate). The handshake policy is transport.JudgeHello's, on both the
// blocking and the tick-driven path. Snapshots may be zstd-compressed
// ([ServerConfig].Compression, negotiated in the Welcome).
//
// # Client features
//
// Mirrors get the same components plus components.NetID; [Client.Entity]
// maps a net handle to the mirror. A datagram naming an entity whose spawn has
// not arrived is kept in the snapshot view and applied when the spawn lands.
// Remote mirrors are interpolated between snapshots at the render clock's
// time ([Client.InterpClock], advanced by [Client.Interpolate] /
// [Client.InterpolationSystem], which can be added before the Welcome):
// with [ClientConfig].Interpolation, mirrors with a Transform get an
// interp.Buffer and a components.Visual; any registered component listed in
// [ClientConfig].InterpolatedComponents (a 2D position, an angle, a
// quaternion, scalars) is interpolated in place from an interp.Track. The
// client's own entities marked components.Predicted are left to prediction
// (input.Player; [ClientConfig].Interpolate overrides the rule).
// [Client.Reconnect] removes every mirror and rejoins as a late joiner.
//
// # Predicted spawns
//
// A client may create an entity locally the tick its input causes it (a
// projectile): [Client.SpawnPredicted] makes a provisional entity with a
// key both sides derive from the input (e.g. the input tick); the server's
// game, applying that input, creates the authoritative entity and keys it
// with [Server.PredictedSpawn]. The owner's spawn message carries the key,
// and the client adopts its provisional entity as the mirror: one entity,
// no flicker; other clients see an ordinary spawn. Unconfirmed provisional
// entities are removed after [ClientConfig].PredictedSpawnTimeout; each
// client may have at most [ServerLimits].MaxPredictedSpawns keyed entities
// alive on the server.
//
// # Liveness
//
// A client fails with [ErrTimeout] (the message names the server's address
// and the phase) when no Welcome arrives within [ClientConfig].ConnectTimeout,
// no initial world within ReadyTimeout, or nothing for Timeout once joined;
// the server gives up on a client silent for [ServerLimits].ClientTimeout
// (transport.CodeTimeout; it keeps its seat, below). Either side's Send
// warns when its Receive is not running.
//
// # Seats: coming back after a drop
//
// A client whose connection is lost — a timeout, a transport error, any
// close but its own [Client.Close] (a dead link, a laptop that slept, a
// page that reloads) — keeps its seat for [ServerLimits].SeatWindow (30 s):
// its ClientID, its owned entities (they stay in the world; the game steps
// them without input as it chooses), its input log, its relevance and what
// it holds of the world. The game hears [ServerConfig].OnSuspend, then
// OnResume when the client is back, or OnDisconnect (wrapping
// [ErrSeatExpired]) when the window ran out. [Client.Resume] comes back on a
// new connection, from any address: the Welcome gave the client a secret,
// single use and new at every resume, which its Hello presents
// (transport.Hello.Resume; a host routes it by match name, without a
// token). Nothing is sent twice and nothing is lost: every reliable message
// to a client is kept until its datagrams say it took it, and a resume sends
// again exactly those it had not; the client keeps its mirrors and
// baselines, so the snapshots go on from the newest state both sides hold
// (an entity that did not change meanwhile costs nothing). A new client of
// the same player (a reloaded page) comes back with the ticket the old one
// saved ([Client.ResumeTicket], [ClientConfig].ResumeTicket; a page's client
// keeps it in sessionStorage itself with [ClientConfig].KeepTicket): the
// seat is kept, its replication starts over. A forged, used, other seat's or
// expired ticket is refused with its reason ([ErrResumeRefused]). Suspended
// seats count against MaxClients; MaxSuspendedPerAddress bounds those of
// one address. What a resume costs: 1.35 KB after 5 s away in a scene of
// 2,000 entities of which 200 move, against 32.6 KB for a late join (both
// beyond the motion itself). Each entity that changed meanwhile goes in
// full once; while that tick is in flight the client shows a mover at the
// resume's value, a round trip behind.
//
// # Moving a match to another process
//
// [Server.Checkpoint] writes a match to bytes: its replicated entities at
// full precision, its net handle table (so handles and generations stay
// valid), its seats with their secrets, its tick, and the game's own state
// (what is not replicated). [Restore] makes a server of them in another
// process, its seats suspended; [Server.DrainTo] tells the clients where
// the match goes on ([DrainNotice].Address), and each dials it and
// [Client.Resume]s its seat there; its replication starts over. What does
// not move: reliable messages in flight, input logs, the interest grid's
// hysteresis, predicted spawns' keys, entity references in components. A
// checkpoint of 501 entities and 8 seats is 37 KB, taken in 0.2 ms; the
// clients were back within 0.15 s of the notice over QUIC on loopback.
//
// # Task index
//
//	serve a world                      NewServer(world, listener, ServerConfig{Registry: reg})
//	join a server                      NewClient(world, conn, ClientConfig{Registry: reg})
//	per net tick                       Server.Receive … game … Server.Send; Client.Receive, Client.Send
//	predict the player's own entity    input.NewPlayer (client), input.NewAuthority (server)
//	interpolate a 2D/custom component  ClientConfig.InterpolatedComponents + Client.InterpolationSystem
//	a client's predicted spawn         Client.SpawnPredicted (client), Server.PredictedSpawn (server)
//	judge shots as the shooter saw     replication/lagcomp.History, input.Authority.ViewTick
//	entity ↔ network id                Server.NetID, Server.Resolve, Client.Entity
//	tell clients of an event           schema.RegisterMessage + ServerMessages[T]: Send, Broadcast, SendAbout
//	a player's request to the server   ClientMessages[T].Send; ServerMessages[T].Handle / Received
//	an entity in a message/component   components.Ref (RefTo on the server; the mirror on a client)
//	parent/child, attached to          a registered arche relation component (ecs.Relation)
//	limit what a client sees           ServerConfig.Interest
//	watch a client                     Server.Client(id) → ClientInfo (RTT, loss, budget, bytes)
//	find values clients see clamped    Server.Clamps (and the server's warnings)
//	drop a client                      Server.Kick
//	come back after a drop             Client.Resume; ServerConfig.OnSuspend / OnResume
//	come back after a page reload      ClientConfig.KeepTicket (or Client.ResumeTicket → ClientConfig.ResumeTicket)
//	move a match to another process    Server.Checkpoint → Restore there; Server.DrainTo(address)
//	use both cores                     ServerConfig.Workers (0 = GOMAXPROCS)
//	one server clock for input/render  input.SyncConfig{Arrivals: client.Arrivals()}
//	check a client converged (tests)   replicationtest.Converged
//
// See the package example for a server and client in one program, and
// examples/topdown for a small complete game with prediction and
// interpolation over QUIC.
package replication
