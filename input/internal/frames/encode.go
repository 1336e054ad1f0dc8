package frames

import (
	"math/bits"

	"github.com/archenet/archenet/replication/bitio"
)

// TickBits is the width of a tick on the wire: the low bits of a section's
// oldest tick (and of the ack in the server's input feedback).
const TickBits = 16

// Section header widths.
const (
	countBits = 5  // count − 1
	viewBits  = 10 // the oldest frame's view lag, quarter ticks
)

// MaxViewLag is the largest view lag a frame carries, in quarter ticks: how
// far behind its tick the client's render clock was when it sampled it.
const MaxViewLag = 1<<viewBits - 1

// AppendFrames writes an input section to w: count = len(frames)/NumLanes
// consecutive frames for ticks first, first+1, …; frames holds their lanes
// back to back (from [Codec.Quantize], so every code is valid). views, if
// not nil, holds each frame's view lag in quarter ticks (at most
// MaxViewLag; larger ones are written as it): the server's lag
// compensation reads it (the input log's View).
//
// The oldest frame is coded against base, the lanes of the frame of
// baseTick that the receiver has acknowledged holding, when base is non-nil
// and first−baseTick is in −MaxRedundancy..BaselineWindow; otherwise against
// the zero input. Every later frame is coded against the frame before it in the same
// section. Nothing depends on an earlier datagram having arrived, so any
// pattern of loss, duplication and reordering decodes correctly (see the
// wire layout in package input's documentation).
//
// Panics if the frame count is not in 1..[MaxRedundancy] or frames is not a
// multiple of NumLanes (a programming error). Allocation-free once w's buffer
// has grown. See also [Sender.AppendFrames], which keeps the history for you.
func (c *Codec[I]) AppendFrames(w *bitio.Writer, first uint32, frames []uint64, views []uint16, baseTick uint32, base []uint64) {
	nl := len(c.lanes)
	count := len(frames) / nl
	if count < 1 || count > MaxRedundancy || count*nl != len(frames) || (views != nil && len(views) != count) {
		panic("input: AppendFrames needs 1..MaxRedundancy whole frames (and a view per frame, if any)")
	}
	w.WriteBits(uint64(first), TickBits)
	w.WriteBits(uint64(count-1), countBits)
	if back := int64(int32(first-baseTick)) - 1; base != nil && back >= -MaxRedundancy-1 && back < int64(c.window) {
		w.WriteBits(1, 1)
		w.WriteExpGolomb(bitio.ZigZag(back), 0)
	} else {
		w.WriteBits(0, 1)
		base = c.zero
	}
	writeViews(w, views)
	var ord [256]uint8
	for i := range ord[:nl] {
		ord[i] = initialOrder
	}
	var prevMask uint64
	for f := 0; f < count; f++ {
		cur := frames[f*nl : (f+1)*nl]
		mask := c.diffMask(base, cur)
		if f > 0 && mask == prevMask {
			w.WriteBits(1, 1)
		} else {
			if f > 0 {
				w.WriteBits(0, 1)
			}
			w.WriteBits(mask, c.ng)
		}
		for m := mask; m != 0; m &= m - 1 {
			c.writeGroup(w, bits.TrailingZeros64(m), base, cur, &ord)
		}
		prevMask = mask
		base = cur
	}
}

// writeViews writes the section's view flag and, if set, the frames' view
// lags: the oldest in viewBits, each later one as an order-0 exp-Golomb code
// of zigzag(lag − the previous frame's).
func writeViews(w *bitio.Writer, views []uint16) {
	if views == nil {
		w.WriteBits(0, 1)
		return
	}
	w.WriteBits(1, 1)
	prev := int64(min(views[0], MaxViewLag))
	w.WriteBits(uint64(prev), viewBits)
	for _, v := range views[1:] {
		cur := int64(min(v, MaxViewLag))
		w.WriteExpGolomb(bitio.ZigZag(cur-prev), 0)
		prev = cur
	}
}

// diffMask returns the groups whose lanes differ between a and b.
func (c *Codec[I]) diffMask(a, b []uint64) uint64 {
	var mask uint64
	for i := range c.lanes {
		if a[i] != b[i] {
			mask |= 1 << c.lanes[i].Group
		}
	}
	return mask
}

// egLen is the length in bits of WriteExpGolomb(z, k).
func egLen(z uint64, k uint8) int {
	return 2*bits.Len64(z+1<<k) - int(k) - 1
}

func (c *Codec[I]) writeGroup(w *bitio.Writer, g int, base, cur []uint64, ord *[256]uint8) {
	gr := &c.groups[g]
	switch c.kinds[g] {
	case groupFlip:
		// A changed bool has one possible value.
	case groupFull:
		c.plan.WriteGroup(w, g, cur)
	default:
		single := gr.Count == 1
		for i := gr.First; i < gr.First+gr.Count; i++ {
			l := &c.lanes[i]
			if absoluteOnly(l) {
				w.WriteBits(cur[i], uint(l.Bits))
				continue
			}
			z := bitio.ZigZag(l.Delta(base[i], cur[i]))
			k := ord[i]
			ord[i] = nextOrder(z)
			if single {
				z-- // a changed single-lane group never has a zero residual
			}
			if z < 1<<32 && egLen(z, k) <= int(l.Bits) {
				w.WriteBits(0, 1)
				w.WriteExpGolomb(z, uint(k))
			} else {
				w.WriteBits(1, 1)
				w.WriteBits(cur[i], uint(l.Bits))
			}
		}
	}
}
