package replication

import "github.com/archenet/archenet/replication/snapshot"

// SetBitAccounting turns on (or off) the attribution of the snapshot
// datagrams' bits to component types, record framing and headers in every
// worker's encoder ([snapshot.Encoder.SetAccounting]); turning it on starts
// from zero. Off by default: it costs a little per record encoded while on.
// Call it on the server's goroutine, like Send.
func (s *Server) SetBitAccounting(on bool) {
	for _, w := range s.workers {
		w.enc.SetAccounting(on)
	}
}

// BitAccount returns the bits of the snapshot datagrams sent since
// [Server.SetBitAccounting] turned accounting on, per component ID (the
// registry's order, Registry().Plans()) and for framing and headers,
// summed over clients; exact, before compression. ok is false when
// accounting is off. Allocates; for stats, not for every tick.
func (s *Server) BitAccount() (a snapshot.Account, ok bool) {
	for _, w := range s.workers {
		if wa := w.enc.Account(); wa != nil {
			a.Add(wa)
			ok = true
		}
	}
	return a, ok
}
