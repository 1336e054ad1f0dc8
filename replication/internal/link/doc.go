// Package link is a replication client's side of its channel to the
// server, as a state machine without I/O: the server's reliable messages
// and snapshot datagrams go in with the time, and out come events for the
// client to apply to its world (welcome, rejection, a spawn batch, ready,
// a drain notice), the ticks whose views gained datagrams, the liveness
// verdict, and the datagram to send (ack and input). It holds no
// connection, starts no goroutine and does not touch the world.
package link
