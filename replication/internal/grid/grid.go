package grid

import (
	arche "github.com/mlange-42/arche/ecs"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/internal/entity"
	"github.com/archenet/archenet/replication/internal/gang"
	"github.com/archenet/archenet/replication/internal/slots"
)

// Grid is a spatial grid over the x/z plane of every replicated
// entity with a Transform, brought up to date on every relevance update: a
// dense array of cells over the entities' bounding box and a margin (at
// most maxGridSide cells a side; entities beyond it share the edge cells),
// each cell's slots contiguous in one array (a counting sort by cell),
// followed by room for more. Lookups are array indexing. A full rebuild
// makes two passes over the entities; between full rebuilds, an update
// moves only the entities whose noted position changed cell (see update).
// Memory is kept across updates.
type Grid struct {
	radius float64
	filter func(client uint8, e arche.Entity) bool
	every  uint32
	leave  float64
	cell   float64
	inv    float64 // 1 / cell

	minX, minZ   int32 // cell coordinates of the grid's first cell
	width, depth int32
	// cellStart is per cell its first index into cellSlots (len cells+1);
	// cellLen its slots there. The entries from cellStart[c]+cellLen[c] to
	// cellStart[c+1] are the cell's room for entities moving in between
	// rebuilds (see update), each farSlot at farXZ, which no scan takes.
	cellStart []int32
	cellLen   []int32
	cellSlots []uint32      // slots, grouped by cell
	cellXZ    []xz          // their positions, in the same order (scans read them in sequence)
	cellOddN  []int32       // per cell: its entities whose x or z is not finite
	cellOf    []int32       // per slot: its cell (−1: none)
	at        []int32       // per slot in a cell: its index in cellSlots
	placed    entity.Bitset // slots in a cell
	oddIn     entity.Bitset // slots in a cell whose x or z is not finite
	global    entity.Bitset // alive without a position

	n notes    // the positions the frame build noted
	o owners   // each client's owned entities
	r rebuilds // the rebuilds' state (rebuild.go)
}

// notes is the positions noted for the next rebuild (NotePos).
type notes struct {
	pos    []components.Vec3
	cx, cz []int32       // per slot: cell coordinates
	posOK  entity.Bitset // slots NotePos recorded this tick
	odd    entity.Bitset // slots whose x or z is not finite
	// moved: slots whose x or z NotePos recorded differs from the one
	// before (their cell coordinates were recomputed)
	moved entity.Bitset
	noted bool // BeginPositions ran since the last rebuild
}

// owners is, per client id, the position of its first owned entity with a
// position (ok), and the slots it owns.
type owners struct {
	pos [256]components.Vec3
	ok  [256]bool
	by  [256][]uint32
}

// rebuilds is the state of the grid's rebuilds: relaid, a slot was
// allocated, freed or changed its layout since the last full rebuild;
// built, the tables hold a full rebuild (of builtSlots slots, sinceFull
// relevance updates ago); the counts of updates and full rebuilds; the
// chunks of the slots and their jobs on the workers.
type rebuilds struct {
	relaid, built     bool
	builtSlots        int
	sinceFull         int
	updates, rebuilds int
	chunks            []gridChunk
	jobs              gridJobs
}

// xz is a position on the grid's plane.
type xz struct{ x, z float64 }

// maxGridSide bounds the grid's cells per side (memory and rebuild time).
const maxGridSide = 1024

// Config is a grid's settings (replication.Interest's, resolved).
type Config struct {
	// Radius is the enter radius; Leave the leave radius (≥ Radius).
	Radius, Leave float64
	// CellSize is the cells' side.
	CellSize float64
	// Every: relevance is recomputed every Every-th net tick (≥ 1).
	Every int
	// Filter, if set, must also accept an entity for it to be relevant to
	// a client; it runs on the workers, concurrently.
	Filter func(client uint8, e arche.Entity) bool
}

// New returns an empty grid.
func New(cfg Config) *Grid {
	g := &Grid{radius: cfg.Radius, filter: cfg.Filter, leave: cfg.Leave, every: uint32(max(cfg.Every, 1)), cell: cfg.CellSize}
	g.inv = 1 / g.cell
	return g
}

// Source is what a rebuild reads of the server: the slot table, the
// registry id of the component positions are read from, how to read one
// from the world (for the slots the frame build did not note: dormant
// ones), and the workers (with Chunked, the passes are cut into chunks for
// them).
type Source struct {
	Slots   []slots.Info
	PosID   int
	Read    func(arche.Entity) components.Vec3
	Gang    *gang.Gang
	Chunked bool
}

// cellCoord is the cell coordinate of x (clamped to ±2^30; NaN: 0).
func (g *Grid) cellCoord(x float64) int32 {
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

// NotePos records slot's position and cell coordinates for the next
// rebuild (the frame build reads every entity's Transform anyway, on every
// worker); a slot whose x or z changed since its last note is moved, and
// its cell coordinates recomputed (they are those of its noted position,
// always).
func (g *Grid) NotePos(slot uint32, p components.Vec3) {
	// (The bit sets are sized by beginPositions.)
	if old := &g.n.pos[slot]; old.X != p.X || old.Z != p.Z { // (NaN: always moved)
		g.n.moved[slot>>6] |= 1 << (slot & 63)
		g.n.cx[slot], g.n.cz[slot] = g.cellCoord(p.X), g.cellCoord(p.Z)
	}
	g.n.pos[slot] = p
	g.n.posOK[slot>>6] |= 1 << (slot & 63)
	if !finite(p.X) || !finite(p.Z) {
		g.n.odd[slot>>6] |= 1 << (slot & 63)
	}
}

// BeginPositions readies NotePos for n slots. The noted positions and
// their cell coordinates are kept (new slots: the origin, cell 0).
func (g *Grid) BeginPositions(n int) {
	g.n.pos = growTo(g.n.pos, n)
	g.n.cx = growTo(g.n.cx, n)
	g.n.cz = growTo(g.n.cz, n)
	words := (n + 63) / 64
	g.n.posOK, g.n.odd, g.n.moved = zeroWords(g.n.posOK, words), zeroWords(g.n.odd, words), zeroWords(g.n.moved, words)
	g.n.noted = true
}

// zeroWords returns b sized to words words, all zero (sized now: workers
// set bits of their own words).
func zeroWords(b entity.Bitset, words int) entity.Bitset {
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
func (g *Grid) index(cx, cz int32) int32 {
	x := min(max(cx-g.minX, 0), g.width-1)
	z := min(max(cz-g.minZ, 0), g.depth-1)
	return z*g.width + x
}

// Relaid tells the grid that a slot was allocated, freed or changed its
// layout: its next rebuild is a full one.
func (g *Grid) Relaid() { g.r.relaid = true }

// Counts returns the relevance updates the grid made by moving entities,
// and by full rebuilds.
func (g *Grid) Counts() (updates, rebuilds int) { return g.r.updates, g.r.rebuilds }

// Due reports whether relevance is recomputed this net tick.
func (g *Grid) Due(tick uint32) bool { return tick%g.every == 0 }
