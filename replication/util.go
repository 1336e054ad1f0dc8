package replication

import (
	"math/bits"
	"unsafe"
)

func tz64(w uint64) int { return bits.TrailingZeros64(w) }

func unsafePointer[T any](p *T) unsafe.Pointer { return unsafe.Pointer(p) }
