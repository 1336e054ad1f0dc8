package snapshot

import "slices"

func slicesSort(a []uint32) { slices.Sort(a) }
