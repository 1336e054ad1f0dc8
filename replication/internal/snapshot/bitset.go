package snapshot

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
		n += popcount(w)
	}
	return n
}

func (b Bitset) word(i int) uint64 {
	if i < len(b) {
		return b[i]
	}
	return 0
}

// Word returns the i-th 64-slot word (0 beyond the end).
func (b Bitset) Word(i int) uint64 { return b.word(i) }

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

// nextCand returns the first word index in [i, lim) holding a slot that
// is relevant or held and changed, or relevant and not held, or held and
// not relevant (collectAll's candidates), or lim: the skip of a sparse scan,
// in a loop without bounds checks.
func nextCand(rel, held, changed Bitset, i, lim int) int {
	if n := min(lim, len(rel), len(held), len(changed)); i < n {
		r, m, c := rel[i:n], held[i:n], changed[i:n]
		m, c = m[:len(r)], c[:len(r)]
		for j := range r {
			if c[j]&(r[j]|m[j])|(r[j]^m[j]) != 0 {
				return i + j
			}
		}
		i = n
	}
	for i < lim && changed.word(i)&(rel.word(i)|held.word(i))|(rel.word(i)^held.word(i)) == 0 {
		i++
	}
	return i
}
