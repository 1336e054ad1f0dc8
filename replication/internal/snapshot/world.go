package snapshot

import (
	"fmt"
	"math/bits"
	"slices"
	"sync"
	"unsafe"

	"github.com/archenet/archenet/replication/schema"
)

// DefaultDepth is the default number of ticks a snapshot ring keeps.
const DefaultDepth = 32

// MaxSlots bounds entity slots (net indices are 24 bits).
const MaxSlots = 1 << 24

// Meta is the identity and layout of an entity in a frame.
type Meta struct {
	Gen   uint32 // net generation of the slot's current incarnation
	Owner uint8  // owning client id (0 = server)
	Set   uint64 // replicated component ids present (bit i = registry id i)
}

// Entries is the entity table frames and views share: entities sorted by
// slot, their identity and layout, and their quantized lanes.
type Entries struct {
	Slots []uint32 // sorted entity slots (net indices)
	Metas []Meta
	Offs  []uint32 // first lane of each entry in Lanes
	Lanes []uint64
}

// EntityLanes returns the lanes of entry i (all components of its set, in
// registry id order).
func (e *Entries) EntityLanes(i int) []uint64 {
	end := uint32(len(e.Lanes))
	if i+1 < len(e.Offs) {
		end = e.Offs[i+1]
	}
	return e.Lanes[e.Offs[i]:end]
}

// Len returns the number of entities.
func (e *Entries) Len() int { return len(e.Slots) }

func (e *Entries) reset() {
	e.Slots, e.Metas, e.Offs, e.Lanes = e.Slots[:0], e.Metas[:0], e.Offs[:0], e.Lanes[:0]
}

// Frame is the server's quantized state of every replicated entity at one
// tick, stored once in the World's ring and shared by all clients.
type Frame struct {
	Tick uint32
	Entries

	// index maps a slot to its entry; an entry is trusted only if it points
	// back at the slot, so the array never needs clearing.
	index []int32
	valid bool
	// layout names the arrays behind Slots, Metas, Offs and index: frames
	// whose entries all match the previous frame's share them (0: none yet).
	layout uint32
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

// World builds and keeps the shared ring of frames on the server. Each net
// tick: [World.Begin], one [World.Put] per replicated entity in increasing
// slot order, [World.Commit]. Put quantizes each component once; if its raw
// bytes equal last tick's, the previous lanes are reused without quantizing.
// Commit detects changed entities by comparing quantized lanes with the
// previous frame ("changed" = a quantized value changed) and records, per
// slot, the tick of its last change and of its last layout change (spawn,
// generation or component set change).
type World struct {
	codes codeState  // residual coding (coding.go)
	pre   preRecords // the tick's pre-encoded records (pre.go)
	reg   *schema.Registry
	depth int
	ring  []Frame
	cur   *Frame
	prev  *Frame
	tick  uint32
	open  bool
	last  uint32 // last Put slot + 1 (ordering check)
	plans []*schema.Plan

	pj int      // next entry of the previous frame to match (while building)
	ch []uint32 // slots changed in the frame being built
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
	layouts               uint32 // the last Frame.layout handed out
	// reuse: the frame being built was, before Begin recycled it, the
	// frame of tick reuseTick in the previous frame's layout (no layout
	// change since): its lanes still hold that tick's values, so making
	// the copy of the previous lanes copies only the entities changed
	// since (copyLanes). A 50,000-entity world of which a quarter moves
	// copies a quarter of its lanes.
	reuse     bool
	reuseTick uint32

	// per slot, current
	changedAt  []uint32   // tick of the last change of lanes or layout
	layoutAt   []uint32   // tick the current gen/set began
	raws       []rawBytes // last raw component bytes per slot
	changes    [][]uint32 // per ring index: slots changed at that frame's tick (sorted)
	sinceMu    sync.Mutex
	sinceCache map[uint32]Bitset
	sinceBuf   []Bitset

	// Stats of the last Commit.
	Quantized, Reused int
}

// NewWorld returns a snapshot store for the components of reg keeping depth
// frames (0 = DefaultDepth).
func NewWorld(reg *schema.Registry, depth int) *World {
	if depth <= 0 {
		depth = DefaultDepth
	}
	w := &World{reg: reg, depth: depth, ring: make([]Frame, depth), changes: make([][]uint32, depth),
		sinceCache: map[uint32]Bitset{}}
	w.plans = reg.Plans()
	w.codes.coding = defaultCoding
	w.pre.minShare = 2
	return w
}

// ringIndex returns the ring index of tick's frame: a mask for the usual
// power-of-two depth (a division takes tens of cycles, and the encoder
// looks up a few frames per record).
func (w *World) ringIndex(tick uint32) uint32 {
	if d := uint32(w.depth); d&(d-1) == 0 {
		return tick & (d - 1)
	}
	return tick % uint32(w.depth)
}

// Depth returns the ring depth.
func (w *World) Depth() int { return w.depth }

// Registry returns the component registry.
func (w *World) Registry() *schema.Registry { return w.reg }

// Tick returns the tick of the newest committed frame (0 before the first).
func (w *World) Tick() uint32 { return w.tick }

// rawBytes is a slot's component bytes as its last quantization read
// them, and the component set they are of (0: none kept); one per slot,
// so that the unchanged check reads one table.
type rawBytes struct {
	set uint64
	b   []byte
}

func (w *World) growSlots(n int) {
	for len(w.changedAt) < n {
		w.changedAt = append(w.changedAt, 0)
		w.layoutAt = append(w.layoutAt, 0)
		w.raws = append(w.raws, rawBytes{})
	}
}

// Begin starts the frame of tick (which must be newer than the last one;
// tick 0 is reserved for "none"). The oldest frame of the ring is reused.
func (w *World) Begin(tick uint32) {
	if tick == 0 || (w.tick != 0 && int32(tick-w.tick) <= 0) {
		panic(fmt.Sprintf("snapshot: Begin(%d) after tick %d", tick, w.tick))
	}
	if w.open {
		panic("snapshot: Begin without Commit")
	}
	ri := w.ringIndex(tick)
	f := &w.ring[ri]
	oldLayout, oldTick := uint32(0), f.Tick
	if f.valid {
		w.sinceMu.Lock()
		delete(w.sinceCache, f.Tick)
		w.sinceMu.Unlock()
		oldLayout = f.layout
	}
	f.Tick = tick
	w.detach(f)
	f.reset()
	f.valid = false
	w.cur = f
	w.open = true
	w.last = 0
	w.pj = 0
	w.ch = w.changes[ri][:0]
	w.Quantized, w.Reused = 0, 0
	w.aligned = w.prev != nil && w.prev != f
	// The previous lanes are copied in when first needed: by the first
	// aligned Put or Keep, or range by range by the shares of StartAligned.
	w.lanesPending = w.aligned
	w.reuse = w.aligned && oldLayout != 0 && oldLayout == w.prev.layout && cap(f.Lanes) >= len(w.prev.Lanes)
	w.reuseTick = oldTick
}

// fillLanes copies the previous frame's lanes into the aligned frame.
func (w *World) fillLanes() {
	n := len(w.prev.Lanes)
	if w.reuse {
		w.cur.Lanes = w.cur.Lanes[:n]
	} else {
		w.cur.Lanes = append(w.cur.Lanes[:0], w.prev.Lanes...)
	}
	w.copyLanes(0, len(w.prev.Slots))
	w.lanesPending = false
}

// copyLanes makes the lanes of the previous frame's entries [lo, hi) the
// aligned frame's (sized already): all of them, or with reuse only those of
// entities changed since reuseTick, in runs. It reads changedAt of the
// range's slots only, which a share of StartAligned writes for its own
// entries after this.
func (w *World) copyLanes(lo, hi int) {
	prev, cur := w.prev, w.cur
	end := func(j int) int {
		if j < len(prev.Offs) {
			return int(prev.Offs[j])
		}
		return len(prev.Lanes)
	}
	if !w.reuse {
		if lo < hi {
			copy(cur.Lanes[prev.Offs[lo]:end(hi)], prev.Lanes[prev.Offs[lo]:end(hi)])
		}
		return
	}
	for j := lo; j < hi; {
		if int32(w.changedAt[prev.Slots[j]]-w.reuseTick) <= 0 {
			j++
			continue
		}
		k := j + 1
		for k < hi && int32(w.changedAt[prev.Slots[k]]-w.reuseTick) > 0 {
			k++
		}
		a, b := prev.Offs[j], end(k)
		copy(cur.Lanes[a:b], prev.Lanes[a:b])
		j = k
	}
}

// detach gives f arrays of its own if another frame shares them, so that
// building f does not write into that frame.
func (w *World) detach(f *Frame) {
	if f.layout == 0 {
		return
	}
	for i := range w.ring {
		if g := &w.ring[i]; g != f && g.valid && g.layout == f.layout {
			f.Slots, f.Metas, f.Offs, f.index = nil, nil, nil, nil
			break
		}
	}
	f.layout = 0
}

// unalign ends aligned mode: the frame takes the previous frame's first
// w.pj entries (which matched) and the lanes they span, and continues
// entry by entry.
func (w *World) unalign() {
	if !w.aligned {
		return
	}
	if w.lanesPending {
		w.fillLanes()
	}
	w.aligned = false
	f, prev, n := w.cur, w.prev, w.pj
	f.Slots = append(f.Slots[:0], prev.Slots[:n]...)
	f.Metas = append(f.Metas[:0], prev.Metas[:n]...)
	f.Offs = append(f.Offs[:0], prev.Offs[:n]...)
	end := len(prev.Lanes)
	if n < len(prev.Offs) {
		end = int(prev.Offs[n])
	}
	f.Lanes = f.Lanes[:end]
	f.index = append(f.index[:0], prev.index...)
}

// alignedEntry returns the index of slot with meta m in the previous frame
// if it is the previous frame's next entry while the frame is aligned, and
// takes it; else −1.
func (w *World) alignedEntry(slot uint32, m Meta) int {
	if w.lanesPending {
		w.fillLanes()
	}
	prev, j := w.prev, w.pj
	if j >= len(prev.Slots) || prev.Slots[j] != slot || prev.Metas[j] != m || slot < w.last {
		return -1
	}
	w.last = slot + 1
	w.pj++
	return j
}

// rawSame reports whether the component bytes comps of slot (with set)
// equal the raw bytes kept from its last quantization.
func (w *World) rawSame(slot uint32, set uint64, comps []unsafe.Pointer) bool {
	rb := &w.raws[slot]
	if rb.set != set {
		return false
	}
	raw := rb.b
	if len(comps) == 1 { // (most entities: no loop)
		n := int(w.plans[bits.TrailingZeros64(set)].Size)
		return n <= len(raw) && rawEqual(raw[:n], comps[0])
	}
	off := 0
	for _, c := range comps {
		n := int(w.plans[bits.TrailingZeros64(set)].Size)
		set &= set - 1
		if off+n > len(raw) || !rawEqual(raw[off:off+n], c) {
			return false
		}
		off += n
	}
	return true
}

// rawEqual reports whether the len(raw) bytes at p equal raw. Sizes that
// are a multiple of 8 up to 64 (a pose of float64s is 56) are compared
// word by word without a loop or a call, where memequal spends about
// twice the instructions.
func rawEqual(raw []byte, p unsafe.Pointer) bool {
	a := unsafe.Pointer(unsafe.SliceData(raw))
	d := func(i uintptr) uint64 { return *(*uint64)(unsafe.Add(a, i)) ^ *(*uint64)(unsafe.Add(p, i)) }
	var x uint64
	switch len(raw) {
	case 64:
		x = d(56)
		fallthrough
	case 56:
		x |= d(48)
		fallthrough
	case 48:
		x |= d(40)
		fallthrough
	case 40:
		x |= d(32)
		fallthrough
	case 32:
		x |= d(24)
		fallthrough
	case 24:
		x |= d(16)
		fallthrough
	case 16:
		x |= d(8)
		fallthrough
	case 8:
		x |= d(0)
	default:
		return string(raw) == string(unsafe.Slice((*byte)(p), len(raw)))
	}
	return x == 0
}

// Put adds an entity to the frame being built: its slot (slots must
// increase within a frame), identity, component set and one pointer per
// component in the set, in registry id order (comps[i] points to a value of
// the i-th set component's type, e.g. from arche's World.Get). If the
// component bytes equal last tick's, the previous lanes are reused without
// quantizing. Allocation-free in steady state. Panics on misuse (slots out
// of order, pointer count).
func (w *World) Put(slot uint32, m Meta, comps []unsafe.Pointer) {
	// The common case (the entity has the index, identity and layout it had
	// last tick) is kept small; the rest is put.
	if w.aligned && len(comps) == bits.OnesCount64(m.Set) {
		if j := w.alignedEntry(slot, m); j >= 0 {
			if w.rawSame(slot, m.Set, comps) {
				w.Reused++
				return
			}
			w.putAligned(slot, m, comps, j)
			return
		}
	}
	w.put(slot, m, comps)
}

// put is Put's general case.
func (w *World) put(slot uint32, m Meta, comps []unsafe.Pointer) {
	if len(comps) != bits.OnesCount64(m.Set) {
		panic("snapshot: Put needs one pointer per component in the set")
	}
	w.unalign()
	f, prevLanes := w.addEntry("Put", slot, m)
	rb := &w.raws[slot]
	raw := rb.b
	same := prevLanes != nil && rb.set == m.Set
	rawOff := 0
	ci := 0
	for set := m.Set; set != 0; set &= set - 1 {
		p := w.plans[bits.TrailingZeros64(set)]
		n := int(p.Size)
		if same && (rawOff+n > len(raw) || !rawEqual(raw[rawOff:rawOff+n], comps[ci])) {
			same = false
		}
		ci++
		rawOff += n
	}
	if same {
		f.Lanes = append(f.Lanes, prevLanes...)
		w.Reused++
		return
	}
	// Quantize and remember the raw bytes.
	if cap(raw) < rawOff {
		raw = make([]byte, 0, rawOff)
	}
	raw = raw[:0]
	start := len(f.Lanes)
	ci = 0
	for set := m.Set; set != 0; set &= set - 1 {
		p := w.plans[bits.TrailingZeros64(set)]
		n := p.NumLanes()
		at := len(f.Lanes)
		f.Lanes = append(f.Lanes, make([]uint64, n)...) // no alloc when capacity suffices
		p.Quantize(comps[ci], f.Lanes[at:at+n])
		raw = append(raw, unsafe.Slice((*byte)(comps[ci]), p.Size)...)
		ci++
	}
	if old := rb.b; len(old) != len(raw) || unsafe.SliceData(old) != unsafe.SliceData(raw) {
		rb.b = raw // (only when it moved: the store costs a GC write barrier while the GC marks)
	}
	rb.set = m.Set
	w.Quantized++
	if prevLanes != nil && !slices.Equal(prevLanes, f.Lanes[start:]) {
		w.changed(slot, false)
	}
}

// putAligned quantizes an entity that is the previous frame's entry j
// into place (its lanes in this frame hold the previous values) and notes
// whether its quantized value changed.
func (w *World) putAligned(slot uint32, m Meta, comps []unsafe.Pointer, j int) {
	w.Quantized++
	if w.quantizeAt(slot, m, comps, j) {
		w.changed(slot, false)
	}
}

// quantizeAt quantizes the components of entry j (slot, with the previous
// frame's Meta m) into the frame's lanes at the previous frame's offset,
// remembers their raw bytes, and reports whether the lanes changed. It
// touches only slot's and entry j's state.
func (w *World) quantizeAt(slot uint32, m Meta, comps []unsafe.Pointer, j int) bool {
	prevLanes := w.prev.EntityLanes(j)
	off := int(w.prev.Offs[j])
	cur := w.cur.Lanes[off : off+len(prevLanes)]
	rb := &w.raws[slot]
	old := rb.b
	if m.Set&(m.Set-1) == 0 && len(comps) == 1 && rb.set == m.Set {
		// One component, whose raw bytes were kept before (the common
		// case): no loop, and they are overwritten in place.
		p := w.plans[bits.TrailingZeros64(m.Set)]
		p.Quantize(comps[0], cur)
		if src := unsafe.Slice((*byte)(comps[0]), p.Size); len(old) == len(src) {
			copy(old, src)
			return !slices.Equal(prevLanes, cur)
		}
	}
	raw := old[:0]
	at := 0
	ci := 0
	for set := m.Set; set != 0; set &= set - 1 {
		p := w.plans[bits.TrailingZeros64(set)]
		n := p.NumLanes()
		p.Quantize(comps[ci], cur[at:at+n])
		raw = append(raw, unsafe.Slice((*byte)(comps[ci]), p.Size)...)
		at += n
		ci++
	}
	if len(old) != len(raw) || unsafe.SliceData(old) != unsafe.SliceData(raw) {
		rb.b = raw // (only when it moved: the store costs a GC write barrier while the GC marks)
	}
	rb.set = m.Set
	return !slices.Equal(prevLanes, cur)
}

// Aligned reports whether the frame being built can be filled by shares
// ([World.StartAligned], then each share's [AlignedPut.Range] and
// [AlignedPut.PutAt], then [World.EndAligned]), and how many entries it
// has: right after Begin, when there is a previous frame. The caller must know that the
// frame holds exactly the previous frame's entities, with the same Meta
// (no spawn, despawn, generation or component-set change since).
func (w *World) Aligned() (entries int, ok bool) {
	if !w.open || !w.aligned || w.pj != 0 || w.last != 0 {
		return 0, false
	}
	return len(w.prev.Slots), true
}

// Entry returns the slot and Meta of entry j of the previous frame.
func (w *World) Entry(j int) (uint32, Meta) { return w.prev.Slots[j], w.prev.Metas[j] }

// AlignedPut is one goroutine's share of filling an aligned frame (see
// [World.Aligned]): PutAt puts entry j's components; an entry not put keeps
// the previous frame's value. Several AlignedPuts may put distinct entries
// concurrently (nothing else may use the World meanwhile); [World.EndAligned]
// then completes the frame.
type AlignedPut struct {
	w         *World
	lo, hi    int      // its entries (Range)
	ch        []uint32 // slots whose lanes changed, ascending
	quantized int
}

// NewAlignedPut returns a share of w's aligned puts.
func (w *World) NewAlignedPut() *AlignedPut { return &AlignedPut{w: w} }

// StartAligned readies an aligned frame (see [World.Aligned]) for its
// shares: each then copies in the previous lanes of its entries (Range)
// before putting them, and together they cover every entry.
func (w *World) StartAligned() {
	if w.lanesPending {
		n := len(w.prev.Lanes)
		w.cur.Lanes = slices.Grow(w.cur.Lanes[:0], n)[:n]
		w.lanesPending = false
	}
	w.sharing = true
}

// Range starts the share's entries: [lo, hi) of the previous frame, whose
// lanes it copies into the frame (after StartAligned).
func (a *AlignedPut) Range(lo, hi int) {
	w := a.w
	a.lo, a.hi = lo, hi
	w.copyLanes(lo, hi)
}

// PutAt is [World.Put] for entry j of an aligned frame (same slot and Meta
// as the previous frame's entry j), with one pointer per component of the
// Meta's set. Entries must be put in increasing order within an AlignedPut.
func (a *AlignedPut) PutAt(j int, comps []unsafe.Pointer) {
	w := a.w
	slot, m := w.prev.Slots[j], w.prev.Metas[j]
	if len(comps) != bits.OnesCount64(m.Set) {
		panic("snapshot: PutAt needs one pointer per component in the set")
	}
	if w.rawSame(slot, m.Set, comps) {
		return
	}
	a.quantized++
	if w.quantizeAt(slot, m, comps, j) {
		w.changedAt[slot] = w.cur.Tick
		a.ch = append(a.ch, slot)
	}
}

// EndAligned completes an aligned frame from its shares, given in the order
// of the entries they put: every entry of the previous frame is in the
// frame. Commit follows.
func (w *World) EndAligned(shares []*AlignedPut) {
	n := len(w.prev.Slots)
	next := 0
	for _, a := range shares {
		if a.lo == next && a.hi >= a.lo {
			next = a.hi
		} else {
			next = -1
		}
	}
	if !w.sharing || next != n {
		panic("snapshot: EndAligned needs StartAligned and shares covering the entries in order")
	}
	w.sharing = false
	w.Quantized = 0
	for _, a := range shares {
		w.ch = append(w.ch, a.ch...)
		w.Quantized += a.quantized
		a.ch, a.quantized = a.ch[:0], 0
	}
	w.Reused = n - w.Quantized
	w.pj = n
	if n > 0 {
		w.last = w.prev.Slots[n-1] + 1
	}
}

// PutLanes adds an entity whose lanes the caller quantized itself (tests,
// tools): lanes holds all components of the set in registry id order.
func (w *World) PutLanes(slot uint32, m Meta, lanes []uint64) {
	w.unalign()
	if len(lanes) != w.lanesOf(m.Set) {
		panic("snapshot: PutLanes lane count does not match the set")
	}
	f, prevLanes := w.addEntry("PutLanes", slot, m)
	f.Lanes = append(f.Lanes, lanes...)
	w.raws[slot].set = 0 // raw cache unknown
	w.Quantized++
	if prevLanes != nil && !slices.Equal(prevLanes, lanes) {
		w.changed(slot, false)
	}
}

// addEntry checks the call and appends slot's index entry (slot, meta,
// lane offset) to the frame being built; the caller appends the lanes. It
// matches the entry against the previous frame as it goes (slots ascend in
// both): entries the previous frame has below slot were despawned; a new
// slot, generation or component set is a layout change. It returns the
// previous frame's lanes of the entity if it had the same layout (nil: the
// caller need not compare, the entity changed).
func (w *World) addEntry(op string, slot uint32, m Meta) (*Frame, []uint64) {
	if !w.open {
		panic("snapshot: " + op + " outside Begin/Commit")
	}
	if slot < w.last || slot >= MaxSlots {
		panic(fmt.Sprintf("snapshot: %s slot %d out of order or range", op, slot))
	}
	w.last = slot + 1
	if int(slot) >= len(w.changedAt) {
		w.growSlots(int(slot) + 1)
	}
	f := w.cur
	if int(slot) >= len(f.index) {
		f.index = append(f.index, make([]int32, len(w.changedAt)-len(f.index))...)
	}
	f.index[slot] = int32(len(f.Slots))
	f.Slots = append(f.Slots, slot)
	f.Metas = append(f.Metas, m)
	f.Offs = append(f.Offs, uint32(len(f.Lanes)))
	var prevLanes []uint64
	if prev := w.prev; prev != nil {
		for w.pj < len(prev.Slots) && prev.Slots[w.pj] < slot {
			w.changed(prev.Slots[w.pj], true) // despawned
			w.pj++
		}
		if w.pj < len(prev.Slots) && prev.Slots[w.pj] == slot {
			if prev.Metas[w.pj] == m {
				prevLanes = prev.EntityLanes(w.pj)
			}
			w.pj++
		}
	}
	if prevLanes == nil {
		w.changed(slot, true) // spawned, or a new generation or component set
	}
	return f, prevLanes
}

// changed records that slot changed in the frame being built (its layout
// too if layout).
func (w *World) changed(slot uint32, layout bool) {
	t := w.cur.Tick
	w.changedAt[slot] = t
	if layout {
		w.layoutAt[slot] = t
	}
	w.ch = append(w.ch, slot)
}

func (w *World) lanesOf(set uint64) int {
	n := 0
	for ; set != 0; set &= set - 1 {
		n += w.plans[bits.TrailingZeros64(set)].NumLanes()
	}
	return n
}

// Commit finishes the frame and returns it. The frame's changes were found
// as its entities were added; what is left of the previous frame was
// despawned. O(despawns) here, allocation-free in steady state.
func (w *World) Commit() *Frame {
	if !w.open {
		panic("snapshot: Commit without Begin")
	}
	f := w.cur
	w.codes.choose()
	if w.lanesPending {
		w.fillLanes()
	}
	if w.aligned && w.pj == len(w.prev.Slots) {
		// Entry for entry the previous frame's layout: the lanes are in
		// place, the index tables are the previous frame's.
		w.unalignAll()
	}
	w.unalign()
	w.open = false
	if prev := w.prev; prev != nil {
		for ; w.pj < len(prev.Slots); w.pj++ {
			w.changed(prev.Slots[w.pj], true)
		}
	}
	// Despawns were recorded as they were found, between the entries: the
	// tick's change list must ascend, like the slots of a frame.
	if !slices.IsSorted(w.ch) {
		slices.Sort(w.ch)
	}
	w.changes[w.ringIndex(f.Tick)] = w.ch
	if f.layout == 0 {
		w.layouts++
		f.layout = w.layouts
	}
	f.valid = true
	w.prev = f
	w.tick = f.Tick
	return f
}

// unalignAll takes every entry of the previous frame (all matched): the
// frame shares the previous frame's entry arrays instead of copying them.
func (w *World) unalignAll() {
	f, prev := w.cur, w.prev
	w.aligned = false
	f.Slots, f.Metas, f.Offs, f.index, f.layout = prev.Slots, prev.Metas, prev.Offs, prev.index, prev.layout
	w.pj = len(prev.Slots)
}

// Frame returns the frame of tick if it is still in the ring, else nil.
func (w *World) Frame(tick uint32) *Frame {
	if tick == 0 {
		return nil
	}
	f := &w.ring[w.ringIndex(tick)]
	if !f.valid || f.Tick != tick {
		return nil
	}
	return f
}

// Current returns the newest committed frame (nil before the first).
func (w *World) Current() *Frame { return w.prev }

// ChangedAt returns the tick of the last change (values or layout) of slot.
func (w *World) ChangedAt(slot uint32) uint32 {
	if int(slot) >= len(w.changedAt) {
		return 0
	}
	return w.changedAt[slot]
}

// LayoutAt returns the tick at which slot's current generation and
// component set began.
func (w *World) LayoutAt(slot uint32) uint32 {
	if int(slot) >= len(w.layoutAt) {
		return 0
	}
	return w.layoutAt[slot]
}

// ChangedSince returns the set of slots that changed (values, layout, spawn
// or despawn) in the ticks after base up to the newest frame, or ok=false if
// base is older than the ring. The set is computed once per base tick and
// shared by all clients acking that base; do not modify it. Safe for
// concurrent use between Commit and EndTick (the encoders of several
// workers).
func (w *World) ChangedSince(base uint32) (slots Bitset, ok bool) {
	if base == w.tick {
		return nil, true
	}
	if w.Frame(base) == nil {
		return nil, false
	}
	w.sinceMu.Lock()
	defer w.sinceMu.Unlock()
	if s, hit := w.sinceCache[base]; hit {
		return s, true
	}
	var out Bitset
	if n := len(w.sinceBuf); n > 0 {
		out = w.sinceBuf[n-1]
		w.sinceBuf = w.sinceBuf[:n-1]
	}
	words := (len(w.changedAt) + 63) / 64
	if cap(out) < words {
		out = make(Bitset, words)
	}
	out = out[:words]
	clear(out)
	for t := base + 1; int32(t-w.tick) <= 0; t++ {
		for _, s := range w.changes[w.ringIndex(t)] {
			out[s>>6] |= 1 << (s & 63)
		}
	}
	w.sinceCache[base] = out
	return out, true
}

// EndTick releases per-tick caches; call after all clients of the newest
// frame have been served.
func (w *World) EndTick() {
	for k, v := range w.sinceCache {
		w.sinceBuf = append(w.sinceBuf, v)
		delete(w.sinceCache, k)
	}
}

// MemoryBytes returns the bytes held by the ring and the per-slot tables
// (capacities, not lengths).
func (w *World) MemoryBytes() int {
	n := 0
	seen := map[uint32]bool{}
	for i := range w.ring {
		f := &w.ring[i]
		n += cap(f.Lanes) * 8
		if f.layout != 0 && seen[f.layout] {
			continue // shared with a frame counted already
		}
		seen[f.layout] = true
		n += cap(f.Slots)*4 + cap(f.Metas)*int(unsafe.Sizeof(Meta{})) + cap(f.Offs)*4 + cap(f.index)*4
	}
	for i := range w.changes {
		n += cap(w.changes[i]) * 4
	}
	n += (cap(w.changedAt) + cap(w.layoutAt)) * 4
	n += cap(w.raws) * int(unsafe.Sizeof(rawBytes{}))
	for _, r := range w.raws {
		n += cap(r.b)
	}
	return n
}

// Keep adds an entity with the same lanes it had in the previous frame,
// without reading or quantizing it (dormant entities, send-rate divisors).
// It returns false — and adds nothing — if the previous frame lacks the slot
// or its identity or layout differ; the caller then uses [World.Put].
func (w *World) Keep(slot uint32, m Meta) bool {
	if !w.open {
		panic("snapshot: Keep outside Begin/Commit")
	}
	if slot < w.last || w.prev == nil {
		return false
	}
	if w.aligned {
		if w.alignedEntry(slot, m) >= 0 {
			w.Reused++
			return true
		}
		w.unalign()
	}
	pi := w.prev.Lookup(slot)
	if pi < 0 || w.prev.Metas[pi] != m {
		return false
	}
	f, prevLanes := w.addEntry("Keep", slot, m)
	f.Lanes = append(f.Lanes, prevLanes...)
	w.Reused++
	return true
}
