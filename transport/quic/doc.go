// Package quic carries archenet connections over QUIC (quic-go): unreliable datagrams
// as QUIC DATAGRAM frames and reliable messages as length-prefixed frames on one stream.
//
// # Outline
//
// [Listen] returns a [Listener] whose [Listener.Accept] and [Listener.PollAccept] hand
// out server ends; [Dial] returns the client end. Both are [Conn], which implements
// transport.Conn. [Config] is a plain struct whose zero value is usable for Dial; every
// field says what its zero value means. Connections negotiate ALPN [ALPN] over TLS 1.3
// and verify the server certificate; for development, [GenerateDevCert] makes a
// self-signed certificate and [DevCert.ClientTLS] a client configuration trusting exactly
// it. Only [Config].InsecureSkipVerify turns verification off.
//
// Wire format of the message stream (package transport/internal/frame): the client opens the one
// bidirectional stream and writes the preamble byte 0xA1; then each message is
// uvarint(length) | payload in both directions. A length above [Config].MaxMessageSize
// (above transport.MaxHandshakeMessageSize for the first message, the handshake)
// closes the connection with transport.CodeMessageTooLarge before anything is
// allocated, and a message's buffer then grows as its bytes arrive, so a peer that
// announces much and sends little holds little; nothing after the first message is read
// until the application has taken it. A malformed prefix, wrong preamble or ended stream
// closes the connection with transport.CodeProtocolError. Close codes travel as QUIC
// application error codes.
//
// Sends never block (a game loop calls them): [Conn.SendDatagram] and
// [Conn.SendMessage] go through a transport.Outbox drained by two writer goroutines.
// Datagrams wait in a queue of [Config].DatagramSendQueueLen and the oldest is dropped
// when it is full (a dead or congested path; Stats.DatagramsSendDropped); messages that
// QUIC's flow control does not take at once wait in a backlog bounded by
// [Config].MaxSendBacklog bytes and [Config].SendBacklogTimeout, past which the
// connection closes with transport.CodeSendBacklog (a peer that stopped reading).
//
// Before the server sends a transport.Welcome a connection costs little: its QUIC
// flow-control windows stay at [Config].HandshakeWindow (32 KiB), it queues at most 16
// datagrams, and its first message is bounded as above; at most
// [Config].MaxPendingPerAddress (16) such connections come from one source address (more
// are refused at their first packet, before any TLS work), and above [Config].RetryAbove
// (64) pending connections new ones must pass a QUIC Retry, so a spoofed source cannot
// hold handshake state. Measured: about 90 KB of heap per connection held in the
// handshake (500 hostile connections, tests/sockets/handshake_flood_test.go). A close this end
// decides on ([Conn.StartClose], the flood and frame errors, the send backlog) is carried
// out by the connection's own goroutine, because quic-go's close waits for the
// connection's run loop.
//
// Every Conn drains quic-go's 128-entry datagram queue continuously into a bounded queue
// ([Config].DatagramQueueLen; overflow counted in Stats.DatagramsDropped), and a
// token bucket ([Config].DatagramRateLimit, [Config].DatagramBurst) closes a flooding
// peer with transport.CodeFlood. Every close this end decides on, and every connection
// refused before it reached Accept, is logged to [Config].Logger (rate-limited). All
// goroutines of a Conn have exited when its Done channel is closed; [Listener.Close]
// closes its connections and waits for its own.
//
// # Tasks
//
//   - Serve with replication: [Listen] with Config.TLS = [DevCert.ServerTLS] (or a real
//     certificate), then pass the Listener to replication.NewServer, which accepts
//     connections and runs the archenet handshake itself.
//   - Connect with replication: [Dial], then replication.NewClient(world, conn, cfg),
//     which sends the Hello itself and completes the handshake in its Receive calls
//     (calling transport.ClientHandshake as well would send a second Hello, which the
//     server does not expect).
//   - Drive the transport directly (no replication package): [Listen], [Listener.Accept]
//     and transport.ServerHandshake on the server; [Dial] and transport.ClientHandshake
//     on the client.
//   - Diagnose a failed Dial: its error names the address and the phase, e.g.
//     "quic: dial 127.0.0.1:4433: no handshake response within 10s (is a server listening
//     there?)", and matches context.DeadlineExceeded on a timeout.
//   - Tune timeouts: [Config].IdleTimeout, [Config].KeepAlivePeriod, [Config].HandshakeTimeout.
//   - Bound memory per peer: [Config].MaxMessageSize, [Config].MessageQueueLen,
//     [Config].MessageQueueBytes, [Config].DatagramQueueLen.
//   - Defend against floods: [Config].DatagramRateLimit.
//   - Bound what connections that were not welcomed cost: [Config].HandshakeWindow,
//     [Config].MaxPendingPerAddress, [Config].RetryAbove; watch [Listener.Admission].
//   - Bound what a slow or dead peer costs the sender: [Config].DatagramSendQueueLen,
//     [Config].MaxSendBacklog, [Config].SendBacklogTimeout.
//   - Inspect QUIC internals: [Conn.QUICConn].
package quic
