package encode

import (
	"math"
	"math/bits"
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
	tmp      []uint64 // (radixSort's)
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
	s.inOrder(len(cs.list))
}

// inOrder sorts idx (distinct candidate indexes below n) ascending: through
// a bit set of them, in O(n/64 + len(idx)).
func (s *selection) inOrder(n int) {
	words := (n + 63) / 64
	set := slices.Grow(s.tmp[:0], words)[:words]
	clear(set)
	for _, i := range s.idx {
		set[i>>6] |= 1 << (i & 63)
	}
	s.idx = s.idx[:0]
	for wi, w := range set {
		for ; w != 0; w &= w - 1 {
			s.idx = append(s.idx, wi<<6|bits.TrailingZeros64(w))
		}
	}
	s.tmp = set
}

// fill lists every candidate in idx (after choose kept all).
func (s *selection) fill(cs *candidates) {
	s.idx = s.idx[:0]
	for i := range cs.list {
		s.idx = append(s.idx, i)
	}
}

// byPriority sorts idx (every candidate, in slot order) by descending
// priority, ties by slot: integer keys, the priority's order-preserving
// bits (inverted: descending) above the candidate's index (the candidates
// are in slot order), sorted by their priority bits alone with a stable
// radix sort (ties keep the index order), with no comparison function.
func (s *selection) byPriority(cs *candidates) {
	keys := s.keys[:0]
	for _, i := range s.idx {
		keys = append(keys, uint64(^priorityBits(cs.list[i].pri))<<32|uint64(uint32(i)))
	}
	keys = s.radixSort(keys)
	for k, key := range keys {
		s.idx[k] = int(uint32(key))
	}
	s.keys = keys
}

// radixSort sorts keys by their high 32 bits, stably (least significant
// byte first, skipping bytes every key shares), and returns them sorted:
// keys itself or s.tmp, whose arrays it swaps.
func (s *selection) radixSort(keys []uint64) []uint64 {
	if len(keys) < 64 {
		slices.Sort(keys) // (the low bits are in order already: the same result)
		return keys
	}
	var counts [4][256]int32
	for _, k := range keys {
		counts[0][byte(k>>32)]++
		counts[1][byte(k>>40)]++
		counts[2][byte(k>>48)]++
		counts[3][byte(k>>56)]++
	}
	tmp := slices.Grow(s.tmp[:0], len(keys))[:len(keys)]
	n := int32(len(keys))
	for d := range 4 {
		c := &counts[d]
		shift := uint(32 + 8*d)
		if c[byte(keys[0]>>shift)] == n {
			continue // (every key has this byte)
		}
		var pos [256]int32
		sum := int32(0)
		for b := range 256 {
			pos[b] = sum
			sum += c[b]
		}
		for _, k := range keys {
			b := byte(k >> shift)
			tmp[pos[b]] = k
			pos[b]++
		}
		keys, tmp = tmp, keys
	}
	s.tmp = tmp
	return keys
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
