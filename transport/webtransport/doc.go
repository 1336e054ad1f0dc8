// Package webtransport carries archenet connections over WebTransport sessions, so
// that browser players run the same replication.Client as native ones.
//
// # Outline
//
// The package builds for two platforms. Natively it is the server side: [Listen]
// returns a [Listener] (a transport.Listener and an http.Handler) that owns a UDP
// socket and an HTTP/3 server, and [NewListener] one to mount on an HTTP/3 server of
// the caller's; [Dial] opens a session from a native program (bots, tools, tests). In a
// js/wasm build, [Dial] opens the session with the browser's WebTransport API
// (syscall/js) and [DialEndpoint] first fetches the server's endpoint document (JSON: {"url": …, "hashes": [{"algorithm": "sha-256", "value": base64}]}). Both
// return a Conn implementing transport.Conn, so replication.NewClient runs unchanged in
// a page.
//
// Wire format: as transport/quic's, over WebTransport instead of raw QUIC. Datagrams
// are the session's datagrams, at most [MaxDatagramPayload] (1200) bytes both ways
// (browsers drop datagrams above 1215); messages are uvarint(length) | payload frames
// on the one bidirectional stream the client opens, after the preamble byte 0xA1. The
// handshake message is bounded by transport.MaxHandshakeMessageSize and read alone; a
// second stream, a unidirectional stream, a datagram above 1200 bytes or a datagram
// flood closes the session with transport.CodeProtocolError or CodeFlood.
//
// # Closes
//
// Close codes and reasons travel in WebTransport's close capsule
// (WT_CLOSE_SESSION), both ways: a page's Conn.Err is a *transport.CloseError with
// Remote set, as a native client's is. The server writes the capsule and the CONNECT
// stream's FIN itself and waits (at most 250 ms) for the peer to end the session
// before the QUIC connection goes: webtransport-go's own close also sends
// STOP_SENDING, after which Chromium reports "Connection lost" without the code. A
// Conn's close never blocks its caller's tick: [Conn.StartClose]
// (transport.CloseStarter) hands it to the connection's own goroutine.
//
// # Certificates
//
// Browsers accept a self-signed certificate by its SHA-256 hash
// (serverCertificateHashes) if it is ECDSA P-256 and valid for at most 14 days.
// [SelfSigned] keeps such a certificate and its successor (13 days each by default),
// hands over before expiry, and publishes both hashes, so a page loaded before a
// rotation still connects after it; [EndpointHandler] serves them with the session URL
// as JSON (parsed fail-closed on the page: at most 16 KiB and 8 hashes). A server with a CA-signed
// certificate publishes no hashes. A page pinned to a hash the server no longer has
// fails with an error that says to reload ([SessionRefusedError]).
//
// # Bounded resources
//
// Before this end has sent a transport.Welcome, a peer holds little, as with
// transport/quic (the two share the admission logic): its QUIC flow-control windows
// stay at Config.HandshakeWindow (32 KiB), at most Config.MaxPendingPerAddress (16)
// such connections come from one address (more are refused at their first packet,
// before any TLS work), above Config.RetryAbove (64) pending ones new connections must
// pass a QUIC Retry, and a connection queues at most 16 datagrams
// ([Listener.Admission] counts them). At most Config.MaxPendingSessions sessions are
// being set up at once (more are answered 503), each within Config.HandshakeTimeout; 8
// streams of each kind at most. Sends never block: a transport.Outbox queues datagrams
// (oldest dropped) and bounds the reliable backlog (past it the session closes with
// transport.CodeSendBacklog), on the server and in the page, where writer goroutines
// await the browser's writer promises.
//
// # In the page
//
// Chromium 156 has no WebTransport.getStats(): a page's Stats.RTT stays 0 (the
// replication client's input clock then works from the server's feedback alone).
//
// # Origins
//
// A page may open sessions if its origin has the same host and port as the endpoint
// (examples/arena serves the page on TCP and WebTransport on UDP of the same port), or
// is listed in Config.AllowedOrigins; others get 403. Native clients send no Origin.
//
// # Native and browser players in one match
//
// transport.MergeListeners joins a transport/quic Listener and a webtransport Listener
// into the one Listener a replication.Server takes. Two UDP ports, one per protocol,
// rather than one port routed by ALPN: each keeps its own QUIC limits (archenet's QUIC
// allows one stream; HTTP/3 needs four), and transport/quic stays untouched.
//
// # Tasks
//
//   - Serve browsers: [NewSelfSigned], [Listen] with Config.TLS = [SelfSigned.TLSConfig],
//     [EndpointHandler]([Listener.URL], [SelfSigned.Hashes]) on the page's HTTP server;
//     pass the Listener (or transport.MergeListeners of it and a QUIC one) to
//     replication.NewServer.
//   - Play in a page: GOOS=js GOARCH=wasm; [DialEndpoint](ctx, "/archenet.json", nil),
//     then replication.NewClient.
//   - Join from a native program: [Dial] with Config.CertHashes from the endpoint.
//   - Test a page in headless Chromium: package webtransporttest.
package webtransport
