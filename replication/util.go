package replication

import (
	"math/bits"
	"unsafe"

	"github.com/archenet/archenet/replication/internal/snapshot"
)

func tz64(w uint64) int { return bits.TrailingZeros64(w) }

func unsafePointer[T any](p *T) unsafe.Pointer { return unsafe.Pointer(p) }

// nextDiff returns the first word index from i on at which a and b differ,
// or the longer one's length: a scan of two sets that are mostly equal, in a
// loop without bounds checks.
func nextDiff(a, b snapshot.Bitset, i int) int {
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
