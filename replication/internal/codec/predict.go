package codec

import (
	"math/bits"

	"github.com/archenet/archenet/replication/internal/wire"
)

// Extrap is a record's prediction: its lanes are extrapolated Num/Den of
// the step from the prediction view to the baseline past the baseline (Num
// ticks ahead of it, the views Den ticks apart), world lanes quadratically
// through a third view when Quad.
type Extrap struct {
	Num, Den int64
	Quad     bool
}

// Views is an entity's lanes in the views a delta record spans: the
// baseline, the prediction view (nil: no prediction), the third view (nil:
// none) and the current value; or, sliced, one component's.
type Views struct {
	Base, Prev, Third, Cur []uint64
}

// Comp returns the views of the component at lanes [off, off+n).
func (v *Views) Comp(off, n int) Views {
	c := Views{Base: v.Base[off : off+n], Cur: v.Cur[off : off+n]}
	if v.Prev != nil {
		c.Prev = v.Prev[off : off+n]
		if v.Third != nil {
			c.Third = v.Third[off : off+n]
		}
	}
	return c
}

// StepCtx is the context of a predicted lane: the bit length of |step|,
// the size of the extrapolation's step (at most wire.MaxCodeCtx).
func StepCtx(step int64) int {
	if step < 0 {
		step = -step
	}
	return min(bits.Len64(uint64(step)), wire.MaxCodeCtx)
}

// MaskRun is the "same field masks as the previous delta" rule, one place
// for the encoder's packing, its writer and the receiver: within one
// datagram, a delta record whose field masks (at most 64 bits) equal the
// previous delta record's sends a short code instead of them.
type MaskRun struct {
	Mask uint64
	Bits int // −1: no previous mask to repeat
}

// NewMaskRun returns the rule at the start of a datagram.
func NewMaskRun() MaskRun { return MaskRun{Bits: -1} }

// Repeats reports whether masks of nbits bits with value mask can be sent
// as a repeat.
func (m *MaskRun) Repeats(mask uint64, nbits int) bool {
	return nbits <= 64 && nbits == m.Bits && mask == m.Mask
}

// Note records the masks of a delta record that sent them.
func (m *MaskRun) Note(mask uint64, nbits int) {
	if nbits <= 64 {
		m.Mask, m.Bits = mask, nbits
	} else {
		m.Bits = -1
	}
}
