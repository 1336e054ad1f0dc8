package snapshot

import "math/bits"

func popcount(w uint64) int { return bits.OnesCount64(w) }

// egLen returns the length in bits of the order-k exp-Golomb code of v.
func egLen(v uint64, k uint) int {
	x := v + 1<<k
	l := bits.Len64(x)
	return 2*(l-1-int(k)) + 1 + int(k)
}

// maskRun is the "same field masks as the previous delta" rule, one place for
// the encoder's packing, its writer and the receiver: within one datagram, a
// delta record whose field masks (at most 64 bits) equal the previous delta
// record's sends a 1 bit instead of them.
type maskRun struct {
	mask uint64
	bits int // −1: no previous mask to repeat
}

func newMaskRun() maskRun { return maskRun{bits: -1} }

// repeats reports whether masks of nbits bits with value mask can be sent as
// a repeat.
func (m *maskRun) repeats(mask uint64, nbits int) bool {
	return nbits <= 64 && nbits == m.bits && mask == m.mask
}

// note records the masks of a delta record that sent them.
func (m *maskRun) note(mask uint64, nbits int) {
	if nbits <= 64 {
		m.mask, m.bits = mask, nbits
	} else {
		m.bits = -1
	}
}
