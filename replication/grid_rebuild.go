package replication

import (
	"math"
	"slices"
)

// The interest grid's rebuild: a pass over the slots (positions, owners,
// the bounding box), then a counting sort of the slots into their cells.
// Both are cut into chunks of 64-slot words that the workers take in turn
// (see gang), each chunk with its own counts, so that a cell lists its
// slots in slot order whichever worker took which chunk.

// gridChunk is one share of the rebuild: slots [lo, hi).
type gridChunk struct {
	lo, hi                 int
	minX, minZ, maxX, maxZ int32
	owned                  []uint32 // its live slots with an owner, in order
	counts                 []int32  // per cell: its slots there, then its next index
}

// Bounds of the chunked rebuild: it is cut into at most gridChunks chunks
// (none smaller than gridChunkMin slots), and counts per chunk only while
// chunks × cells stays below gridChunkCells (else the sort is one chunk).
const (
	gridChunks     = 8
	gridChunkMin   = 4096
	gridChunkCells = 1 << 20
)

// rebuild recomputes the grid from this tick's frame build's noted positions
// (reading those it did not note from the world).
func (g *interestGrid) rebuild(s *Server) {
	g.global.Reset()
	clear(g.ownedOK[:])
	for k := range g.ownedBy {
		g.ownedBy[k] = g.ownedBy[k][:0]
	}
	n := len(s.slots)
	if len(g.pos) < n {
		g.pos = slices.Grow(g.pos, n-len(g.pos))[:n]
	}
	g.cellOf = slices.Grow(g.cellOf[:0], n)[:n]
	if !g.noted || len(g.cx) < n {
		// No frame build noted positions since the last rebuild: every
		// position is read from the world below.
		g.beginPositions(n)
	}
	g.noted = false
	for len(g.global) < (n+63)/64 {
		g.global = append(g.global, 0) // sized now: chunks set bits of their own words
	}
	k := 1
	if len(s.workers) > 1 && n >= s.cfg.ParallelFrame {
		k = min(gridChunks, max(1, n/gridChunkMin))
	}
	chunks := g.cut(n, k)
	g.readyJobs(s)
	s.gang.each(len(chunks), g.jobs.scan)
	minX, minZ, maxX, maxZ := int32(math.MaxInt32), int32(math.MaxInt32), int32(math.MinInt32), int32(math.MinInt32)
	for i := range chunks {
		c := &chunks[i]
		minX, minZ, maxX, maxZ = min(minX, c.minX), min(minZ, c.minZ), max(maxX, c.maxX), max(maxZ, c.maxZ)
		for _, slot := range c.owned { // (owners in slot order, as one pass would)
			o := s.slots[slot].meta.Owner
			g.ownedBy[o] = append(g.ownedBy[o], slot)
			if g.cellOf[slot] >= 0 && !g.ownedOK[o] {
				g.owned[o], g.ownedOK[o] = g.pos[slot], true
			}
		}
	}
	if minX > maxX {
		minX, maxX, minZ, maxZ = 0, 0, 0, 0
	}
	g.minX, g.minZ = minX, minZ
	g.width = int32(min(int64(maxX)-int64(minX)+1, maxGridSide))
	g.depth = int32(min(int64(maxZ)-int64(minZ)+1, maxGridSide))
	cells := int(g.width * g.depth)
	if k*cells > gridChunkCells {
		chunks = g.cut(n, 1)
	}
	g.place(s, chunks, cells)
}

// cut cuts slots [0, n) into k chunks of whole 64-slot words.
func (g *interestGrid) cut(n, k int) []gridChunk {
	for len(g.chunks) < k {
		g.chunks = append(g.chunks, gridChunk{})
	}
	chunks := g.chunks[:k]
	words := (n + 63) / 64
	for i := range chunks {
		c := &chunks[i]
		c.lo, c.hi = min(n, i*words/k*64), min(n, (i+1)*words/k*64)
	}
	return chunks
}

// scanChunk is the rebuild's first pass over a chunk's slots: positions
// (cell coordinates: noted by the frame build), owners, the bounding box.
func (g *interestGrid) scanChunk(s *Server, c *gridChunk) {
	c.minX, c.minZ, c.maxX, c.maxZ = math.MaxInt32, math.MaxInt32, math.MinInt32, math.MinInt32
	c.owned = c.owned[:0]
	hasPos := uint64(1) << s.posPl.ID
	for slot := c.lo; slot < c.hi; slot++ {
		si := &s.slots[slot]
		g.cellOf[slot] = -1
		if !si.alive {
			continue
		}
		if si.meta.Owner != 0 {
			c.owned = append(c.owned, uint32(slot))
		}
		switch {
		case g.posOK.Has(uint32(slot)):
		case si.meta.Set&hasPos == 0:
			g.global[slot>>6] |= 1 << (slot & 63) // (sized by rebuild)
			continue
		default: // not read by this tick's frame build (dormant)
			g.notePos(uint32(slot), g.cfg.Position.At(s.world.Get(si.entity, s.idPos)))
		}
		cx, cz := g.cx[slot], g.cz[slot]
		c.minX, c.maxX, c.minZ, c.maxZ = min(c.minX, cx), max(c.maxX, cx), min(c.minZ, cz), max(c.maxZ, cz)
		g.cellOf[slot] = 0 // has a position; the cell follows
	}
}

// place sorts the slots with a position into their cells: each chunk counts
// its slots per cell, the counts become each chunk's first index in each
// cell (chunks in slot order), and each chunk places its slots; then the
// cells holding a non-finite position are noted.
func (g *interestGrid) place(s *Server, chunks []gridChunk, cells int) {
	g.jobs.cells = cells
	s.gang.each(len(chunks), g.jobs.count)
	g.cellStart = slices.Grow(g.cellStart[:0], cells+1)[:cells+1]
	total := int32(0)
	for cell := range cells {
		g.cellStart[cell] = total
		for i := range chunks {
			n := chunks[i].counts[cell]
			chunks[i].counts[cell] = total
			total += n
		}
	}
	g.cellStart[cells] = total
	g.cellSlots = slices.Grow(g.cellSlots[:0], int(total))[:total]
	g.cellXZ = slices.Grow(g.cellXZ[:0], int(total))[:total]
	s.gang.each(len(chunks), g.jobs.scatter)
	g.cellOdd = slices.Grow(g.cellOdd[:0], cells)[:cells]
	clear(g.cellOdd)
	for wi, w := range g.odd {
		for ; w != 0; w &= w - 1 {
			if cell := g.cellOf[wi*64+tz64(w)]; cell >= 0 {
				g.cellOdd[cell] = true
			}
		}
	}
}

// gridJobs is the rebuild's work on the workers, over the chunks in
// g.chunks: the server, the cells, and the jobs, made once (a method value
// is a closure: made per rebuild, each would allocate).
type gridJobs struct {
	s                    *Server
	cells                int
	scan, count, scatter func(i int)
}

// readyJobs readies the rebuild's jobs for server s.
func (g *interestGrid) readyJobs(s *Server) {
	j := &g.jobs
	j.s = s
	if j.scan == nil {
		j.scan, j.count, j.scatter = g.scanAt, g.countAt, g.scatterAt
	}
}

// scanAt is scanChunk for chunk i.
func (g *interestGrid) scanAt(i int) { g.scanChunk(g.jobs.s, &g.chunks[i]) }

// countAt counts chunk i's slots per cell (place's first pass).
func (g *interestGrid) countAt(i int) {
	c, cells := &g.chunks[i], g.jobs.cells
	c.counts = slices.Grow(c.counts[:0], cells)[:cells]
	clear(c.counts)
	for slot := c.lo; slot < c.hi; slot++ {
		if g.cellOf[slot] >= 0 {
			cell := g.index(g.cx[slot], g.cz[slot])
			g.cellOf[slot] = cell
			c.counts[cell]++
		}
	}
}

// scatterAt places chunk i's slots in their cells (place's second pass).
func (g *interestGrid) scatterAt(i int) {
	c := &g.chunks[i]
	for slot := c.lo; slot < c.hi; slot++ {
		if cell := g.cellOf[slot]; cell >= 0 {
			j := c.counts[cell]
			g.cellSlots[j] = uint32(slot)
			g.cellXZ[j] = xz{g.pos[slot].X, g.pos[slot].Z}
			c.counts[cell]++
		}
	}
}
