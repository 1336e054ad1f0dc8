package gang

import "sync/atomic"

// Claims hands out the indices of a share [lo, hi) of a job's items from
// both ends: how many were taken from the front (low 32 bits) and from the
// back. The zero value has none taken.
type Claims struct{ v atomic.Uint64 }

// Reset makes every index available again.
func (c *Claims) Reset() { c.v.Store(0) }

// Claim takes the next index from the front or the back; false when none
// is left.
func (c *Claims) Claim(lo, hi int, back bool) (int, bool) {
	for {
		v := c.v.Load()
		front, rear := int(v&(1<<32-1)), int(v>>32)
		if lo+front >= hi-rear {
			return 0, false
		}
		if back {
			if c.v.CompareAndSwap(v, v+1<<32) {
				return hi - 1 - rear, true
			}
		} else if c.v.CompareAndSwap(v, v+1) {
			return lo + front, true
		}
	}
}
