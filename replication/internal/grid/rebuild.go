package grid

import (
	"math"
	"math/bits"
	"slices"
)

// The interest grid's full rebuild: a pass over the slots (positions,
// owners, the bounding box), then a counting sort of the slots into their
// cells. Both are cut into chunks of 64-slot words that the workers take in
// turn (see gang), each chunk with its own counts, so that a cell lists its
// slots in slot order whichever worker took which chunk. Between full
// rebuilds, an update moves the entities that changed cells (update).

// gridChunk is one share of the rebuild: slots [lo, hi).
type gridChunk struct {
	lo, hi                 int
	minX, minZ, maxX, maxZ int32
	owned                  []uint32 // its live slots with an owner, in order
	counts                 []int32  // per cell: its slots there, then its next index
	// update's: the slots that change cells (or oddness), in order, and
	// whether one left the grid's box
	moves   []uint32
	outside bool
}

// Bounds of the chunked rebuild: it is cut into at most gridChunks chunks
// (none smaller than gridChunkMin slots), and counts per chunk only while
// chunks × cells stays below gridChunkCells (else the sort is one chunk).
const (
	gridChunks     = 8
	gridChunkMin   = 4096
	gridChunkCells = 1 << 20
)

// fullEvery is how many relevance updates at most follow a full rebuild
// before the next (which fits the grid's box and its cells' room to the
// entities again).
const fullEvery = 64

// Rebuild brings the grid to this tick's frame build's noted positions
// (reading those it did not note from the world): by moving the entities
// that changed cells (update) when it can, else in full.
func (g *Grid) Rebuild(src *Source) {
	n := len(src.Slots)
	fromWorld := !g.n.noted || len(g.n.cx) < n
	if fromWorld {
		// No frame build noted positions since the last rebuild: every
		// position is read from the world below.
		g.BeginPositions(n)
	}
	g.n.noted = false
	if !fromWorld && g.update(src) {
		g.r.updates++
		g.r.sinceFull++
		return
	}
	g.r.rebuilds++
	g.rebuildFull(src)
	g.r.relaid, g.r.built, g.r.builtSlots, g.r.sinceFull = false, true, n, 0
}

// rebuildFull recomputes the grid from the noted positions.
func (g *Grid) rebuildFull(src *Source) {
	g.global.Reset()
	clear(g.o.ok[:])
	for k := range g.o.by {
		g.o.by[k] = g.o.by[k][:0]
	}
	n := len(src.Slots)
	g.cellOf = slices.Grow(g.cellOf[:0], n)[:n]
	g.at = slices.Grow(g.at[:0], n)[:n]
	words := (n + 63) / 64
	g.global, g.placed = zeroWords(g.global, words), zeroWords(g.placed, words)
	k := g.chunkCount(src, n)
	chunks := g.cut(n, k)
	g.readyJobs(src)
	src.Gang.Each(len(chunks), g.r.jobs.scan)
	minX, minZ, maxX, maxZ := int32(math.MaxInt32), int32(math.MaxInt32), int32(math.MinInt32), int32(math.MinInt32)
	for i := range chunks {
		c := &chunks[i]
		minX, minZ, maxX, maxZ = min(minX, c.minX), min(minZ, c.minZ), max(maxX, c.maxX), max(maxZ, c.maxZ)
		for _, slot := range c.owned { // (owners in slot order, as one pass would)
			o := src.Slots[slot].Meta.Owner
			g.o.by[o] = append(g.o.by[o], slot)
			if g.cellOf[slot] >= 0 && !g.o.ok[o] {
				g.o.pos[o], g.o.ok[o] = g.n.pos[slot], true
			}
		}
	}
	if minX > maxX {
		minX, maxX, minZ, maxZ = 0, 0, 0, 0
	}
	minX, maxX = withMargin(minX, maxX)
	minZ, maxZ = withMargin(minZ, maxZ)
	g.minX, g.minZ = minX, minZ
	g.width = int32(min(int64(maxX)-int64(minX)+1, maxGridSide))
	g.depth = int32(min(int64(maxZ)-int64(minZ)+1, maxGridSide))
	cells := int(g.width * g.depth)
	if k*cells > gridChunkCells {
		chunks = g.cut(n, 1)
	}
	g.place(src, chunks, cells)
}

// cut cuts slots [0, n) into k chunks of whole 64-slot words.
func (g *Grid) cut(n, k int) []gridChunk {
	for len(g.r.chunks) < k {
		g.r.chunks = append(g.r.chunks, gridChunk{})
	}
	chunks := g.r.chunks[:k]
	words := (n + 63) / 64
	for i := range chunks {
		c := &chunks[i]
		c.lo, c.hi = min(n, i*words/k*64), min(n, (i+1)*words/k*64)
	}
	return chunks
}

// scanChunk is the rebuild's first pass over a chunk's slots: positions
// (cell coordinates: noted by the frame build), owners, the bounding box.
func (g *Grid) scanChunk(src *Source, c *gridChunk) {
	c.minX, c.minZ, c.maxX, c.maxZ = math.MaxInt32, math.MaxInt32, math.MinInt32, math.MinInt32
	c.owned = c.owned[:0]
	hasPos := uint64(1) << src.PosID
	for slot := c.lo; slot < c.hi; slot++ {
		si := &src.Slots[slot]
		g.cellOf[slot] = -1
		if !si.Alive {
			continue
		}
		if si.Meta.Owner != 0 {
			c.owned = append(c.owned, uint32(slot))
		}
		switch {
		case g.n.posOK.Has(uint32(slot)):
		case si.Meta.Set&hasPos == 0:
			g.global[slot>>6] |= 1 << (slot & 63) // (sized by rebuild)
			continue
		default: // not read by this tick's frame build (dormant)
			g.NotePos(uint32(slot), src.Read(si.Entity))
		}
		cx, cz := g.n.cx[slot], g.n.cz[slot]
		c.minX, c.maxX, c.minZ, c.maxZ = min(c.minX, cx), max(c.maxX, cx), min(c.minZ, cz), max(c.maxZ, cz)
		g.cellOf[slot] = 0 // has a position; the cell follows
		g.placed[slot>>6] |= 1 << (slot & 63)
	}
}

// place sorts the slots with a position into their cells: each chunk counts
// its slots per cell, the counts become each chunk's first index in each
// cell (chunks in slot order), and each chunk places its slots; then the
// cells holding a non-finite position are noted.
func (g *Grid) place(src *Source, chunks []gridChunk, cells int) {
	g.r.jobs.cells = cells
	src.Gang.Each(len(chunks), g.r.jobs.count)
	g.cellStart = slices.Grow(g.cellStart[:0], cells+1)[:cells+1]
	g.cellLen = slices.Grow(g.cellLen[:0], cells)[:cells]
	// Each cell gets room for a quarter more entities, plus up to 4 (the
	// fewer the sparser the grid: at most 2 per entity in all).
	base := int32(min(4, max(1, 2*g.placed.Count()/max(cells, 1))))
	total := int32(0)
	for cell := range cells {
		g.cellStart[cell] = total
		for i := range chunks {
			n := chunks[i].counts[cell]
			chunks[i].counts[cell] = total
			total += n
		}
		g.cellLen[cell] = total - g.cellStart[cell]
		total += g.cellLen[cell]/4 + base
	}
	g.cellStart[cells] = total
	g.cellSlots = slices.Grow(g.cellSlots[:0], int(total))[:total]
	g.cellXZ = slices.Grow(g.cellXZ[:0], int(total))[:total]
	for cell := range cells {
		for j := g.cellStart[cell] + g.cellLen[cell]; j < g.cellStart[cell+1]; j++ {
			g.cellSlots[j], g.cellXZ[j] = farSlot, farXZ
		}
	}
	src.Gang.Each(len(chunks), g.r.jobs.scatter)
	g.cellOddN = slices.Grow(g.cellOddN[:0], cells)[:cells]
	clear(g.cellOddN)
	g.oddIn = growTo(g.oddIn[:0], len(g.placed))
	for wi := range g.oddIn {
		w := g.n.odd.Word(wi) & g.placed[wi]
		g.oddIn[wi] = w
		for ; w != 0; w &= w - 1 {
			cell := g.cellOf[wi*64+bits.TrailingZeros64(w)]
			g.cellOddN[cell]++
		}
	}
}

// gridMargin is the empty cells a full rebuild adds on every side of the
// entities' box (while the grid stays within maxGridSide a side), so that
// entities moving out of it until the next full rebuild find cells.
const gridMargin = 2

// withMargin returns the cell range lo..hi widened by gridMargin on both
// sides, unless that takes it to maxGridSide cells or more.
func withMargin(lo, hi int32) (int32, int32) {
	if int64(hi)-int64(lo)+1+2*gridMargin < maxGridSide {
		return lo - gridMargin, hi + gridMargin
	}
	return lo, hi
}

// farSlot at farXZ fills the cells' room: infinitely far, no scan takes it.
var (
	farSlot = uint32(0)
	farXZ   = xz{math.Inf(1), math.Inf(1)}
)

// update brings the grid to the noted positions by moving the entities
// whose cell changed since the last rebuild (a move within a cell only
// changes its position), and reports whether it could: the slots are the
// full rebuild's (none allocated, freed or changed layout since), the
// grid's box holds every new cell and the cells moved into have room, and
// fewer than fullEvery updates followed the full rebuild. When it cannot,
// the tables are left for a full rebuild. The entities the frame build did
// not note (dormant, or between their sends) are read from the world.
func (g *Grid) update(src *Source) bool {
	if !g.r.built || g.r.relaid || len(src.Slots) != g.r.builtSlots || g.r.sinceFull+1 >= fullEvery ||
		g.width >= maxGridSide || g.depth >= maxGridSide {
		return false
	}
	n := len(src.Slots)
	chunks := g.cut(n, g.chunkCount(src, n))
	g.readyJobs(src)
	src.Gang.Each(len(chunks), g.r.jobs.update)
	for i := range chunks {
		if chunks[i].outside {
			return false
		}
	}
	for i := range chunks { // (in slot order)
		for _, slot := range chunks[i].moves {
			if !g.move(slot) {
				return false
			}
		}
	}
	clear(g.o.ok[:])
	for o, slots := range g.o.by {
		for _, slot := range slots { // (in slot order: the first with a position)
			if g.cellOf[slot] >= 0 {
				g.o.pos[o], g.o.ok[o] = g.n.pos[slot], true
				break
			}
		}
	}
	return true
}

// updateChunk is update's pass over chunk c's slots, on the workers: the
// dormant ones are read from the world, the moved ones that stay in their
// cell get their new position, the others are listed in c.moves for move;
// c.outside is set when one left the grid's box.
func (g *Grid) updateChunk(src *Source, c *gridChunk) {
	c.moves, c.outside = c.moves[:0], false
	for wi := c.lo >> 6; wi < (c.hi+63)>>6; wi++ {
		placed := g.placed.Word(wi)
		for k := placed &^ g.n.posOK.Word(wi); k != 0; k &= k - 1 {
			slot := uint32(wi*64 + bits.TrailingZeros64(k))
			g.NotePos(slot, src.Read(src.Slots[slot].Entity))
		}
		for w := g.n.moved.Word(wi) & placed; w != 0; w &= w - 1 {
			slot := uint32(wi*64 + bits.TrailingZeros64(w))
			cell, ok := g.boxCell(slot)
			if !ok {
				c.outside = true
				return
			}
			if cell != g.cellOf[slot] || g.n.odd.Has(slot) || g.oddIn.Has(slot) {
				c.moves = append(c.moves, slot) // (moves, and changes of oddness, are made in turn)
				continue
			}
			g.cellXZ[g.at[slot]] = xz{g.n.pos[slot].X, g.n.pos[slot].Z}
		}
	}
}

// chunkCount is how many chunks the grid's passes over n slots are cut
// into: several for the workers when the frame is built in parallel.
func (g *Grid) chunkCount(src *Source, n int) int {
	if src.Chunked {
		return min(gridChunks, max(1, n/gridChunkMin))
	}
	return 1
}

// boxCell returns the cell of slot's cell coordinates, and whether the
// grid's box holds it (unlike index, it does not clamp).
func (g *Grid) boxCell(slot uint32) (int32, bool) {
	x, z := int64(g.n.cx[slot])-int64(g.minX), int64(g.n.cz[slot])-int64(g.minZ)
	if x < 0 || x >= int64(g.width) || z < 0 || z >= int64(g.depth) {
		return 0, false
	}
	return int32(z)*g.width + int32(x), true
}

// move puts slot, whose noted position changed, in the cell of its cell
// coordinates: in place if it stays in its cell, else out of it (the
// cell's last entry takes its place) and into the new cell's room. It
// reports false when the box does not hold the cell or the cell has no
// room left.
func (g *Grid) move(slot uint32) bool {
	to, ok := g.boxCell(slot)
	if !ok {
		return false
	}
	from := g.cellOf[slot]
	p := xz{g.n.pos[slot].X, g.n.pos[slot].Z}
	if to == from {
		g.cellXZ[g.at[slot]] = p
	} else {
		if g.cellStart[to]+g.cellLen[to] == g.cellStart[to+1] {
			return false // no room
		}
		i, last := g.at[slot], g.cellStart[from]+g.cellLen[from]-1
		if i != last {
			moving := g.cellSlots[last]
			g.cellSlots[i], g.cellXZ[i] = moving, g.cellXZ[last]
			g.at[moving] = i
		}
		g.cellSlots[last], g.cellXZ[last] = farSlot, farXZ
		g.cellLen[from]--
		j := g.cellStart[to] + g.cellLen[to]
		g.cellSlots[j], g.cellXZ[j] = slot, p
		g.at[slot], g.cellOf[slot] = j, to
		g.cellLen[to]++
	}
	if g.oddIn.Has(slot) {
		g.cellOddN[from]--
		g.oddIn.Clear(slot)
	}
	if g.n.odd.Has(slot) {
		g.cellOddN[to]++
		g.oddIn[slot>>6] |= 1 << (slot & 63)
	}
	return true
}

// gridJobs is the rebuild's work on the workers, over the chunks in
// g.r.chunks: the server, the cells, and the jobs, made once (a method value
// is a closure: made per rebuild, each would allocate).
type gridJobs struct {
	src                          *Source
	cells                        int
	scan, count, scatter, update func(i int)
}

// readyJobs readies the rebuild's jobs for src.
func (g *Grid) readyJobs(src *Source) {
	j := &g.r.jobs
	j.src = src
	if j.scan == nil {
		j.scan, j.count, j.scatter, j.update = g.scanAt, g.countAt, g.scatterAt, g.updateAt
	}
}

// updateAt is updateChunk for chunk i.
func (g *Grid) updateAt(i int) { g.updateChunk(g.r.jobs.src, &g.r.chunks[i]) }

// scanAt is scanChunk for chunk i.
func (g *Grid) scanAt(i int) { g.scanChunk(g.r.jobs.src, &g.r.chunks[i]) }

// countAt counts chunk i's slots per cell (place's first pass).
func (g *Grid) countAt(i int) {
	c, cells := &g.r.chunks[i], g.r.jobs.cells
	c.counts = slices.Grow(c.counts[:0], cells)[:cells]
	clear(c.counts)
	for slot := c.lo; slot < c.hi; slot++ {
		if g.cellOf[slot] >= 0 {
			cell := g.index(g.n.cx[slot], g.n.cz[slot])
			g.cellOf[slot] = cell
			c.counts[cell]++
		}
	}
}

// scatterAt places chunk i's slots in their cells (place's second pass).
func (g *Grid) scatterAt(i int) {
	c := &g.r.chunks[i]
	for slot := c.lo; slot < c.hi; slot++ {
		if cell := g.cellOf[slot]; cell >= 0 {
			j := c.counts[cell]
			g.cellSlots[j] = uint32(slot)
			g.cellXZ[j] = xz{g.n.pos[slot].X, g.n.pos[slot].Z}
			g.at[slot] = j
			c.counts[cell]++
		}
	}
}
