package encode

import "math/bits"

// bestGapK returns the exp-Golomb order (0..7) that codes gaps in the
// fewest bits, and that number of bits.
func bestGapK(gaps []uint64) (uint, int) {
	var h gapHist
	for _, g := range gaps {
		h.add(g)
	}
	return h.best()
}

// gapHist gathers what bestGapK needs of a list of gaps, one at a time.
//
// egLen(v, k) = 2·Len(v + 2^k) − k − 1. With m = Len(v) and a the length
// of v below its leading run of ones (a = Len(^v mod 2^m)), Len(v + 2^k) is
// m for k < a, m + 1 for a ≤ k < m (the carry runs through the ones), and
// k + 1 for k ≥ m. So Σ Len(v_i + 2^k) = Σ m_i + #{a_i ≤ k} +
// Σ_{m_i ≤ k} (k − m_i): one pass over the gaps fills small histograms,
// and every order's total follows from them.
type gapHist struct {
	cntA, cntM [8]int32
	sumM, n    int
}

func (h *gapHist) add(g uint64) {
	m := bits.Len64(g)
	a := bits.Len64(^g & (1<<m - 1))
	h.sumM += m
	h.n++
	if a < 8 {
		h.cntA[a]++
	}
	if m < 8 {
		h.cntM[m]++
	}
}

// best returns the order that codes the gaps in the fewest bits, and that
// number of bits.
func (h *gapHist) best() (uint, int) {
	bestK, best := uint(0), 0
	A, CM, SM := 0, 0, 0
	for k := 0; k < 8; k++ {
		A += int(h.cntA[k])
		CM += int(h.cntM[k])
		SM += k * int(h.cntM[k])
		n := 2*(h.sumM+A+k*CM-SM) - (k+1)*h.n
		if k == 0 || n < best {
			bestK, best = uint(k), n
		}
	}
	return bestK, best
}
