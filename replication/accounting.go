package replication

import (
	"github.com/archenet/archenet/replication/internal/codec"
	"github.com/archenet/archenet/replication/internal/encode"
)

// SetBitAccounting turns on (or off) the attribution of the snapshot
// datagrams' bits to component types, record framing and headers in every
// worker's encoder; turning it on starts
// from zero. Off by default: it costs a little per record encoded while on.
// Call it on the server's goroutine, like Send.
func (s *Server) SetBitAccounting(on bool) {
	for _, w := range s.work.workers {
		w.Enc.SetAccounting(on)
	}
}

// BitAccount returns the bits of the snapshot datagrams sent since
// [Server.SetBitAccounting] turned accounting on, per component ID (the
// registry's order, Registry().Plans()) and for framing and headers,
// summed over clients; exact, before compression. ok is false when
// accounting is off. Allocates; for stats, not for every tick.
func (s *Server) BitAccount() (BitAccount, bool) {
	var a encode.Account
	ok := false
	for _, w := range s.work.workers {
		if wa := w.Enc.Account(); wa != nil {
			a.Add(wa)
			ok = true
		}
	}
	return BitAccount(a), ok
}

// BitAccount attributes the bits of the snapshot datagrams a server sent
// to what they carry ([Server.BitAccount]): exact bits as written, before
// compression and without the padding of each datagram to whole bytes.
type BitAccount struct {
	// Components holds, per component ID (registry order), the bits of that
	// component's data: its lanes in full records; its field-mask bits and
	// residuals in delta records.
	Components []uint64
	// Records is the per-record framing: slot gap codes, record kinds,
	// mask-repeat flags, the prediction flag of a delta record, and a full
	// record's generation, owner and component set; removal records are
	// only framing.
	Records uint64
	// Headers is the datagrams' kind bytes and headers.
	Headers uint64
	// Unattributed is the bits of records the encoders had cached before
	// accounting was turned on (only in the tick it was turned on).
	Unattributed uint64
}

// TrainDictionary builds a zstd dictionary for ServerConfig and
// ClientConfig.CompressionDictionary from sample snapshot datagrams (as a
// server without one sent them: transport/sim's trace hands them over).
// Server and clients must use the same dictionary.
func TrainDictionary(samples [][]byte) ([]byte, error) { return codec.TrainDictionary(samples) }
