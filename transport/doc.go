// Package transport defines the connection interfaces archenet replicates over, and the
// transport-agnostic handshake.
//
// # Outline
//
// A [Conn] carries unreliable datagrams ([Conn.SendDatagram], [Conn.PollDatagram]) for
// value mutations and reliable, ordered messages ([Conn.SendMessage],
// [Conn.PollMessage]) for structural changes. Poll methods never block, for a fixed-step
// game loop; Receive methods block with a context. A [Listener] hands out server ends.
// [Conn.Stats] returns counters as [Stats].
//
// Sends never block: datagrams the network cannot take wait in a bounded queue that drops
// its oldest entry when full, and reliable messages wait in a backlog bounded in bytes and
// age, past which the connection closes with [CodeSendBacklog]. An [Outbox] is that send
// side, ready for a transport implementation to put in front of a network that may block
// ([OutboxWriter]). The first message a connection receives (the handshake) is bounded by
// [MaxHandshakeMessageSize].
//
// A connection closes with a [CloseCode] and a reason; afterwards [Conn.Err] returns a
// *[CloseError], which matches [ErrClosed] (and [ErrTimeout] for timeouts) with errors.Is.
// Oversize payloads fail with *[DatagramTooLargeError] or *[MessageTooLargeError].
//
// The handshake is the first exchange of reliable messages: the client sends [Hello]
// (protocol version, protocol hash, token), the server answers [Welcome] (client ID,
// payload) or [Reject]. [JudgeHello] is the server's policy, a pure function every server
// path shares (replication's Server drives it from its tick, [ServerHandshake] blocking);
// [HandshakeError.Reject] is the answer it implies. [ClientHandshake] runs the client's
// side blocking, and a game loop can drive the same codec ([Hello.Append], [ParseHello],
// ...) through Poll methods. Failures are *[HandshakeError]. On a protocol hash
// mismatch a server may describe its protocol in the Reject ([Reject.Protocol], opaque
// to the transport); a client that understands it fills [HandshakeError.Detail] (the
// replication package lists its components there and names the one that differs).
//
// Implementations: package transport/quic (QUIC over UDP) and transport/sim (a
// deterministic in-memory network); transport/transporttest is their conformance suite.
//
// # Tasks
//
//   - Send a snapshot: [Conn.SendDatagram] with at most [Conn.MaxDatagramSize] bytes.
//   - Send a spawn/despawn batch: [Conn.SendMessage].
//   - Drain input once per tick: [Conn.PollDatagram], [Conn.PollMessage], [Listener.PollAccept].
//   - Refuse a client: [Conn.CloseWithReason] with [CodeRejected].
//   - Tell why a connection ended: [Conn.Done], [Conn.Err], [CloseError].
//   - Check a client's build: [JudgeHello], [ServerHandshake], [ClientHandshake].
//   - Build a transport whose sends never block: [NewOutbox] over an [OutboxWriter].
//   - Log connection events without being flooded: [RateLimit].
package transport
