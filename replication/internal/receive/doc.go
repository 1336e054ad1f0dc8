// Package receive is a client's side of snapshot replication: a
// [Receiver] decodes each snapshot datagram the moment it arrives, on top
// of the baseline view it names (a missing baseline drops it, never
// guessed), keeps a ring of the views it decoded, and reports in its Ack
// which datagrams of which ticks it holds, sealing those views so that the
// server's model of each acked view is exact.
//
// A tick may come in several datagrams (parts): the first makes its view
// from the baseline view, later ones merge their records in (written over
// the view's entries in place unless they add or remove entities). A part
// that arrives after its view was sealed is shown ([Receiver.View]) but
// never merged; the server sends its records again.
//
// Everything an attacker controls is bounded: counts by the bits present,
// slots by entity.MaxSlots, decompressed size by codec.MaxBody, views by
// [Receiver.MaxEntities]. Decode returns errors and never panics; a
// datagram that fails leaves the receiver unchanged. A tick's first part
// copies the baseline view (O(entities in view)); Decode allocates nothing
// in steady state.
package receive
