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

// byPriority sorts idx by descending priority (ties by slot).
func (s *selection) byPriority(cs *candidates) {
	slices.SortFunc(s.idx, func(a, b int) int {
		pa, pb := cs.list[a].pri, cs.list[b].pri
		switch {
		case pa > pb:
			return -1
		case pa < pb:
			return 1
		}
		return int(cs.list[a].slot) - int(cs.list[b].slot)
	})
}
