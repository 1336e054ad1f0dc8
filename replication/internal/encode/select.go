package encode

import (
	"math"
	"slices"

	"github.com/archenet/archenet/replication/bitio"
	"github.com/archenet/archenet/replication/internal/baseline"
	"github.com/archenet/archenet/replication/internal/wire"
)

// selection is the candidates a client's byte budget keeps.
type selection struct {
	idx []int // selected candidates, slot order (unless all)
	all bool  // every candidate is selected (idx is not filled)
	// allBytes: the least allowance with which all are (a repeat's need)
	allBytes int
	keys     []uint64 // (byPriority's)
}

// partOverheadBits estimates a datagram's fixed cost for selection: the kind
// byte, the header and the padding to a byte.
func partOverheadBits(h *wire.Header) int {
	return 8 + h.BitLen() + 7 + 2*bitio.ExpGolombLen(wire.MaxParts, 0)
}

// choose keeps the candidates cs that fit total bytes (in datagrams of at
// most mtu bytes), by priority: the accumulated priority acc of each (from
// the client's tracker, sorted by slot as the candidates are) plus its
// weight in ws. idx lists them in slot order.
func (s *selection) choose(cs *candidates, acc []baseline.AccEntry, ws []float32, total, mtu int, h *wire.Header) {
	s.idx = s.idx[:0]
	sum := cs.bits
	over := partOverheadBits(h)
	partBits := mtu*8 - over
	budgetBits := total * 8
	s.allBytes = (sum + (sum/partBits+1)*over + 7) / 8
	if s.all = sum+(sum/partBits+1)*over <= budgetBits; s.all {
		return // (idx is filled when needed: fill)
	}
	s.fill(cs)
	j := 0
	for i := range cs.list {
		cd := &cs.list[i]
		if cd.kind == kindRemoval {
			cd.pri = float32(math.Inf(1))
			continue
		}
		var a float32
		for j < len(acc) && acc[j].Slot < cd.slot {
			j++
		}
		if j < len(acc) && acc[j].Slot == cd.slot {
			a = acc[j].Acc
		}
		cd.pri = a + weight(ws, cd.slot)
	}
	s.byPriority(cs)
	used, n := 0, 0
	for _, i := range s.idx {
		b := int(cs.list[i].bits)
		if u := used + b; u+(u/partBits+1)*over <= budgetBits {
			used = u
			s.idx[n] = i
			n++
		}
	}
	s.idx = s.idx[:n]
	slices.Sort(s.idx)
}

// fill lists every candidate in idx (after choose kept all).
func (s *selection) fill(cs *candidates) {
	s.idx = s.idx[:0]
	for i := range cs.list {
		s.idx = append(s.idx, i)
	}
}

// byPriority sorts idx (every candidate, in slot order) by descending
// priority, ties by slot: as one sort of integer keys, the priority's
// order-preserving bits (inverted: descending) above the candidate's index
// (the candidates are in slot order), with no comparison function.
func (s *selection) byPriority(cs *candidates) {
	keys := s.keys[:0]
	for _, i := range s.idx {
		keys = append(keys, uint64(^priorityBits(cs.list[i].pri))<<32|uint64(uint32(i)))
	}
	slices.Sort(keys)
	for k, key := range keys {
		s.idx[k] = int(uint32(key))
	}
	s.keys = keys
}

// priorityBits maps a priority to a uint32 in the same order (−0 as 0).
func priorityBits(p float32) uint32 {
	if p == 0 {
		return 1 << 31
	}
	b := math.Float32bits(p)
	if b>>31 != 0 {
		return ^b
	}
	return b | 1<<31
}
