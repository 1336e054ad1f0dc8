package lanes

import (
	"math/bits"

	"github.com/archenet/archenet/replication/bitio"
	"github.com/archenet/archenet/replication/internal/wire"
)

// histLenBins is the number of residual size bins (bin): bit length
// and the bit below the top one.
const histLenBins = 64

// The choice of the residual coding. A numeric lane's residual in a delta record is
// zigzag Rice coded (bitio.WriteRice: a short unary quotient, an
// exp-Golomb escape for the tail) with an order k chosen per lane from a context
// both sides hold, through per-tick parameters the header carries:
//
//   - predicted lane (the record is coded against the extrapolation through
//     view B2): the context is c = bit length of |prediction − baseline|,
//     the step the extrapolation adds; k = clamp(c + Off, 0, Cap). Fast
//     bodies get long codes, resting ones short codes;
//   - unpredicted lane: k = Plain.
//
// Off, Cap and Plain are per lane class (world coordinates; every other
// numeric lane) and per tick: the encoder derives them from the residuals it
// coded in the ticks before, and every datagram of the tick carries them
// (one bit when they are the baseline view's), so a record is coded once per
// (entity, baseline) and copied to every client.
// Quaternion indexes keep order 0; bools and rest flags are 1 bit.

// Hist counts the residuals an encoder coded, per class, context (0 =
// unpredicted, c+1 = predicted with context c) and residual size (bin),
// to pick the next ticks' parameters. rows marks the (class, context) rows
// counted (a tick's residuals fill a few of them): Merge, Best and Reset
// pass over those only.
type Hist struct {
	n     [wire.NumClasses][histCtxs][histLenBins]uint32
	rows  uint64 // bit cl·histCtxs + ctx
	total int
}

// histCtxs is the number of a class's contexts in a Hist.
const histCtxs = wire.MaxCodeCtx + 2

// Total returns how many residuals h counted.
func (h *Hist) Total() int { return h.total }

// Count counts the residuals of st, times n (a record sent n times).
func (h *Hist) Count(st *Stats, n uint32) {
	var rows uint64
	for _, v := range st.lanes[:st.n] {
		cl, ctx := v>>11&1, v>>6&31
		h.n[cl][ctx][v&63] += n
		rows |= 1 << (cl*histCtxs + ctx)
	}
	h.rows |= rows
	h.total += int(st.n) * int(n)
}

// Merge adds o's counts to h.
func (h *Hist) Merge(o *Hist) {
	for r := o.rows; r != 0; r &= r - 1 {
		i := bits.TrailingZeros64(r)
		dst, src := &h.n[i/histCtxs][i%histCtxs], &o.n[i/histCtxs][i%histCtxs]
		for b, c := range src {
			dst[b] += c
		}
	}
	h.rows |= o.rows
	h.total += o.total
}

// Reset empties h.
func (h *Hist) Reset() {
	for r := h.rows; r != 0; r &= r - 1 {
		i := bits.TrailingZeros64(r)
		h.n[i/histCtxs][i%histCtxs] = [histLenBins]uint32{}
	}
	h.rows, h.total = 0, 0
}

// bin is a residual's size class: twice its bit length (at most 31),
// plus the bit below its top one.
func bin(z uint64) int {
	m := bits.Len64(z)
	if m < 2 {
		return m
	}
	if m > 31 {
		return histLenBins - 1
	}
	return 2*m - 2 + int(z>>(m-2)&1)
}

// binCost is the Rice code length at each order of a residual typical of
// each bin.
var binCost = func() (t [histLenBins][wire.MaxCodeCap + 1]uint8) {
	for b := range t {
		for k := range t[b] {
			t[b][k] = uint8(bitio.RiceLen(binValue(b), uint(k)))
		}
	}
	return t
}()

// binValue is a residual typical of bin b (the middle of its range).
func binValue(b int) uint64 {
	if b < 2 {
		return uint64(b)
	}
	m := uint(b+2) / 2
	v := uint64(2|b&1) << (m - 2)
	if m >= 3 {
		v |= 1 << (m - 3)
	}
	return v
}

// MinSamples is how many residuals are gathered before the parameters are
// chosen again.
const MinSamples = 256

// Stats is what a delta record tells the choice of the coding: its first
// recStatLanes residuals (class, context and size bin, packed) and what
// quadratic extrapolation saved (or would have) on its positions.
type Stats struct {
	lanes [recStatLanes]uint16
	n     uint8
	// QuadN and QuadGain: how many positions quadratic extrapolation was
	// measured on, and the bits it saved (or would have) on them.
	QuadN    uint8
	QuadGain int16
}

const recStatLanes = 8

func (s *Stats) add(cl, ctx int, z uint64) {
	if int(s.n) < recStatLanes {
		s.lanes[s.n] = uint16(cl<<11 | (ctx+1)<<6 | bin(z))
		s.n++
	}
}

// addBinCost adds n residuals of a bin whose code lengths per order are
// bc to the context's cost per order (written out: it runs for every bin
// of every context at each choice).
func addBinCost(c *[wire.MaxCodeCap + 1]uint64, bc *[wire.MaxCodeCap + 1]uint8, n uint64) {
	c[0] += n * uint64(bc[0])
	c[1] += n * uint64(bc[1])
	c[2] += n * uint64(bc[2])
	c[3] += n * uint64(bc[3])
	c[4] += n * uint64(bc[4])
	c[5] += n * uint64(bc[5])
	c[6] += n * uint64(bc[6])
	c[7] += n * uint64(bc[7])
	c[8] += n * uint64(bc[8])
	c[9] += n * uint64(bc[9])
	c[10] += n * uint64(bc[10])
	c[11] += n * uint64(bc[11])
	c[12] += n * uint64(bc[12])
	c[13] += n * uint64(bc[13])
	c[14] += n * uint64(bc[14])
	c[15] += n * uint64(bc[15])
}

// bestOffCap returns the offset and cap of the predicted orders that code
// the residuals of cost (cost[ctx+1][k]: bits of context ctx's residuals at
// order k) in the fewest bits, and those bits; ties go to the smallest cap,
// then the smallest offset. A context's order is clamp(ctx+off, 0, cap):
// for each offset, the contexts at or below cap−off take their unclamped
// order (a prefix sum over contexts) and those above take cap (a suffix sum
// of column cap), so each (offset, cap) costs two lookups, not a pass over
// the contexts.
func bestOffCap(cost *[wire.MaxCodeCtx + 2][wire.MaxCodeCap + 1]uint64) (off int8, cp uint8, best uint64) {
	const nctx = wire.MaxCodeCtx + 1
	// above[k][i]: bits of contexts i… at order k.
	var above [wire.MaxCodeCap + 1][nctx + 1]uint64
	for k := range above {
		for i := nctx - 1; i >= 0; i-- {
			above[k][i] = above[k][i+1] + cost[i+1][k]
		}
	}
	// upto[o][i]: bits of contexts 0…i−1 at order max(ctx+off, 0), for
	// offset wire.MinCodeOff+o (an order beyond wire.MaxCodeCap is never taken: the
	// cap clamps it first).
	var upto [wire.MaxCodeOff - wire.MinCodeOff + 1][nctx + 1]uint64
	for o := range upto {
		for i := range nctx {
			k := min(max(i+o+wire.MinCodeOff, 0), wire.MaxCodeCap)
			upto[o][i+1] = upto[o][i] + cost[i+1][k]
		}
	}
	best = ^uint64(0)
	for c := 0; c <= wire.MaxCodeCap; c++ {
		for o := wire.MinCodeOff; o <= wire.MaxCodeOff; o++ {
			// Contexts ctx with ctx+o ≤ c keep their order: ctx < c−o+1.
			n := min(max(c-o+1, 0), nctx)
			sum := upto[o-wire.MinCodeOff][n] + above[c][n]
			if sum < best {
				best, off, cp = sum, int8(o), uint8(c)
			}
		}
	}
	return off, cp, best
}

// Best returns the parameters that would have coded the counted residuals
// in the fewest bits (each residual's code length estimated from the
// typical residual of its bin), the bits they would have taken, and the
// bits under cur.
func (h *Hist) Best(cur *wire.Coding) (c wire.Coding, bitsBest, bitsCur uint64) {
	for cl := range wire.NumClasses {
		// cost[ctx][k]: bits of context ctx's residuals at order k.
		var cost [wire.MaxCodeCtx + 2][wire.MaxCodeCap + 1]uint64
		seen := false
		for r := h.rows >> (cl * histCtxs) & (1<<histCtxs - 1); r != 0; r &= r - 1 {
			ctx := bits.TrailingZeros64(r)
			for b, cnt := range h.n[cl][ctx] {
				if cnt != 0 {
					seen = true
					addBinCost(&cost[ctx], &binCost[b], uint64(cnt))
				}
			}
		}
		if !seen {
			c.Off[cl], c.Cap[cl], c.Plain[cl] = cur.Off[cl], cur.Cap[cl], cur.Plain[cl]
			continue
		}
		// Unpredicted residuals: the best single order.
		for k := range cost[0] {
			if cost[0][k] < cost[0][c.Plain[cl]] {
				c.Plain[cl] = uint8(k)
			}
		}
		bitsBest += cost[0][c.Plain[cl]]
		bitsCur += cost[0][cur.Plain[cl]]
		for ctx := 0; ctx <= wire.MaxCodeCtx; ctx++ {
			bitsCur += cost[ctx+1][cur.OrderCtx(cl, ctx)]
		}
		off, cp, best := bestOffCap(&cost)
		c.Off[cl], c.Cap[cl] = off, cp
		bitsBest += best
	}
	return c, bitsBest, bitsCur
}
