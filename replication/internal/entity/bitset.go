package entity

import "math/bits"

// Bitset is a set of entity slots, one bit per slot.
type Bitset []uint64

// Has reports whether slot is in the set.
func (b Bitset) Has(slot uint32) bool {
	i := slot >> 6
	return int(i) < len(b) && b[i]>>(slot&63)&1 != 0
}

// Set adds slot, growing the set as needed.
func (b *Bitset) Set(slot uint32) {
	i := int(slot >> 6)
	for len(*b) <= i {
		*b = append(*b, 0)
	}
	(*b)[i] |= 1 << (slot & 63)
}

// Clear removes slot.
func (b Bitset) Clear(slot uint32) {
	i := slot >> 6
	if int(i) < len(b) {
		b[i] &^= 1 << (slot & 63)
	}
}

// Reset empties the set, keeping its memory.
func (b *Bitset) Reset() {
	clear(*b)
	*b = (*b)[:0]
}

// Count returns the number of slots in the set.
func (b Bitset) Count() int {
	n := 0
	for _, w := range b {
		n += bits.OnesCount64(w)
	}
	return n
}

// Word returns the i-th 64-slot word (0 beyond the end).
func (b Bitset) Word(i int) uint64 {
	if i < len(b) {
		return b[i]
	}
	return 0
}

// AndNot removes the slots of o from b.
func (b Bitset) AndNot(o Bitset) {
	n := min(len(b), len(o))
	for i := range n {
		b[i] &^= o[i]
	}
}

// Intersects reports whether b and o share a slot.
func (b Bitset) Intersects(o Bitset) bool {
	n := min(len(b), len(o))
	x, y := b[:n], o[:n]
	for i := range x {
		if x[i]&y[i] != 0 {
			return true
		}
	}
	return false
}

// Or adds the slots of o to b.
func (b *Bitset) Or(o Bitset) {
	for len(*b) < len(o) {
		*b = append(*b, 0)
	}
	s := (*b)[:len(o)]
	for i, w := range o {
		s[i] |= w
	}
}

// Same reports whether a and b hold the same slots (whatever their
// lengths: missing words are empty).
func Same(a, b Bitset) bool { return NextDiff(a, b, 0) >= max(len(a), len(b)) }

// NextDiff returns the first word index from i on at which a and b differ,
// or the longer one's length: a scan of two sets that are mostly equal, in
// a loop without bounds checks.
func NextDiff(a, b Bitset, i int) int {
	if n := min(len(a), len(b)); i < n {
		x, y := a[i:n], b[i:n]
		y = y[:len(x)]
		for j := range x {
			if x[j] != y[j] {
				return i + j
			}
		}
		i = n
	}
	for i < max(len(a), len(b)) && a.Word(i) == b.Word(i) {
		i++
	}
	return i
}
