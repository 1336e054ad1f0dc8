package store

import (
	"github.com/archenet/archenet/replication/internal/entity"
)

// Frame is the server's quantized state of every replicated entity at one
// tick, stored once in the Ring's ring and shared by all clients.
type Frame struct {
	Tick uint32
	entity.Entries

	// index maps a slot to its entry; an entry is trusted only if it points
	// back at the slot, so the array never needs clearing.
	index []int32
	valid bool
	// layout names the arrays behind Slots, Metas, Offs and index: frames
	// whose entries all match the previous frame's share them (0: none yet).
	layout uint32
}

// Layout names the arrays behind the frame's Slots and Metas: frames with
// the same (non-zero) layout hold the same entities with the same Meta, so
// what was derived from one holds for the other.
func (f *Frame) Layout() uint32 { return f.layout }

// Peek returns the first lane of slot's entry, or 0, without checking that
// the entry is slot's: a read ahead of the lookups that follow (the entry's
// memory comes into the CPU's caches), never a value to use.
func (f *Frame) Peek(slot int) uint64 {
	if slot < len(f.index) {
		if i := f.index[slot]; int(i) < len(f.Offs) {
			if o := f.Offs[i]; int(o) < len(f.Lanes) {
				return f.Lanes[o]
			}
		}
	}
	return 0
}

// Lookup returns the entry index of slot, or −1. O(1).
func (f *Frame) Lookup(slot uint32) int {
	if int(slot) >= len(f.index) {
		return -1
	}
	i := f.index[slot]
	if int(i) >= len(f.Slots) || f.Slots[i] != slot {
		return -1
	}
	return int(i)
}
