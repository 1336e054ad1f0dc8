package grid

import (
	"math"
	"math/bits"
	"slices"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/internal/entity"
	"github.com/archenet/archenet/replication/internal/slots"
)

// Effective narrows a client's last computed relevance to this tick: the
// alive slots that were not reallocated (fresh) since it was computed.
func Effective(r *Relevance, alive, fresh entity.Bitset) {
	for i := range r.Relevant {
		r.Relevant[i] &= alive.Word(i) &^ fresh.Word(i)
	}
}

// Relevance is what interest keeps for one client: the entities relevant
// to it (last computed, then narrowed each tick).
type Relevance struct {
	Relevant entity.Bitset
	FocusX   float64 // x of the focus at the last update (orders clients for the workers)
}

// MemoryBytes returns the bytes r holds.
func (r *Relevance) MemoryBytes() int { return cap(r.Relevant) * 8 }

// relX returns the grid column of cell coordinate cx, clamped to one
// column beyond either edge.
func (g *Grid) relX(cx int32) int32 {
	return int32(min(max(int64(cx)-int64(g.minX), -1), int64(g.width)))
}

// finite reports whether v is neither NaN nor infinite.
func finite(v float64) bool { return v-v == 0 }

// scan sets in next the entities with a position near focus: within the
// enter radius, or the leave radius if prev has them, and accepted (nil
// accept: all are).
func (g *Grid) scan(focus components.Vec3, prev, next entity.Bitset, accept func(uint32) bool) {
	enter2, leave2 := g.radius*g.radius, g.leave*g.leave
	// The grid cells the leave radius touches (cells past the grid's
	// edges are its edge cells, which hold the entities beyond).
	x0 := min(max(g.relX(g.cellCoord(focus.X-g.leave)), 0), g.width-1)
	x1 := min(max(g.relX(g.cellCoord(focus.X+g.leave)), 0), g.width-1)
	z0 := min(max(int64(g.cellCoord(focus.Z-g.leave))-int64(g.minZ), 0), int64(g.depth-1))
	z1 := min(max(int64(g.cellCoord(focus.Z+g.leave))-int64(g.minZ), 0), int64(g.depth-1))
	for z := int32(z0); z <= int32(z1); z++ {
		// Within the row, cells wholly beyond the leave circle are
		// skipped and cells wholly inside the enter circle taken
		// whole (eps covers the rounding of positions to cells);
		// edge rows and columns and cells holding non-finite
		// positions are checked entity by entity.
		xa, xb := x0, x1
		ia, ib := int32(1), int32(0)
		if z != 0 && z != g.depth-1 {
			cz := float64(z + g.minZ)
			lo, hi := cz*g.cell, (cz+1)*g.cell
			eps := 1e-9 * (math.Abs(focus.X) + math.Abs(focus.Z) + g.leave + g.cell)
			near := max(0, lo-focus.Z-eps, focus.Z-hi-eps)
			far := max(math.Abs(focus.Z-lo), math.Abs(focus.Z-hi)) + eps
			rest := leave2 - near*near
			if rest < 0 {
				continue
			}
			h := math.Sqrt(rest) + eps
			xa, xb = max(x0, g.relX(g.cellCoord(focus.X-h))), min(x1, g.relX(g.cellCoord(focus.X+h)))
			if in := enter2 - far*far; in > 0 {
				h := math.Sqrt(in) - eps
				ia, ib = g.relX(g.cellCoord(focus.X-h))+1, g.relX(g.cellCoord(focus.X+h))-1
			}
		}
		// A row's cells are checked in spans, or taken whole.
		row := z * g.width
		check := func(a, b int32) { g.check(row+a, row+b, focus, enter2, leave2, prev, next, accept) }
		if x0 == 0 {
			check(0, 0) // (the edge columns hold the entities beyond the sides)
		}
		if a, b := max(xa, x0, 1), min(xb, x1, g.width-2); a <= b {
			wa, wb := max(ia, a), min(ib, b) // wholly inside the enter circle
			if wa > wb {
				check(a, b)
			} else {
				if a < wa {
					check(a, wa-1)
				}
				for x := wa; x <= wb; x++ {
					if g.cellOddN[row+x] > 0 {
						check(x, x)
					} else {
						g.take(row+x, next, accept)
					}
				}
				if wb < b {
					check(wb+1, b)
				}
			}
		}
		if x1 == g.width-1 && g.width > 1 {
			check(x1, x1)
		}
	}
}

// check sets in next the entities of cells c0..c1 near focus (see scan).
func (g *Grid) check(c0, c1 int32, focus components.Vec3, enter2, leave2 float64, prev, next entity.Bitset, accept func(uint32) bool) {
	for c := c0; c <= c1; c++ { // (cell by cell: their room is skipped)
		a, b := g.cellStart[c], g.cellStart[c]+g.cellLen[c]
		slots, pos := g.cellSlots[a:b], g.cellXZ[a:b]
		if accept == nil {
			near(slots, pos, focus.X, focus.Z, enter2, leave2, prev, next)
			continue
		}
		for i, slot := range slots {
			p := pos[i]
			dx, dz := p.x-focus.X, p.z-focus.Z
			d2 := dx*dx + dz*dz
			if (d2 <= enter2 || (d2 <= leave2 && prev.Has(slot))) && accept(slot) {
				next.Set(slot)
			}
		}
	}
}

// take sets in next every (accepted) entity of cell c.
func (g *Grid) take(c int32, next entity.Bitset, accept func(uint32) bool) {
	slots := g.cellSlots[g.cellStart[c] : g.cellStart[c]+g.cellLen[c]]
	if accept == nil {
		for _, slot := range slots {
			next[slot>>6] |= 1 << (slot & 63) // (next holds every slot)
		}
		return
	}
	for _, slot := range slots {
		if accept(slot) {
			next.Set(slot)
		}
	}
}

// near sets in next the slots whose position (x, z) is within the enter
// radius of (fx, fz), or within the leave radius if prev has them (enter2
// and leave2 are the radii squared). next must hold every slot. (A leaf of
// its own: scan's loop keeps too much in registers.)
func near(slots []uint32, pos []xz, fx, fz, enter2, leave2 float64, prev, next entity.Bitset) {
	pos = pos[:len(slots)]
	for i, slot := range slots {
		p := &pos[i]
		dx, dz := p.x-fx, p.z-fz
		if d2 := dx*dx + dz*dz; d2 <= enter2 || (d2 <= leave2 && prev.Has(slot)) {
			next[slot>>6] |= 1 << (slot & 63)
		}
	}
}

// RelevantFor computes the relevance of client id for this tick into r:
// the entities without a position (global), the entities near its focus
// (when ok; else the position of the first entity it owns), and the
// entities it owns, each accepted by the filter. alive is the slot table's
// live slots, infos its records (for the filter's entities). It computes
// into scratch (the worker's: the last relevance is needed until the new
// one is complete), then swaps the two: r keeps the new one, scratch gets
// the old one's array.
func (g *Grid) RelevantFor(id uint8, focus components.Vec3, ok bool, alive entity.Bitset, infos []slots.Info, r *Relevance, scratch *entity.Bitset) {
	prev := r.Relevant
	next := slices.Grow((*scratch)[:0], len(alive))[:len(alive)]
	clear(next)
	var accept func(uint32) bool // nil: no filter, every entity is
	if filter := g.filter; filter != nil {
		accept = func(slot uint32) bool { return filter(id, infos[slot].Entity) }
	}
	for wi, w := range g.global {
		for ; w != 0; w &= w - 1 {
			if slot := uint32(wi*64 + bits.TrailingZeros64(w)); accept == nil || accept(slot) {
				next.Set(slot)
			}
		}
	}
	if !ok {
		focus, ok = g.o.pos[id], g.o.ok[id]
	}
	if ok {
		r.FocusX = focus.X
	}
	if ok && g.width > 0 && finite(focus.X) && finite(focus.Z) {
		// (a focus at NaN or infinity is near nothing)
		g.scan(focus, prev, next, accept)
	}
	// Owned entities are always relevant to their owner.
	for _, slot := range g.o.by[id] {
		next.Set(slot)
	}
	*scratch, r.Relevant = prev, next
}
