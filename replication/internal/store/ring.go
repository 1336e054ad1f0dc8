package store

import (
	"fmt"
	"slices"
	"unsafe"

	"github.com/archenet/archenet/replication/internal/entity"
	"github.com/archenet/archenet/replication/schema"
)

// Ring builds and keeps the shared ring of frames on the server. Each net
// tick: [Ring.Begin], one [Ring.Put] per replicated entity in increasing
// slot order, [Ring.Commit]. Put quantizes each component once; if its raw
// bytes equal last tick's, the previous lanes are reused without quantizing.
// Commit detects changed entities by comparing quantized lanes with the
// previous frame ("changed" = a quantized value changed) and records, per
// slot, the tick of its last change and of its last layout change (spawn,
// generation or component set change).
type Ring struct {
	reg     *schema.Registry
	plans   []*schema.Plan
	depth   int
	ring    []Frame
	cur     *Frame
	prev    *Frame
	tick    uint32
	layouts uint32   // the last Frame.layout handed out
	b       building // the frame being built (Begin … Commit)

	// per slot, current
	changedAt []uint32   // tick of the last change of lanes or layout
	layoutAt  []uint32   // tick the current gen/set began
	raws      []rawBytes // last raw component bytes per slot
	changes   [][]uint32 // per ring index: slots changed at that frame's tick (sorted)
	since     sinceSets

	// Stats of the last Commit.
	Quantized, Reused int
}

// building is the state of the frame being built, matched entry by entry
// against the previous frame.
type building struct {
	open bool
	last uint32   // last Put slot + 1 (ordering check)
	pj   int      // next entry of the previous frame to match
	ch   []uint32 // slots changed in the frame being built
	// aligned: every entry so far matches the previous frame's entry at the
	// same index (slot and meta). The frame's Lanes then start as a copy of
	// the previous frame's, and its Slots, Metas, Offs and index are copied
	// in bulk when the alignment ends (unalign) or at Commit: an unchanged
	// entity costs a comparison of its raw bytes, a changed one a quantize
	// into place.
	aligned bool
	// lanesPending: the aligned frame's copy of the previous lanes is still
	// to be made (fillLanes); sharing: shares of StartAligned make it.
	lanesPending, sharing bool
	// reuse: the frame being built was, before Begin recycled it, the
	// frame of tick reuseTick in the previous frame's layout (no layout
	// change since): its lanes still hold that tick's values, so making
	// the copy of the previous lanes copies only the entities changed
	// since (copyLanes). A 50,000-entity world of which a quarter moves
	// copies a quarter of its lanes.
	reuse     bool
	reuseTick uint32
}

// New returns a snapshot store for the components of reg keeping depth
// frames (0 = entity.DefaultDepth).
func New(reg *schema.Registry, depth int) *Ring {
	if depth <= 0 {
		depth = entity.DefaultDepth
	}
	r := &Ring{reg: reg, depth: depth, ring: make([]Frame, depth), changes: make([][]uint32, depth),
		since: sinceSets{cache: map[uint32]entity.Bitset{}}}
	r.plans = reg.Plans()
	return r
}

// ringIndex returns the ring index of tick's frame: a mask for the usual
// power-of-two depth (a division takes tens of cycles, and the encoder
// looks up a few frames per record).
func (r *Ring) ringIndex(tick uint32) uint32 {
	if d := uint32(r.depth); d&(d-1) == 0 {
		return tick & (d - 1)
	}
	return tick % uint32(r.depth)
}

// Depth returns the ring depth.
func (r *Ring) Depth() int { return r.depth }

// Registry returns the component registry.
func (r *Ring) Registry() *schema.Registry { return r.reg }

// Tick returns the tick of the newest committed frame (0 before the first).
func (r *Ring) Tick() uint32 { return r.tick }

// Begin starts the frame of tick (which must be newer than the last one;
// tick 0 is reserved for "none"). The oldest frame of the ring is reused.
func (r *Ring) Begin(tick uint32) {
	if tick == 0 || (r.tick != 0 && int32(tick-r.tick) <= 0) {
		panic(fmt.Sprintf("store: Begin(%d) after tick %d", tick, r.tick))
	}
	if r.b.open {
		panic("store: Begin without Commit")
	}
	ri := r.ringIndex(tick)
	f := &r.ring[ri]
	oldLayout, oldTick := uint32(0), f.Tick
	if f.valid {
		r.since.mu.Lock()
		delete(r.since.cache, f.Tick)
		r.since.mu.Unlock()
		oldLayout = f.layout
	}
	f.Tick = tick
	r.detach(f)
	f.Reset()
	f.valid = false
	r.cur = f
	r.b.open = true
	r.b.last = 0
	r.b.pj = 0
	r.b.ch = r.changes[ri][:0]
	r.Quantized, r.Reused = 0, 0
	r.b.aligned = r.prev != nil && r.prev != f
	// The previous lanes are copied in when first needed: by the first
	// aligned Put or Keep, or range by range by the shares of StartAligned.
	r.b.lanesPending = r.b.aligned
	r.b.reuse = r.b.aligned && oldLayout != 0 && oldLayout == r.prev.layout && cap(f.Lanes) >= len(r.prev.Lanes)
	r.b.reuseTick = oldTick
}

// detach gives f arrays of its own if another frame shares them, so that
// building f does not write into that frame.
func (r *Ring) detach(f *Frame) {
	if f.layout == 0 {
		return
	}
	for i := range r.ring {
		if g := &r.ring[i]; g != f && g.valid && g.layout == f.layout {
			f.Slots, f.Metas, f.Offs, f.index = nil, nil, nil, nil
			break
		}
	}
	f.layout = 0
}

// Commit finishes the frame and returns it. The frame's changes were found
// as its entities were added; what is left of the previous frame was
// despawned. O(despawns) here, allocation-free in steady state.
func (r *Ring) Commit() *Frame {
	if !r.b.open {
		panic("store: Commit without Begin")
	}
	f := r.cur
	if r.b.lanesPending {
		r.fillLanes()
	}
	if r.b.aligned && r.b.pj == len(r.prev.Slots) {
		// Entry for entry the previous frame's layout: the lanes are in
		// place, the index tables are the previous frame's.
		r.unalignAll()
	}
	r.unalign()
	r.b.open = false
	if prev := r.prev; prev != nil {
		for ; r.b.pj < len(prev.Slots); r.b.pj++ {
			r.changed(prev.Slots[r.b.pj], true)
		}
	}
	// Despawns were recorded as they were found, between the entries: the
	// tick's change list must ascend, like the slots of a frame.
	if !slices.IsSorted(r.b.ch) {
		slices.Sort(r.b.ch)
	}
	r.changes[r.ringIndex(f.Tick)] = r.b.ch
	if f.layout == 0 {
		r.layouts++
		f.layout = r.layouts
	}
	f.valid = true
	r.prev = f
	r.tick = f.Tick
	return f
}

// Frame returns the frame of tick if it is still in the ring, else nil.
func (r *Ring) Frame(tick uint32) *Frame {
	if tick == 0 {
		return nil
	}
	f := &r.ring[r.ringIndex(tick)]
	if !f.valid || f.Tick != tick {
		return nil
	}
	return f
}

// Current returns the newest committed frame (nil before the first).
func (r *Ring) Current() *Frame { return r.prev }

// MemoryBytes returns the bytes held by the ring and the per-slot tables
// (capacities, not lengths).
func (r *Ring) MemoryBytes() int {
	n := 0
	seen := map[uint32]bool{}
	for i := range r.ring {
		f := &r.ring[i]
		n += cap(f.Lanes) * 8
		if f.layout != 0 && seen[f.layout] {
			continue // shared with a frame counted already
		}
		seen[f.layout] = true
		n += cap(f.Slots)*4 + cap(f.Metas)*int(unsafe.Sizeof(entity.Meta{})) + cap(f.Offs)*4 + cap(f.index)*4
	}
	for i := range r.changes {
		n += cap(r.changes[i]) * 4
	}
	n += (cap(r.changedAt) + cap(r.layoutAt)) * 4
	n += cap(r.raws) * int(unsafe.Sizeof(rawBytes{}))
	for i := range r.raws {
		n += cap(r.raws[i].b)
	}
	return n
}
