// Package baseline keeps the server's record of what each client holds
// ([Tracker]): per tick, the view the client holds if that tick's
// datagrams arrive (its entities, those the budget deferred at an older
// value, and which datagram carried which record); the acks that turn views
// into baselines, undoing the records of the datagrams an ack says were
// lost, so that every baseline is exactly what the client decoded; and the
// priority each deferred entity accumulated.
//
// The encoder (package encode) reads a client's baseline and prediction
// views from its Tracker and records the tick's new view in it; the
// server's peer feeds it the client's acks.
package baseline
