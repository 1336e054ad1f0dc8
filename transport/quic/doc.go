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
// closes the connection with transport.CodeMessageTooLarge before anything is
// allocated; a malformed prefix, wrong preamble or ended stream closes it with
// transport.CodeProtocolError. Close codes travel as QUIC application error codes.
//
// Every Conn drains quic-go's 128-entry datagram queue continuously into a bounded queue
// ([Config].DatagramQueueLen; overflow counted in Stats.DatagramsDropped), and a
// token bucket ([Config].DatagramRateLimit, [Config].DatagramBurst) closes a flooding
// peer with transport.CodeFlood. All goroutines of a Conn have exited when its Done
// channel is closed; [Listener.Close] closes its connections and waits for its own.
//
// # Tasks
//
//   - Serve: [Listen] with Config.TLS = [DevCert.ServerTLS] (or a real certificate), then
//     [Listener.Accept] and transport.ServerHandshake.
//   - Connect: [Dial], then transport.ClientHandshake.
//   - Tune timeouts: [Config].IdleTimeout, [Config].KeepAlivePeriod, [Config].HandshakeTimeout.
//   - Bound memory per peer: [Config].MaxMessageSize, [Config].MessageQueueLen,
//     [Config].MessageQueueBytes, [Config].DatagramQueueLen.
//   - Defend against floods: [Config].DatagramRateLimit.
//   - Inspect QUIC internals: [Conn.QUICConn].
package quic
