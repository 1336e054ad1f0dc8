// Package websocket carries archenet connections over one WebSocket each: the
// fallback for players whose browser has no usable WebTransport, or whose
// network blocks UDP (corporate, school and hotel networks), and that a plain
// HTTP proxy lets through.
//
// # Outline
//
// Natively, [Listen] serves WebSocket sessions on a TCP address and
// [NewListener] returns a [Listener] to mount on the game's own HTTP server (the
// page's, so the socket shares its origin); both are a transport.Listener and
// join transport.MergeListeners and replication/host like the other transports.
// [Dial] opens a connection from a native program or, in a js/wasm build, with
// the browser's WebSocket (the same code). Each returns a Conn implementing
// transport.Conn, so replication runs on it unchanged.
//
// # Wire format
//
// Every WebSocket message is binary: a kind byte, then its payload.
//
//	0x01 message   a reliable message (at most Config.MaxMessageSize bytes)
//	0x02 datagram  a datagram (at most MaxDatagramPayload bytes)
//	0x03 close     code u16 big-endian | reason (at most transport.MaxReasonLen bytes)
//
// The first message each way is the archenet handshake, bounded by
// transport.MaxHandshakeMessageSize; a server's connection reads nothing after
// it until it has sent its Welcome (TCP's flow control holds the peer back).
// Datagrams ride the same ordered socket: a lost TCP segment holds up every
// later one (head-of-line blocking) — the price of working through any proxy.
// A sender never waits on a slow socket: datagrams wait in a bounded queue, the
// oldest dropped, and reliable messages in a bounded backlog, past which the
// connection closes with transport.CodeSendBacklog. A close carries its code
// and reason in a close message, after the reliable messages already sent
// (for at most 250 ms), and the socket closes once the peer has closed its
// end (or 250 ms later): both ends see a *transport.CloseError as over the
// other transports. (A peer that closes with a WebSocket status of 4000 +
// code instead is read the same way.)
//
// # Limits
//
// A server refuses, before the upgrade, a request whose Origin its policy does
// not allow (403; by default the same host only, as WebTransport's), and more
// than Config.MaxPendingSessions connections not yet accepted or more than
// Config.MaxPendingPerAddress from one source (503). A text message, an
// unknown kind, an oversize message or datagram, or a datagram flood closes
// the connection with a reason that says which.
package websocket
