package snapshot

import "math/bits"

func popcount(w uint64) int { return bits.OnesCount64(w) }

// egLen returns the length in bits of the order-k exp-Golomb code of v.
func egLen(v uint64, k uint) int {
	x := v + 1<<k
	l := bits.Len64(x)
	return 2*(l-1-int(k)) + 1 + int(k)
}
