package snapshot

import (
	"fmt"
	"math/bits"
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

// Frame is the quantized state of every replicated entity at one tick,
// stored once and shared by all clients. Entries are sorted by slot.
type Frame struct {
	Tick  uint32
	Slots []uint32 // sorted entity slots (net indices)
	Metas []Meta
	Offs  []uint32 // first lane of each entry in Lanes
	Lanes []uint64
	// Srcs (receiver views only) is, per entry, the tick of the datagram
	// whose record last set the entry's state along the baseline chain: the
	// client applies an entry to its mirror only when Srcs is newer than
	// what it applied.
	Srcs []uint32
	// InputAck (receiver views only, when HasInputAck) is the newest input
	// tick the server had applied for this client when it sent the view.
	InputAck    uint32
	HasInputAck bool
	// InputHeld and InputDepth (receiver views only, when
	// HasInputFeedback) are the server's input feedback for this client
	// (see BuildOptions.InputHeld).
	InputHeld        uint32
	InputDepth       int
	HasInputFeedback bool

	index []int32 // slot → entry, −1 if absent (dense, len = World slot capacity)
	valid bool
}

// Lookup returns the entry index of slot, or −1.
func (f *Frame) Lookup(slot uint32) int {
	if int(slot) >= len(f.index) {
		return -1
	}
	return int(f.index[slot])
}

// EntityLanes returns the lanes of entry i (all components of its set, in
// registry id order).
func (f *Frame) EntityLanes(i int) []uint64 {
	end := uint32(len(f.Lanes))
	if i+1 < len(f.Offs) {
		end = f.Offs[i+1]
	}
	return f.Lanes[f.Offs[i]:end]
}

// Len returns the number of entities.
func (f *Frame) Len() int { return len(f.Slots) }

// World builds and keeps the shared ring of frames on the server. Each net
// tick: [World.Begin], one [World.Put] per replicated entity in increasing
// slot order, [World.Commit]. Put quantizes each component once; if its raw
// bytes equal last tick's, the previous lanes are reused without quantizing.
// Commit detects changed entities by comparing quantized lanes with the
// previous frame ("changed" = a quantized value changed) and records, per
// slot, the tick of its last change and of its last layout change (spawn,
// generation or component set change).
type World struct {
	reg   *schema.Registry
	depth int
	ring  []Frame
	cur   *Frame
	prev  *Frame
	tick  uint32
	open  bool
	last  uint32 // last Put slot + 1 (ordering check)
	plans []*schema.Plan

	// per slot, current
	changedAt  []uint32   // tick of the last change of lanes or layout
	layoutAt   []uint32   // tick the current gen/set began
	raw        [][]byte   // last raw component bytes per slot
	rawSet     []uint64   // set the raw bytes belong to
	changes    [][]uint32 // per ring index: slots changed at that frame's tick (sorted)
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
	return w
}

// Depth returns the ring depth.
func (w *World) Depth() int { return w.depth }

// Registry returns the component registry.
func (w *World) Registry() *schema.Registry { return w.reg }

// Tick returns the tick of the newest committed frame (0 before the first).
func (w *World) Tick() uint32 { return w.tick }

func (w *World) growSlots(n int) {
	for len(w.changedAt) < n {
		w.changedAt = append(w.changedAt, 0)
		w.layoutAt = append(w.layoutAt, 0)
		w.raw = append(w.raw, nil)
		w.rawSet = append(w.rawSet, 0)
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
	f := &w.ring[tick%uint32(w.depth)]
	if f.valid {
		delete(w.sinceCache, f.Tick)
	}
	f.Tick = tick
	f.Slots = f.Slots[:0]
	f.Metas = f.Metas[:0]
	f.Offs = f.Offs[:0]
	f.Lanes = f.Lanes[:0]
	f.valid = false
	w.cur = f
	w.open = true
	w.last = 0
	w.Quantized, w.Reused = 0, 0
}

// Put adds an entity to the frame being built: its slot (slots must
// increase within a frame), identity, component set and one pointer per
// component in the set, in registry id order (comps[i] points to a value of
// the i-th set component's type, e.g. from arche's World.Get). Allocation-free
// in steady state. Panics on misuse (slots out of order, pointer count).
func (w *World) Put(slot uint32, m Meta, comps []unsafe.Pointer) {
	if len(comps) != bits.OnesCount64(m.Set) {
		panic("snapshot: Put needs one pointer per component in the set")
	}
	f := w.addEntry("Put", slot, m)

	// Raw-bytes cache: if the component bytes equal last tick's and the
	// previous frame has this slot with the same layout, copy its lanes.
	var prevLanes []uint64
	if w.prev != nil && w.rawSet[slot] == m.Set {
		if pi := w.prev.Lookup(slot); pi >= 0 && w.prev.Metas[pi].Set == m.Set && w.prev.Metas[pi].Gen == m.Gen {
			prevLanes = w.prev.EntityLanes(pi)
		}
	}
	raw := w.raw[slot]
	same := prevLanes != nil
	rawOff := 0
	ci := 0
	for set := m.Set; set != 0; set &= set - 1 {
		p := w.plans[bits.TrailingZeros64(set)]
		src := unsafe.Slice((*byte)(comps[ci]), p.Size)
		ci++
		if same && (rawOff+len(src) > len(raw) || string(raw[rawOff:rawOff+len(src)]) != string(src)) {
			same = false
		}
		rawOff += len(src)
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
	ci = 0
	for set := m.Set; set != 0; set &= set - 1 {
		p := w.plans[bits.TrailingZeros64(set)]
		n := p.NumLanes()
		start := len(f.Lanes)
		f.Lanes = append(f.Lanes, make([]uint64, n)...) // no alloc when capacity suffices
		p.Quantize(comps[ci], f.Lanes[start:start+n])
		raw = append(raw, unsafe.Slice((*byte)(comps[ci]), p.Size)...)
		ci++
	}
	w.raw[slot] = raw
	w.rawSet[slot] = m.Set
	w.Quantized++
}

// PutLanes adds an entity whose lanes the caller quantized itself (tests,
// tools): lanes holds all components of the set in registry id order.
func (w *World) PutLanes(slot uint32, m Meta, lanes []uint64) {
	if len(lanes) != w.lanesOf(m.Set) {
		panic("snapshot: PutLanes lane count does not match the set")
	}
	f := w.addEntry("PutLanes", slot, m)
	f.Lanes = append(f.Lanes, lanes...)
	w.rawSet[slot] = 0 // raw cache unknown
	w.Quantized++
}

// addEntry checks the call and appends slot's index entry (slot, meta,
// lane offset) to the frame being built; the caller appends the lanes.
func (w *World) addEntry(op string, slot uint32, m Meta) *Frame {
	if !w.open {
		panic("snapshot: " + op + " outside Begin/Commit")
	}
	if slot < w.last || slot >= MaxSlots {
		panic(fmt.Sprintf("snapshot: %s slot %d out of order or range", op, slot))
	}
	w.last = slot + 1
	w.growSlots(int(slot) + 1)
	f := w.cur
	f.Slots = append(f.Slots, slot)
	f.Metas = append(f.Metas, m)
	f.Offs = append(f.Offs, uint32(len(f.Lanes)))
	return f
}

func (w *World) lanesOf(set uint64) int {
	n := 0
	for ; set != 0; set &= set - 1 {
		n += w.plans[bits.TrailingZeros64(set)].NumLanes()
	}
	return n
}

// Commit finishes the frame, detects changes against the previous frame and
// returns the frame. O(entities); allocation-free in steady state.
func (w *World) Commit() *Frame {
	if !w.open {
		panic("snapshot: Commit without Begin")
	}
	f := w.cur
	w.open = false
	n := len(w.changedAt)
	if cap(f.index) < n {
		f.index = make([]int32, n)
	}
	f.index = f.index[:n]
	for i := range f.index {
		f.index[i] = -1
	}
	for i, s := range f.Slots {
		f.index[s] = int32(i)
	}
	ri := f.Tick % uint32(w.depth)
	ch := w.changes[ri][:0]
	prev := w.prev
	// Merge pass over prev ∪ cur in slot order.
	i, j := 0, 0
	var pn int
	if prev != nil {
		pn = len(prev.Slots)
	}
	for i < len(f.Slots) || j < pn {
		switch {
		case j >= pn || (i < len(f.Slots) && f.Slots[i] < prev.Slots[j]):
			s := f.Slots[i] // spawned (or first frame)
			w.changedAt[s], w.layoutAt[s] = f.Tick, f.Tick
			ch = append(ch, s)
			i++
		case i >= len(f.Slots) || prev.Slots[j] < f.Slots[i]:
			s := prev.Slots[j] // despawned
			w.changedAt[s], w.layoutAt[s] = f.Tick, f.Tick
			ch = append(ch, s)
			j++
		default:
			s := f.Slots[i]
			pm, cm := prev.Metas[j], f.Metas[i]
			if pm != cm {
				w.changedAt[s], w.layoutAt[s] = f.Tick, f.Tick
				ch = append(ch, s)
			} else if !equalLanes(prev.EntityLanes(j), f.EntityLanes(i)) {
				w.changedAt[s] = f.Tick
				ch = append(ch, s)
			}
			i++
			j++
		}
	}
	w.changes[ri] = ch
	f.valid = true
	w.prev = f
	w.tick = f.Tick
	return f
}

func equalLanes(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Frame returns the frame of tick if it is still in the ring, else nil.
func (w *World) Frame(tick uint32) *Frame {
	if tick == 0 {
		return nil
	}
	f := &w.ring[tick%uint32(w.depth)]
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
// shared by all clients acking that base; do not modify it.
func (w *World) ChangedSince(base uint32) (slots Bitset, ok bool) {
	if base == w.tick {
		return nil, true
	}
	if w.Frame(base) == nil {
		return nil, false
	}
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
		for _, s := range w.changes[t%uint32(w.depth)] {
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
	for i := range w.ring {
		f := &w.ring[i]
		n += cap(f.Slots)*4 + cap(f.Metas)*int(unsafe.Sizeof(Meta{})) + cap(f.Offs)*4 + cap(f.Lanes)*8 + cap(f.index)*4
	}
	for i := range w.changes {
		n += cap(w.changes[i]) * 4
	}
	n += (cap(w.changedAt) + cap(w.layoutAt)) * 4
	n += cap(w.rawSet) * 8
	for _, r := range w.raw {
		n += cap(r) + 24
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
	pi := w.prev.Lookup(slot)
	if pi < 0 || w.prev.Metas[pi] != m {
		return false
	}
	w.last = slot + 1
	f := w.cur
	f.Slots = append(f.Slots, slot)
	f.Metas = append(f.Metas, m)
	f.Offs = append(f.Offs, uint32(len(f.Lanes)))
	f.Lanes = append(f.Lanes, w.prev.EntityLanes(pi)...)
	w.Reused++
	return true
}
