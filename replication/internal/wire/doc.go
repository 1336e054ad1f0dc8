// Package wire holds every message of archenet's replication protocol, one
// file per message, each with its append, its length and its parse: the
// snapshot datagram's header (with the residual [Coding] it carries) and
// the client's [Ack] (unreliable datagrams), and the reliable messages a
// server sends after its Welcome: the Welcome's replication payload, spawn
// batches, the ready message, spawns that ended unsent, drain notices, and
// the component list of a Reject.
//
// The records inside a snapshot datagram, and how their values are coded,
// are package codec's; the handshake's Hello, Welcome and Reject frames are
// package transport's.
//
// Every parse bounds what an attacker controls (counts by the bits present,
// lengths by their limits) and returns an error wrapping [ErrCorrupt] or
// [ErrMalformed]; none panics.
package wire
