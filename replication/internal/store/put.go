package store

import (
	"fmt"
	"math/bits"
	"slices"
	"unsafe"

	"github.com/archenet/archenet/replication/internal/entity"
)

// rawBytes is a slot's component bytes as its last quantization read
// them, and the component set they are of (0: none kept); one per slot,
// so that the unchanged check reads one table.
type rawBytes struct {
	set uint64
	b   []byte
}

func (r *Ring) growSlots(n int) {
	for len(r.changedAt) < n {
		r.changedAt = append(r.changedAt, 0)
		r.layoutAt = append(r.layoutAt, 0)
		r.raws = append(r.raws, rawBytes{})
	}
}

// rawSame reports whether the component bytes comps of slot (with set)
// equal the raw bytes kept from its last quantization.
func (r *Ring) rawSame(slot uint32, set uint64, comps []unsafe.Pointer) bool {
	rb := &r.raws[slot]
	if rb.set != set {
		return false
	}
	raw := rb.b
	if len(comps) == 1 { // (most entities: no loop)
		n := int(r.plans[bits.TrailingZeros64(set)].Size)
		return n <= len(raw) && rawEqual(raw[:n], comps[0])
	}
	off := 0
	for _, c := range comps {
		n := int(r.plans[bits.TrailingZeros64(set)].Size)
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
func (r *Ring) Put(slot uint32, m entity.Meta, comps []unsafe.Pointer) {
	// The common case (the entity has the index, identity and layout it had
	// last tick) is kept small; the rest is put.
	if r.b.aligned && len(comps) == bits.OnesCount64(m.Set) {
		if j := r.alignedEntry(slot, m); j >= 0 {
			if r.rawSame(slot, m.Set, comps) {
				r.Reused++
				return
			}
			r.putAligned(slot, m, comps, j)
			return
		}
	}
	r.put(slot, m, comps)
}

// put is Put's general case.
func (r *Ring) put(slot uint32, m entity.Meta, comps []unsafe.Pointer) {
	if len(comps) != bits.OnesCount64(m.Set) {
		panic("store: Put needs one pointer per component in the set")
	}
	r.unalign()
	f, prevLanes := r.addEntry("Put", slot, m)
	rb := &r.raws[slot]
	raw := rb.b
	same := prevLanes != nil && rb.set == m.Set
	rawOff := 0
	ci := 0
	for set := m.Set; set != 0; set &= set - 1 {
		p := r.plans[bits.TrailingZeros64(set)]
		n := int(p.Size)
		if same && (rawOff+n > len(raw) || !rawEqual(raw[rawOff:rawOff+n], comps[ci])) {
			same = false
		}
		ci++
		rawOff += n
	}
	if same {
		f.Lanes = append(f.Lanes, prevLanes...)
		r.Reused++
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
		p := r.plans[bits.TrailingZeros64(set)]
		n := p.NumLanes()
		at := len(f.Lanes)
		f.Lanes = append(f.Lanes, make([]uint64, n)...) // no alloc when capacity suffices
		p.QuantizeBytes(unsafe.Slice((*byte)(comps[ci]), p.Size), f.Lanes[at:at+n])
		raw = append(raw, unsafe.Slice((*byte)(comps[ci]), p.Size)...)
		ci++
	}
	if old := rb.b; len(old) != len(raw) || unsafe.SliceData(old) != unsafe.SliceData(raw) {
		rb.b = raw // (only when it moved: the store costs a GC write barrier while the GC marks)
	}
	rb.set = m.Set
	r.Quantized++
	if prevLanes != nil && !slices.Equal(prevLanes, f.Lanes[start:]) {
		r.changed(slot, false)
	}
}

// putAligned quantizes an entity that is the previous frame's entry j
// into place (its lanes in this frame hold the previous values) and notes
// whether its quantized value changed.
func (r *Ring) putAligned(slot uint32, m entity.Meta, comps []unsafe.Pointer, j int) {
	r.Quantized++
	if r.quantizeAt(slot, m, comps, j) {
		r.changed(slot, false)
	}
}

// quantizeAt quantizes the components of entry j (slot, with the previous
// frame's entity.Meta m) into the frame's lanes at the previous frame's offset,
// remembers their raw bytes, and reports whether the lanes changed. It
// touches only slot's and entry j's state.
func (r *Ring) quantizeAt(slot uint32, m entity.Meta, comps []unsafe.Pointer, j int) bool {
	prevLanes := r.prev.EntityLanes(j)
	off := int(r.prev.Offs[j])
	cur := r.cur.Lanes[off : off+len(prevLanes)]
	rb := &r.raws[slot]
	old := rb.b
	if m.Set&(m.Set-1) == 0 && len(comps) == 1 && rb.set == m.Set {
		// One component, whose raw bytes were kept before (the common
		// case): no loop, and they are overwritten in place.
		p := r.plans[bits.TrailingZeros64(m.Set)]
		p.QuantizeBytes(unsafe.Slice((*byte)(comps[0]), p.Size), cur)
		if src := unsafe.Slice((*byte)(comps[0]), p.Size); len(old) == len(src) {
			copy(old, src)
			return !slices.Equal(prevLanes, cur)
		}
	}
	raw := old[:0]
	at := 0
	ci := 0
	for set := m.Set; set != 0; set &= set - 1 {
		p := r.plans[bits.TrailingZeros64(set)]
		n := p.NumLanes()
		p.QuantizeBytes(unsafe.Slice((*byte)(comps[ci]), p.Size), cur[at:at+n])
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

// PutLanes adds an entity whose lanes the caller quantized itself (tests,
// tools): lanes holds all components of the set in registry id order.
func (r *Ring) PutLanes(slot uint32, m entity.Meta, lanes []uint64) {
	r.unalign()
	if len(lanes) != r.lanesOf(m.Set) {
		panic("store: PutLanes lane count does not match the set")
	}
	f, prevLanes := r.addEntry("PutLanes", slot, m)
	f.Lanes = append(f.Lanes, lanes...)
	r.raws[slot].set = 0 // raw cache unknown
	r.Quantized++
	if prevLanes != nil && !slices.Equal(prevLanes, lanes) {
		r.changed(slot, false)
	}
}

// addEntry checks the call and appends slot's index entry (slot, meta,
// lane offset) to the frame being built; the caller appends the lanes. It
// matches the entry against the previous frame as it goes (slots ascend in
// both): entries the previous frame has below slot were despawned; a new
// slot, generation or component set is a layout change. It returns the
// previous frame's lanes of the entity if it had the same layout (nil: the
// caller need not compare, the entity changed).
func (r *Ring) addEntry(op string, slot uint32, m entity.Meta) (*Frame, []uint64) {
	if !r.b.open {
		panic("store: " + op + " outside Begin/Commit")
	}
	if slot < r.b.last || slot >= entity.MaxSlots {
		panic(fmt.Sprintf("store: %s slot %d out of order or range", op, slot))
	}
	r.b.last = slot + 1
	if int(slot) >= len(r.changedAt) {
		r.growSlots(int(slot) + 1)
	}
	f := r.cur
	if int(slot) >= len(f.index) {
		f.index = append(f.index, make([]int32, len(r.changedAt)-len(f.index))...)
	}
	f.index[slot] = int32(len(f.Slots))
	f.Slots = append(f.Slots, slot)
	f.Metas = append(f.Metas, m)
	f.Offs = append(f.Offs, uint32(len(f.Lanes)))
	var prevLanes []uint64
	if prev := r.prev; prev != nil {
		for r.b.pj < len(prev.Slots) && prev.Slots[r.b.pj] < slot {
			r.changed(prev.Slots[r.b.pj], true) // despawned
			r.b.pj++
		}
		if r.b.pj < len(prev.Slots) && prev.Slots[r.b.pj] == slot {
			if prev.Metas[r.b.pj] == m {
				prevLanes = prev.EntityLanes(r.b.pj)
			}
			r.b.pj++
		}
	}
	if prevLanes == nil {
		r.changed(slot, true) // spawned, or a new generation or component set
	}
	return f, prevLanes
}

// changed records that slot changed in the frame being built (its layout
// too if layout).
func (r *Ring) changed(slot uint32, layout bool) {
	t := r.cur.Tick
	r.changedAt[slot] = t
	if layout {
		r.layoutAt[slot] = t
	}
	r.b.ch = append(r.b.ch, slot)
}

func (r *Ring) lanesOf(set uint64) int {
	n := 0
	for ; set != 0; set &= set - 1 {
		n += r.plans[bits.TrailingZeros64(set)].NumLanes()
	}
	return n
}

// Keep adds an entity with the same lanes it had in the previous frame,
// without reading or quantizing it (dormant entities, send-rate divisors).
// It returns false — and adds nothing — if the previous frame lacks the slot
// or its identity or layout differ; the caller then uses [Ring.Put].
func (r *Ring) Keep(slot uint32, m entity.Meta) bool {
	if !r.b.open {
		panic("store: Keep outside Begin/Commit")
	}
	if slot < r.b.last || r.prev == nil {
		return false
	}
	if r.b.aligned {
		if r.alignedEntry(slot, m) >= 0 {
			r.Reused++
			return true
		}
		r.unalign()
	}
	pi := r.prev.Lookup(slot)
	if pi < 0 || r.prev.Metas[pi] != m {
		return false
	}
	f, prevLanes := r.addEntry("Keep", slot, m)
	f.Lanes = append(f.Lanes, prevLanes...)
	r.Reused++
	return true
}
