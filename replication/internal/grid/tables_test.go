package grid

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCellCoordIsFloor: cellCoord is floor(x / cell), clamped to ±2^30,
// and 0 for NaN, at and around the edges where truncation and floor part.
func TestCellCoordIsFloor(t *testing.T) {
	g := New(testConfig(2, 0))
	want := func(x float64) int32 {
		c := math.Floor(x * g.inv)
		switch {
		case math.IsNaN(c):
			return 0
		case c < -(1 << 30):
			return -(1 << 30)
		case c > 1<<30:
			return 1 << 30
		}
		return int32(c)
	}
	xs := []float64{0, math.Copysign(0, -1), 0.5, -0.5, 1, -1, 0.999999, -0.999999, 1e-300, -1e-300,
		1 << 30, -(1 << 30), 1<<30 - 0.5, -(1 << 30) - 0.5, 1 << 31, -(1 << 31), 1<<31 + 1, -(1 << 31) - 1,
		1e300, -1e300, math.Inf(1), math.Inf(-1), math.NaN(), 123.456, -123.456}
	for _, x := range xs {
		for _, d := range []float64{-1, 0, 1} {
			x := math.Nextafter(x, x+d)
			if got := g.cellCoord(x); got != want(x) {
				t.Errorf("cellCoord(%v) = %d, want %d", x, got, want(x))
			}
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 100000 {
		x := (rng.Float64() - 0.5) * math.Pow(2, float64(rng.IntN(70)))
		if got := g.cellCoord(x); got != want(x) {
			t.Fatalf("cellCoord(%v) = %d, want %d", x, got, want(x))
		}
	}
}

// TestGridRebuildMatchesReference: the grid rebuilt in chunks on two
// workers (or in one, below the chunked sizes or past the counts bound) has
// the tables a plain reading of the entities gives: every slot's cell, each
// cell's slots in slot order, odd cells, the bounding box, owners (in slot
// order, the first with a position) and global slots. The entities mix
// owned, global (some owned), freed and non-finite ones, a run of dead
// slots a chunk long, and a slot count that is not a multiple of 64; the
// wide one passes the per-chunk counts bound. Each is rebuilt with every
// position read (no frame build noted any) and, but the wide one (whose
// million cells make it the slow one, and whose notes are the narrow
// one's), with the frame build's notes, dormant entities (not noted) read.
func TestGridRebuildMatchesReference(t *testing.T) {
	for _, tc := range []struct {
		n      int
		spread float64
		noted  []bool
	}{{20033, 2000, []bool{false, true}}, {20033, 1e7, []bool{false}}, {65, 2000, []bool{false, true}}, {0, 2000, []bool{false, true}}} {
		for _, noted := range tc.noted {
			t.Run(fmt.Sprint(tc.n, "/", tc.spread, "/noted=", noted), func(t *testing.T) {
				r := newRig(t, testConfig(50, 0), 2)
				rng := rand.New(rand.NewPCG(uint64(tc.n), 8))
				for i := range tc.n {
					x, z := (rng.Float64()-0.5)*tc.spread, (rng.Float64()-0.5)*tc.spread
					switch i % 97 {
					case 1:
						x = math.NaN()
					case 2:
						z = math.Inf(1)
					}
					r.spawn(x, z, uint8(rng.IntN(4)), i%50 == 3)
				}
				for i, e := range r.ents {
					if i%150 == 0 || (i >= 4096 && i < 8300) {
						r.despawn(e)
					} else if noted && i%7 == 0 {
						r.setDormant(e)
					}
				}
				r.relaid()
				if noted {
					r.frame(false) // (a tick without relevance: the dormant are put once)
					r.endTick()
					r.frame(true)
				}
				g := r.g
				r.rebuild()
				if tc.n > 8192 {
					require.Greater(t, len(g.r.chunks), 1, "cut into chunks")
				}
				checkGridTables(t, g)
				want := referenceGrid(g, r)
				got := gridTables(g)
				for name, w := range want {
					if !reflect.DeepEqual(got[name], w) {
						t.Errorf("%s differs from the reference", name)
					}
				}
			})
		}
	}
}

// TestRebuildWithoutNotesReadsPositions: a rebuild that no frame build
// noted positions for reads them (Source.Read), not the positions noted for
// an earlier rebuild; and a rebuild after a frame build takes the noted
// ones. (Found by review: the rebuild of an entity the frame build skipped
// kept its position as if noted this tick.)
func TestRebuildWithoutNotesReadsPositions(t *testing.T) {
	r := newRig(t, testConfig(100, 0), 1)
	es := map[string]*ent{"me": r.spawn(0, 0, 1, false), "other": r.spawn(10, 0, 0, false)}
	r.rebuildNow(true)
	require.True(t, namesIn(r.relevantFor(1, es["me"].pos, false, nil), es)["other"])
	es["other"].pos.X = 5000
	r.rebuildNow(false)
	require.False(t, namesIn(r.relevantFor(1, es["me"].pos, false, nil), es)["other"], "rebuild used the previous rebuild's position")
	es["other"].pos.X = 10
	r.rebuildNow(true)
	require.True(t, namesIn(r.relevantFor(1, es["me"].pos, false, nil), es)["other"], "rebuild after a frame build")
	checkGridTables(t, r.g)
}

// gridTables returns the grid's tables by name (positions as bits: some
// are NaN).
func gridTables(g *Grid) map[string]any {
	owned := map[uint8][3]uint64{}
	for o, ok := range g.o.ok {
		if p := g.o.pos[o]; ok {
			owned[uint8(o)] = [3]uint64{math.Float64bits(p.X), math.Float64bits(p.Y), math.Float64bits(p.Z)}
		}
	}
	ownedBy := map[uint8][]uint32{}
	for o, slots := range g.o.by {
		if len(slots) > 0 {
			ownedBy[uint8(o)] = slices.Clone(slots)
		}
	}
	var global []uint32
	for wi, w := range g.global {
		for ; w != 0; w &= w - 1 {
			global = append(global, uint32(wi*64+bits.TrailingZeros64(w)))
		}
	}
	cellOdd := []bool{}
	for _, n := range g.cellOddN {
		cellOdd = append(cellOdd, n > 0)
	}
	// Each cell's slots, sorted (a full rebuild lists them in slot order,
	// moves between rebuilds do not).
	cells := cellLists{lens: []int32{}, slots: []uint32{}}
	for c := range g.cellLen {
		cells.add(g.cellSlots[g.cellStart[c] : g.cellStart[c]+g.cellLen[c]])
		slices.Sort(cells.slots[len(cells.slots)-int(g.cellLen[c]):])
	}
	// (copies, never nil: an empty world has empty tables)
	return map[string]any{"cells": cells,
		"cellOf": append([]int32{}, g.cellOf...), "cellOdd": cellOdd, "box": [4]int32{g.minX, g.minZ, g.width, g.depth},
		"owned": owned, "ownedBy": ownedBy, "global": global}
}

// cellLists is a list of each cell's slots, flat (a million cells' lists
// each in a slice of its own take long to build and compare).
type cellLists struct {
	lens  []int32  // per cell: its slots
	slots []uint32 // every cell's slots, cell after cell
}

// add appends the next cell's slots.
func (l *cellLists) add(slots []uint32) {
	l.lens = append(l.lens, int32(len(slots)))
	l.slots = append(l.slots, slots...)
}

// checkGridTables checks what the grid's tables say of one another: each
// cell's entries are slots of that cell (cellOf) at their index (at) and
// noted position, its room holds farSlot at farXZ, every slot with a cell
// is listed once and placed, a cell counts its slots with a non-finite x
// or z, and every slot is in the cell of its cell coordinates. (Plain
// comparisons: it checks every entry of a million cells.)
func checkGridTables(t *testing.T, g *Grid) {
	t.Helper()
	listed := 0
	for c := range g.cellLen {
		odd := int32(0)
		for j := g.cellStart[c]; j < g.cellStart[c+1]; j++ {
			slot, p := g.cellSlots[j], g.cellXZ[j]
			if j >= g.cellStart[c]+g.cellLen[c] {
				if slot != farSlot || p != farXZ {
					t.Fatalf("cell %d's room at %d holds slot %d at %v", c, j, slot, p)
				}
				continue
			}
			listed++
			if g.cellOf[slot] != int32(c) {
				t.Fatalf("slot %d listed in cell %d: its cell is %d", slot, c, g.cellOf[slot])
			}
			if g.at[slot] != j {
				t.Fatalf("slot %d's index is %d, listed at %d", slot, g.at[slot], j)
			}
			if !g.placed.Has(slot) {
				t.Fatalf("slot %d listed, not placed", slot)
			}
			q := g.n.pos[slot]
			if math.Float64bits(q.X)|math.Float64bits(q.Z) != math.Float64bits(p.x)|math.Float64bits(p.z) {
				t.Fatalf("slot %d's position %v, noted %v", slot, p, q)
			}
			if g.cellCoord(q.X) != g.n.cx[slot] || g.cellCoord(q.Z) != g.n.cz[slot] {
				t.Fatalf("slot %d's cell coordinates %d, %d; of its position %d, %d", slot, g.n.cx[slot], g.n.cz[slot], g.cellCoord(q.X), g.cellCoord(q.Z))
			}
			if g.index(g.n.cx[slot], g.n.cz[slot]) != int32(c) {
				t.Fatalf("slot %d in cell %d, its coordinates' cell is %d", slot, c, g.index(g.n.cx[slot], g.n.cz[slot]))
			}
			if !finite(q.X) || !finite(q.Z) {
				odd++
			}
		}
		if odd != g.cellOddN[c] {
			t.Fatalf("cell %d counts %d non-finite entities, holds %d", c, g.cellOddN[c], odd)
		}
	}
	if listed != g.placed.Count() {
		t.Fatalf("%d slots listed, %d placed: each placed slot is listed once", listed, g.placed.Count())
	}
}

// referenceGrid computes the grid's tables from the rig's entities, slot
// by slot (g only for its cell coordinates).
func referenceGrid(g *Grid, rg *rig) map[string]any {
	n := len(rg.tab.Infos)
	bySlot := make([]*ent, n) // the live entity in each slot
	for _, e := range rg.ents {
		if e.alive {
			bySlot[e.slot] = e
		}
	}
	cx, cz, cellOf := make([]int32, n), make([]int32, n), make([]int32, n)
	minX, minZ, maxX, maxZ := int32(math.MaxInt32), int32(math.MaxInt32), int32(math.MinInt32), int32(math.MinInt32)
	r := gridTables(&Grid{})
	owned, ownedBy := r["owned"].(map[uint8][3]uint64), r["ownedBy"].(map[uint8][]uint32)
	var global []uint32
	for slot, e := range bySlot {
		cellOf[slot] = -1
		if e == nil {
			continue
		}
		o := e.owner
		if o != 0 {
			ownedBy[o] = append(ownedBy[o], uint32(slot))
		}
		if e.global {
			global = append(global, uint32(slot))
			continue
		}
		p := e.pos
		cx[slot], cz[slot] = g.cellCoord(p.X), g.cellCoord(p.Z)
		minX, maxX, minZ, maxZ = min(minX, cx[slot]), max(maxX, cx[slot]), min(minZ, cz[slot]), max(maxZ, cz[slot])
		cellOf[slot] = 0
		if _, ok := owned[o]; o != 0 && !ok {
			owned[o] = [3]uint64{math.Float64bits(p.X), math.Float64bits(p.Y), math.Float64bits(p.Z)}
		}
	}
	if minX > maxX {
		minX, maxX, minZ, maxZ = 0, 0, 0, 0
	}
	if int64(maxX)-int64(minX)+5 < maxGridSide { // (two empty cells on each side)
		minX, maxX = minX-2, maxX+2
	}
	if int64(maxZ)-int64(minZ)+5 < maxGridSide {
		minZ, maxZ = minZ-2, maxZ+2
	}
	width, depth := int32(min(int64(maxX)-int64(minX)+1, maxGridSide)), int32(min(int64(maxZ)-int64(minZ)+1, maxGridSide))
	cells := int(width * depth)
	lists := make([][]uint32, cells)
	odd := make([]bool, cells)
	for slot, e := range bySlot {
		if cellOf[slot] < 0 {
			continue
		}
		x, z := min(max(cx[slot]-minX, 0), width-1), min(max(cz[slot]-minZ, 0), depth-1)
		c := z*width + x
		cellOf[slot] = c
		lists[c] = append(lists[c], uint32(slot))
		odd[c] = odd[c] || !finite(e.pos.X) || !finite(e.pos.Z)
	}
	cellsOf := cellLists{lens: []int32{}, slots: []uint32{}}
	for _, l := range lists {
		cellsOf.add(l)
	}
	return map[string]any{"cells": cellsOf, "cellOf": cellOf, "cellOdd": odd,
		"box": [4]int32{minX, minZ, width, depth}, "owned": owned, "ownedBy": ownedBy, "global": global}
}
