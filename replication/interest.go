package replication

import (
	"errors"
	"math"
	"reflect"
	"slices"
	"unsafe"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/internal/snapshot"
	"github.com/mlange-42/arche/ecs"
)

// Interest configures per-client relevance: each client receives the
// entities within Radius of its focus point (found with a spatial hash
// grid over the x/z plane), entities without a position (global state),
// and the entities it owns. An entity's position is its
// components.Transform's Pos, or what [Interest].Position reads from
// another component (a 2D game's pose, say). An entity that is relevant
// stays relevant until it is farther than Radius × (1 + Hysteresis), so an
// entity on the border does not flap between spawned and despawned.
//
// Focus runs on the simulation goroutine (in Send, once per client, before
// the clients' datagrams are built in parallel). Filter, called for every
// client and nearby entity, runs on the server's workers
// (ServerConfig.Workers) while they build the clients' datagrams, on
// several goroutines at once: it must only read the world (and its own
// state, safely for concurrent use) and change nothing.
type Interest struct {
	// Radius of the area of interest in metres. Required (> 0).
	Radius float64
	// Hysteresis widens the leave radius. 0: DefaultHysteresis (0.15).
	Hysteresis float64
	// CellSize of the spatial hash grid. 0: Radius/2.
	CellSize float64
	// Position names the replicated component that holds an entity's
	// position and how to read it ([PositionOf]). Zero:
	// components.Transform's Pos.
	Position Position
	// Focus returns a client's point of interest. Nil (or ok = false): the
	// position of the first entity the client owns that has a position;
	// a client with no such entity gets only global and owned entities.
	Focus func(c ClientID) (pos components.Vec3, ok bool)
	// Filter, if set, must also accept an entity for it to be relevant. It
	// runs on the workers, concurrently (see above).
	Filter func(c ClientID, e ecs.Entity) bool
	// Every recomputes relevance every N-th net tick (entities spawned in
	// between wait for the next update). 0: every 2nd net tick (15 Hz at
	// 30 Hz); 1: every tick.
	Every int
}

// DefaultHysteresis is the default of [Interest].Hysteresis.
const DefaultHysteresis = 0.15

// Position tells interest management where an entity is: the replicated
// component that holds its position, and how to read it. Make one with
// [PositionOf]; the zero Position is components.Transform's Pos.
type Position struct {
	typ  reflect.Type
	read func(unsafe.Pointer) components.Vec3
}

// PositionOf returns the Position read from component T by read. Interest
// works on the x/z plane: a 2D game returns its coordinates as X and Z,
// e.g. PositionOf(func(b *Body) components.Vec3 { return components.Vec3{X: b.X, Z: b.Y} }).
// T must be in the server's registry. read runs on the server's workers
// while they build a frame, for entities of their share: it must only read
// the component it is given.
func PositionOf[T any](read func(*T) components.Vec3) Position {
	return Position{typ: reflect.TypeFor[T](), read: func(p unsafe.Pointer) components.Vec3 { return read((*T)(p)) }}
}

// Type returns the component type positions are read from.
func (p Position) Type() reflect.Type {
	if p.typ == nil {
		return reflect.TypeFor[components.Transform]()
	}
	return p.typ
}

// At reads the position from a pointer to the component (of [Position.Type]).
func (p Position) At(ptr unsafe.Pointer) components.Vec3 {
	if p.read == nil {
		return (*components.Transform)(ptr).Pos
	}
	return p.read(ptr)
}

func (i *Interest) validate() error {
	if !(i.Radius > 0) || math.IsInf(i.Radius, 0) {
		return errors.New("replication: Interest.Radius must be positive")
	}
	if i.Hysteresis < 0 {
		return errors.New("replication: Interest.Hysteresis must not be negative")
	}
	if i.Every < 0 {
		return errors.New("replication: Interest.Every must not be negative")
	}
	return nil
}

// interestGrid is a spatial grid over the x/z plane of every replicated
// entity with a Transform, brought up to date on every relevance update: a
// dense array of cells over the entities' bounding box and a margin (at
// most maxGridSide cells a side; entities beyond it share the edge cells),
// each cell's slots contiguous in one array (a counting sort by cell),
// followed by room for more. Lookups are array indexing. A full rebuild
// makes two passes over the entities; between full rebuilds, an update
// moves only the entities whose noted position changed cell (see update).
// Memory is kept across updates.
type interestGrid struct {
	cfg   Interest
	every uint32
	fresh snapshot.Bitset // slots (re)allocated since the last update
	leave float64
	cell  float64

	minX, minZ   int32 // cell coordinates of the grid's first cell
	width, depth int32
	// cellStart is per cell its first index into cellSlots (len cells+1);
	// cellLen its slots there. The entries from cellStart[c]+cellLen[c] to
	// cellStart[c+1] are the cell's room for entities moving in between
	// rebuilds (see update), each farSlot at farXZ, which no scan takes.
	cellStart []int32
	cellLen   []int32
	cellSlots []uint32        // slots, grouped by cell
	cellXZ    []xz            // their positions, in the same order (scans read them in sequence)
	cellOddN  []int32         // per cell: its entities whose x or z is not finite
	cellOf    []int32         // per slot: its cell (−1: none)
	at        []int32         // per slot in a cell: its index in cellSlots
	placed    snapshot.Bitset // slots in a cell
	oddIn     snapshot.Bitset // slots in a cell whose x or z is not finite
	// moved: slots whose x or z notePos recorded differs from the one
	// before (their cell coordinates were recomputed)
	moved snapshot.Bitset
	// relaid: a slot was allocated, freed or changed its layout since the
	// last full rebuild; built: the tables hold a full rebuild (of
	// builtSlots slots, sinceFull relevance updates ago)
	relaid, built     bool
	builtSlots        int
	sinceFull         int
	updates, rebuilds int // relevance updates done by update, and by a full rebuild
	pos               []components.Vec3
	global            snapshot.Bitset // alive without a position
	// per client id: the position of its first owned entity with a
	// position (ownedOK), and the slots it owns
	owned   [256]components.Vec3
	ownedOK [256]bool
	ownedBy [256][]uint32
	chunks  []gridChunk // the rebuild's shares of the slots (grid_rebuild.go)
	jobs    gridJobs
	cx, cz  []int32         // per slot: cell coordinates
	posOK   snapshot.Bitset // slots notePos recorded this tick
	odd     snapshot.Bitset // slots whose x or z is not finite
	noted   bool            // beginPositions ran since the last rebuild
	inv     float64         // 1 / cell
}

// xz is a position on the grid's plane.
type xz struct{ x, z float64 }

// maxGridSide bounds the grid's cells per side (memory and rebuild time).
const maxGridSide = 1024

func newInterestGrid(cfg *Interest) *interestGrid {
	g := &interestGrid{cfg: *cfg}
	h := cfg.Hysteresis
	if h == 0 {
		h = DefaultHysteresis
	}
	g.leave = cfg.Radius * (1 + h)
	g.every = uint32(cfg.Every)
	if g.every == 0 {
		g.every = 2
	}
	g.cell = cfg.CellSize
	if g.cell <= 0 {
		g.cell = cfg.Radius / 2
	}
	g.inv = 1 / g.cell
	return g
}

// cellCoord is the cell coordinate of x (clamped to ±2^30; NaN: 0).
func (g *interestGrid) cellCoord(x float64) int32 {
	v := x * g.inv
	if v >= -(1<<30) && v < 1<<30 {
		// floor(v) without math.Floor, whose fallback call makes the
		// callers spill: truncate, then step down below zero.
		c := int32(v)
		if float64(c) > v {
			c--
		}
		return c
	}
	switch {
	case v < 0:
		return -(1 << 30)
	case v > 0:
		return 1 << 30
	}
	return 0
}

// notePos records slot's position and cell coordinates for the next
// rebuild (the frame build reads every entity's Transform anyway, on every
// worker); a slot whose x or z changed since its last note is moved, and
// its cell coordinates recomputed (they are those of its noted position,
// always).
func (g *interestGrid) notePos(slot uint32, p components.Vec3) {
	// (The bit sets are sized by beginPositions.)
	if old := &g.pos[slot]; old.X != p.X || old.Z != p.Z { // (NaN: always moved)
		g.moved[slot>>6] |= 1 << (slot & 63)
		g.cx[slot], g.cz[slot] = g.cellCoord(p.X), g.cellCoord(p.Z)
	}
	g.pos[slot] = p
	g.posOK[slot>>6] |= 1 << (slot & 63)
	if !finite(p.X) || !finite(p.Z) {
		g.odd[slot>>6] |= 1 << (slot & 63)
	}
}

// beginPositions readies notePos for n slots. The noted positions and
// their cell coordinates are kept (new slots: the origin, cell 0).
func (g *interestGrid) beginPositions(n int) {
	g.pos = growTo(g.pos, n)
	g.cx = growTo(g.cx, n)
	g.cz = growTo(g.cz, n)
	words := (n + 63) / 64
	g.posOK, g.odd, g.moved = zeroWords(g.posOK, words), zeroWords(g.odd, words), zeroWords(g.moved, words)
	g.noted = true
}

// zeroWords returns b sized to words words, all zero (sized now: workers
// set bits of their own words).
func zeroWords(b snapshot.Bitset, words int) snapshot.Bitset {
	b = growTo(b[:0], words)
	clear(b)
	return b
}

// growTo returns s with length n (≥ len(s)), its elements kept: within
// its capacity, the new ones are what s's array holds there (zero for a
// slice that never shrank), beyond it zero.
func growTo[T any](s []T, n int) []T {
	if n <= cap(s) {
		return s[:n] // (no append: with the race detector on, it allocates)
	}
	return append(s, make([]T, n-len(s))...)
}

// index returns the grid cell of cell coordinates (cx, cz), clamped into the
// grid.
func (g *interestGrid) index(cx, cz int32) int32 {
	x := min(max(cx-g.minX, 0), g.width-1)
	z := min(max(cz-g.minZ, 0), g.depth-1)
	return z*g.width + x
}

// due reports whether relevance is recomputed this net tick.
func (g *interestGrid) due(tick uint32) bool { return tick%g.every == 0 }

// effective narrows a client's last computed relevance to this tick: alive
// slots that were not reallocated since the relevance was computed.
func (g *interestGrid) effective(s *Server, r *relevance) {
	for i := range r.relevant {
		r.relevant[i] &= s.alive.Word(i) &^ g.fresh.Word(i)
	}
}

// relevance is what interest keeps for one client: the entities relevant
// to it (last computed, then narrowed each tick).
type relevance struct {
	relevant snapshot.Bitset
	focusX   float64 // x of the focus at the last update (orders clients for the workers)
}

func (r *relevance) memoryBytes() int { return cap(r.relevant) * 8 }

// relX returns the grid column of cell coordinate cx, clamped to one
// column beyond either edge.
func (g *interestGrid) relX(cx int32) int32 {
	return int32(min(max(int64(cx)-int64(g.minX), -1), int64(g.width)))
}

// finite reports whether v is neither NaN nor infinite.
func finite(v float64) bool { return v-v == 0 }

// scan sets in next the entities with a position near focus: within the
// enter radius, or the leave radius if prev has them, and accepted (nil
// accept: all are).
func (g *interestGrid) scan(focus components.Vec3, prev, next snapshot.Bitset, accept func(uint32) bool) {
	enter2, leave2 := g.cfg.Radius*g.cfg.Radius, g.leave*g.leave
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
func (g *interestGrid) check(c0, c1 int32, focus components.Vec3, enter2, leave2 float64, prev, next snapshot.Bitset, accept func(uint32) bool) {
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
func (g *interestGrid) take(c int32, next snapshot.Bitset, accept func(uint32) bool) {
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
func near(slots []uint32, pos []xz, fx, fz, enter2, leave2 float64, prev, next snapshot.Bitset) {
	pos = pos[:len(slots)]
	for i, slot := range slots {
		p := &pos[i]
		dx, dz := p.x-fx, p.z-fz
		if d2 := dx*dx + dz*dz; d2 <= enter2 || (d2 <= leave2 && prev.Has(slot)) {
			next[slot>>6] |= 1 << (slot & 63)
		}
	}
}

// relevantFor computes c's relevance for this tick, in scratch (the
// worker's: the last relevance is needed until the new one is complete),
// then swaps the two: c keeps the new one, scratch gets the old one's
// array.
func (g *interestGrid) relevantFor(s *Server, c *remote, scratch *snapshot.Bitset) {
	prev := c.rel.relevant
	next := slices.Grow((*scratch)[:0], len(s.alive))[:len(s.alive)]
	clear(next)
	var accept func(uint32) bool // nil: no filter, every entity is
	if filter := g.cfg.Filter; filter != nil {
		accept = func(slot uint32) bool { return filter(c.id, s.slots[slot].entity) }
	}
	for wi, w := range g.global {
		for ; w != 0; w &= w - 1 {
			if slot := uint32(wi*64 + tz64(w)); accept == nil || accept(slot) {
				next.Set(slot)
			}
		}
	}
	focus, ok := c.focus, c.hasFocus // (the game's Focus, asked in planPeer)
	if !ok {
		focus, ok = g.owned[c.id], g.ownedOK[c.id]
	}
	if ok {
		c.rel.focusX = focus.X
	}
	if ok && g.width > 0 && finite(focus.X) && finite(focus.Z) {
		// (a focus at NaN or infinity is near nothing)
		g.scan(focus, prev, next, accept)
	}
	// Owned entities are always relevant to their owner.
	for _, slot := range g.ownedBy[c.id] {
		next.Set(slot)
	}
	*scratch, c.rel.relevant = prev, next
}
