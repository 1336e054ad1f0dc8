// Package netem is a UDP impairment proxy for tests over real sockets: it sits between
// a client and a server on loopback and delays, jitters, loses, duplicates and reorders
// datagrams, or drops everything for an outage, per direction, with a seeded random
// source. It needs no privileges (unlike the kernel's netem), so tests of congestion
// control and convergence can run real QUIC through it.
//
// A [Proxy] listens on 127.0.0.1 and forwards to one target address; each client
// address that sends to it gets its own upstream socket, so the server sees one peer
// per client. Point the client at [Proxy.Addr] instead of the server.
//
// Delays are real time, so results vary from run to run like a real network's; the
// seed fixes only which packets are lost, duplicated or reordered given their order.
//
// # Tasks
//
//   - Put a proxy in front of a server: [Listen](serverAddr, seed), then dial [Proxy.Addr].
//   - Impair the path: [Proxy.SetConditions] with [Conditions] per direction.
//   - Take the path down and back up (an outage, or a peer that vanished): [Proxy.SetDown].
//   - Move the clients to new source ports (a NAT rebinding, Wi-Fi to mobile): [Proxy.Rebind].
//   - See what happened to the datagrams: [Proxy.Stats].
//   - A TCP connection (a WebSocket) through the same conditions: [ListenTCP], whose
//     loss is TCP's: a lost chunk arrives a retransmission later and holds up the rest.
package netem
