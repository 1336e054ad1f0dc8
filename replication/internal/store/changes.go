package store

import (
	"sync"

	"github.com/archenet/archenet/replication/internal/entity"
)

// sinceSets caches ChangedSince's sets for the tick, one per base tick
// (the encoders of several workers ask concurrently), and keeps the spare
// ones for reuse.
type sinceSets struct {
	mu    sync.Mutex
	cache map[uint32]entity.Bitset
	spare []entity.Bitset
}

// ChangedAt returns the tick of the last change (values or layout) of slot.
func (r *Ring) ChangedAt(slot uint32) uint32 {
	if int(slot) >= len(r.changedAt) {
		return 0
	}
	return r.changedAt[slot]
}

// Slots returns how many slots the ring has tracked (one past the highest
// slot ever put).
func (r *Ring) Slots() int { return len(r.changedAt) }

// ChangedAts returns, per slot, the tick of its last change (values or
// layout): read-only, valid until the next Begin. Scans that look at many
// slots read it instead of calling ChangedAt.
func (r *Ring) ChangedAts() []uint32 { return r.changedAt }

// LayoutAts returns, per slot, the tick at which its current generation
// and component set began: read-only, valid until the next Begin.
func (r *Ring) LayoutAts() []uint32 { return r.layoutAt }

// LayoutAt returns the tick at which slot's current generation and
// component set began.
func (r *Ring) LayoutAt(slot uint32) uint32 {
	if int(slot) >= len(r.layoutAt) {
		return 0
	}
	return r.layoutAt[slot]
}

// ChangedSince returns the set of slots that changed (values, layout, spawn
// or despawn) in the ticks after base up to the newest frame, or ok=false if
// base is older than the ring. The set is computed once per base tick and
// shared by all clients acking that base; do not modify it. Safe for
// concurrent use between Commit and EndTick (the encoders of several
// workers).
func (r *Ring) ChangedSince(base uint32) (slots entity.Bitset, ok bool) {
	if base == r.tick {
		return nil, true
	}
	if r.Frame(base) == nil {
		return nil, false
	}
	r.since.mu.Lock()
	defer r.since.mu.Unlock()
	if s, hit := r.since.cache[base]; hit {
		return s, true
	}
	var out entity.Bitset
	if n := len(r.since.spare); n > 0 {
		out = r.since.spare[n-1]
		r.since.spare = r.since.spare[:n-1]
	}
	words := (len(r.changedAt) + 63) / 64
	if cap(out) < words {
		out = make(entity.Bitset, words)
	}
	out = out[:words]
	clear(out)
	for t := base + 1; int32(t-r.tick) <= 0; t++ {
		for _, s := range r.changes[r.ringIndex(t)] {
			out[s>>6] |= 1 << (s & 63)
		}
	}
	r.since.cache[base] = out
	return out, true
}

// EndTick releases per-tick caches; call after all clients of the newest
// frame have been served.
func (r *Ring) EndTick() {
	for k, v := range r.since.cache {
		r.since.spare = append(r.since.spare, v)
		delete(r.since.cache, k)
	}
}
