package store

import (
	"math/bits"
	"slices"
	"unsafe"

	"github.com/archenet/archenet/replication/internal/entity"
)

// fillLanes copies the previous frame's lanes into the aligned frame.
func (r *Ring) fillLanes() {
	n := len(r.prev.Lanes)
	if r.b.reuse {
		r.cur.Lanes = r.cur.Lanes[:n]
	} else {
		r.cur.Lanes = append(r.cur.Lanes[:0], r.prev.Lanes...)
	}
	r.copyLanes(0, len(r.prev.Slots))
	r.b.lanesPending = false
}

// copyLanes makes the lanes of the previous frame's entries [lo, hi) the
// aligned frame's (sized already): all of them, or with reuse only those of
// entities changed since reuseTick, in runs. It reads changedAt of the
// range's slots only, which a share of StartAligned writes for its own
// entries after this.
func (r *Ring) copyLanes(lo, hi int) {
	prev, cur := r.prev, r.cur
	end := func(j int) int {
		if j < len(prev.Offs) {
			return int(prev.Offs[j])
		}
		return len(prev.Lanes)
	}
	if !r.b.reuse {
		if lo < hi {
			copy(cur.Lanes[prev.Offs[lo]:end(hi)], prev.Lanes[prev.Offs[lo]:end(hi)])
		}
		return
	}
	for j := lo; j < hi; {
		if int32(r.changedAt[prev.Slots[j]]-r.b.reuseTick) <= 0 {
			j++
			continue
		}
		k := j + 1
		for k < hi && int32(r.changedAt[prev.Slots[k]]-r.b.reuseTick) > 0 {
			k++
		}
		a, b := prev.Offs[j], end(k)
		copy(cur.Lanes[a:b], prev.Lanes[a:b])
		j = k
	}
}

// unalign ends aligned mode: the frame takes the previous frame's first
// r.b.pj entries (which matched) and the lanes they span, and continues
// entry by entry.
func (r *Ring) unalign() {
	if !r.b.aligned {
		return
	}
	if r.b.lanesPending {
		r.fillLanes()
	}
	r.b.aligned = false
	f, prev, n := r.cur, r.prev, r.b.pj
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
func (r *Ring) alignedEntry(slot uint32, m entity.Meta) int {
	if r.b.lanesPending {
		r.fillLanes()
	}
	prev, j := r.prev, r.b.pj
	if j >= len(prev.Slots) || prev.Slots[j] != slot || prev.Metas[j] != m || slot < r.b.last {
		return -1
	}
	r.b.last = slot + 1
	r.b.pj++
	return j
}

// Aligned reports whether the frame being built can be filled by shares
// ([Ring.StartAligned], then each share's [AlignedPut.Range] and
// [AlignedPut.PutAt], then [Ring.EndAligned]), and how many entries it
// has: right after Begin, when there is a previous frame. The caller must know that the
// frame holds exactly the previous frame's entities, with the same entity.Meta
// (no spawn, despawn, generation or component-set change since).
func (r *Ring) Aligned() (entries int, ok bool) {
	if !r.b.open || !r.b.aligned || r.b.pj != 0 || r.b.last != 0 {
		return 0, false
	}
	return len(r.prev.Slots), true
}

// Entry returns the slot and entity.Meta of entry j of the previous frame.
func (r *Ring) Entry(j int) (uint32, entity.Meta) { return r.prev.Slots[j], r.prev.Metas[j] }

// AlignedPut is one goroutine's share of filling an aligned frame (see
// [Ring.Aligned]): PutAt puts entry j's components; an entry not put keeps
// the previous frame's value. Several AlignedPuts may put distinct entries
// concurrently (nothing else may use the Ring meanwhile); [Ring.EndAligned]
// then completes the frame.
type AlignedPut struct {
	r         *Ring
	lo, hi    int      // its entries (Range)
	ch        []uint32 // slots whose lanes changed, ascending
	quantized int
}

// NewAlignedPut returns a share of w's aligned puts.
func (r *Ring) NewAlignedPut() *AlignedPut { return &AlignedPut{r: r} }

// StartAligned readies an aligned frame (see [Ring.Aligned]) for its
// shares: each then copies in the previous lanes of its entries (Range)
// before putting them, and together they cover every entry.
func (r *Ring) StartAligned() {
	if r.b.lanesPending {
		n := len(r.prev.Lanes)
		r.cur.Lanes = slices.Grow(r.cur.Lanes[:0], n)[:n]
		r.b.lanesPending = false
	}
	r.b.sharing = true
}

// Range starts the share's entries: [lo, hi) of the previous frame, whose
// lanes it copies into the frame (after StartAligned).
func (a *AlignedPut) Range(lo, hi int) {
	r := a.r
	a.lo, a.hi = lo, hi
	r.copyLanes(lo, hi)
}

// PutAt is [Ring.Put] for entry j of an aligned frame (same slot and entity.Meta
// as the previous frame's entry j), with one pointer per component of the
// entity.Meta's set. Entries must be put in increasing order within an AlignedPut.
func (a *AlignedPut) PutAt(j int, comps []unsafe.Pointer) {
	r := a.r
	slot, m := r.prev.Slots[j], r.prev.Metas[j]
	if len(comps) != bits.OnesCount64(m.Set) {
		panic("store: PutAt needs one pointer per component in the set")
	}
	if r.rawSame(slot, m.Set, comps) {
		return
	}
	a.quantized++
	if r.quantizeAt(slot, m, comps, j) {
		r.changedAt[slot] = r.cur.Tick
		a.ch = append(a.ch, slot)
	}
}

// EndAligned completes an aligned frame from its shares, given in the order
// of the entries they put: every entry of the previous frame is in the
// frame. Commit follows.
func (r *Ring) EndAligned(shares []*AlignedPut) {
	n := len(r.prev.Slots)
	next := 0
	for _, a := range shares {
		if a.lo == next && a.hi >= a.lo {
			next = a.hi
		} else {
			next = -1
		}
	}
	if !r.b.sharing || next != n {
		panic("store: EndAligned needs StartAligned and shares covering the entries in order")
	}
	r.b.sharing = false
	r.Quantized = 0
	for _, a := range shares {
		r.b.ch = append(r.b.ch, a.ch...)
		r.Quantized += a.quantized
		a.ch, a.quantized = a.ch[:0], 0
	}
	r.Reused = n - r.Quantized
	r.b.pj = n
	if n > 0 {
		r.b.last = r.prev.Slots[n-1] + 1
	}
}

// unalignAll takes every entry of the previous frame (all matched): the
// frame shares the previous frame's entry arrays instead of copying them.
func (r *Ring) unalignAll() {
	f, prev := r.cur, r.prev
	r.b.aligned = false
	f.Slots, f.Metas, f.Offs, f.index, f.layout = prev.Slots, prev.Metas, prev.Offs, prev.index, prev.layout
	r.b.pj = len(prev.Slots)
}
