package replication

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/internal/snapshot"
	"github.com/archenet/archenet/replication/schema"
	"github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/require"
)

// interestServer is a server without transport whose entities sit where a
// test puts them.
type interestServer struct {
	s     *Server
	w     *ecs.World
	slots map[string]uint32
}

func newInterestServer(t *testing.T, in Interest) *interestServer {
	return newInterestServerWith(t, in, nil)
}

// newInterestServerWith is newInterestServer with tweak applied to the
// server's configuration.
func newInterestServerWith(t *testing.T, in Interest, tweak func(*ServerConfig)) *interestServer {
	reg := schema.NewRegistry()
	schema.MustRegister[components.Transform](reg)
	schema.MustRegister[tagComponent](reg)
	w := ecs.NewWorld()
	cfg := ServerConfig{Registry: reg, Interest: &in, Logger: quietLogger}
	if tweak != nil {
		tweak(&cfg)
	}
	s, err := NewServer(&w, nil, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return &interestServer{s: s, w: &w, slots: map[string]uint32{}}
}

type tagComponent struct {
	V uint8 `net:"range=0:3"`
}

// at spawns a replicated entity named name at x, z owned by owner (0: the
// server); without a position (global) if global.
func (is *interestServer) at(name string, x, z float64, owner uint8, global bool) ecs.Entity {
	w := is.w
	ids := []ecs.ID{ecs.ComponentID[components.Replicated](w)}
	if global {
		ids = append(ids, ecs.ComponentID[tagComponent](w))
	} else {
		ids = append(ids, ecs.ComponentID[components.Transform](w))
	}
	if owner != 0 {
		ids = append(ids, ecs.ComponentID[components.Owner](w))
	}
	e := w.NewEntity(ids...)
	if !global {
		tr := (*components.Transform)(w.Get(e, ecs.ComponentID[components.Transform](w)))
		tr.Pos, tr.Rot = components.Vec3{X: x, Z: z}, components.QuatIdentity()
	}
	if owner != 0 {
		(*components.Owner)(w.Get(e, ecs.ComponentID[components.Owner](w))).Client = owner
	}
	is.s.applyStructure()
	id, _ := is.s.NetID(e)
	is.slots[name] = id.Index()
	return e
}

// relevant computes client id's relevance (with its previous relevance)
// and returns the names relevant to it.
func (is *interestServer) relevant(p *remote) map[string]bool {
	is.s.interest.rebuild(is.s)
	p.focus, p.hasFocus = is.s.focusOf(p.id)
	var scratch snapshot.Bitset
	is.s.interest.relevantFor(is.s, p, &scratch)
	out := map[string]bool{}
	for name, slot := range is.slots {
		if p.rel.relevant.Has(slot) {
			out[name] = true
		}
	}
	return out
}

func TestInterestRelevance(t *testing.T) {
	const r = 100.0 // leave radius 115 with the default hysteresis
	for _, tc := range []struct {
		name   string
		in     Interest
		before map[string]bool // relevant last time (hysteresis)
		want   []string
	}{
		{name: "enter radius, global and owned", in: Interest{Radius: r},
			want: []string{"me", "near", "edge", "global", "mine-far"}},
		{name: "hysteresis keeps what was relevant", in: Interest{Radius: r},
			before: map[string]bool{"between": true, "beyond": true},
			want:   []string{"me", "near", "edge", "between", "global", "mine-far"}},
		{name: "focus from the hook", in: Interest{Radius: r, Focus: func(ClientID) (components.Vec3, bool) { return components.Vec3{X: 5000, Z: 5000}, true }},
			want: []string{"me", "far", "global", "mine-far"}}, // what it owns too
		{name: "filter", in: Interest{Radius: r, Filter: func(_ ClientID, e ecs.Entity) bool { return e.ID()%2 == 1 }},
			want: nil}, // computed below
		{name: "small cells", in: Interest{Radius: r, CellSize: 7},
			want: []string{"me", "near", "edge", "global", "mine-far"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := newInterestServer(t, tc.in)
			es := map[string]ecs.Entity{}
			es["me"] = is.at("me", 0, 0, 1, false)
			es["near"] = is.at("near", 30, -40, 0, false)
			es["edge"] = is.at("edge", 0, r-0.001, 0, false)
			es["between"] = is.at("between", 0, -(r + 10), 0, false)
			es["beyond"] = is.at("beyond", r+20, 0, 0, false)
			es["global"] = is.at("global", 0, 0, 0, true)
			es["far"] = is.at("far", 5000, 5010, 0, false)
			es["mine-far"] = is.at("mine-far", -3e6, 2e6, 1, false) // beyond the grid's 1024 cells a side
			es["theirs"] = is.at("theirs", -3e6, 2e6, 2, false)
			p := newRemote(1, &is.s.cfg)
			for name := range tc.before {
				p.rel.relevant.Set(is.slots[name])
			}
			want := map[string]bool{}
			for _, n := range tc.want {
				want[n] = true
			}
			if tc.in.Filter != nil {
				for n, e := range es {
					if n == "me" || n == "mine-far" || (e.ID()%2 == 1 && (n == "near" || n == "edge" || n == "global")) {
						want[n] = true
					}
				}
			}
			require.Equal(t, want, is.relevant(p))
		})
	}
}

// Someone far beyond the grid's edge cells sees the entities around it.
func TestInterestBeyondTheGrid(t *testing.T) {
	is := newInterestServer(t, Interest{Radius: 10})
	is.at("origin", 0, 0, 0, false)
	is.at("me", 1e7, 0, 1, false)
	is.at("neighbour", 1e7+5, 3, 0, false)
	is.at("far-neighbour", 1e7+50, 0, 0, false)
	got := is.relevant(newRemote(1, &is.s.cfg))
	require.Equal(t, map[string]bool{"me": true, "neighbour": true}, got)
}

// The grid's whole-cell shortcuts give exactly what checking every entity
// gives: random entities (many on cell borders, some right at either
// radius, a few at NaN), random foci and previous relevance, several cell sizes.
func TestInterestCellsMatchBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, cell := range []float64{0, 7, 25, 60} {
		const r = 50.0
		is := newInterestServer(t, Interest{Radius: r, CellSize: cell})
		pos := map[string]components.Vec3{}
		for i := range 600 {
			x, z := rng.Float64()*600-300, rng.Float64()*600-300
			switch i % 10 {
			case 0: // on a cell border
				x = math.Round(x/25) * 25
			case 1:
				z = math.Round(z/7) * 7
			}
			name := fmt.Sprint("e", i)
			if i%97 == 0 { // (infinities would stretch the grid: TestInterestBeyondTheGrid)
				x = math.NaN()
			}
			is.at(name, x, z, 0, false)
			pos[name] = components.Vec3{X: x, Z: z}
		}
		for round := range 40 {
			focus := components.Vec3{X: rng.Float64()*500 - 250, Z: rng.Float64()*500 - 250}
			if round%5 == 0 { // exactly a radius from an entity
				p := pos[fmt.Sprint("e", rng.IntN(600))]
				focus = components.Vec3{X: p.X + r, Z: p.Z}
			}
			// Entities right at either radius, all around the focus.
			for k := range 24 {
				d := []float64{r, is.s.interest.leave}[k%2] * (1 + float64(k%3-1)*1e-12)
				a := rng.Float64() * 2 * math.Pi
				name := fmt.Sprint("r", round, "-", k)
				q := components.Vec3{X: focus.X + d*math.Cos(a), Z: focus.Z + d*math.Sin(a)}
				is.at(name, q.X, q.Z, 0, false)
				pos[name] = q
			}
			is.s.interest.cfg.Focus = func(ClientID) (components.Vec3, bool) { return focus, true }
			p := newRemote(1, &is.s.cfg)
			before := map[string]bool{}
			for name := range pos {
				if rng.IntN(2) == 0 {
					before[name] = true
					p.rel.relevant.Set(is.slots[name])
				}
			}
			want := map[string]bool{}
			leave := is.s.interest.leave
			for name, q := range pos {
				dx, dz := q.X-focus.X, q.Z-focus.Z
				d2 := dx*dx + dz*dz
				if d2 <= r*r || (d2 <= leave*leave && before[name]) {
					want[name] = true
				}
			}
			require.Equal(t, want, is.relevant(p), "cell %v, round %d", cell, round)
		}
	}
}

// TestCellCoordIsFloor: cellCoord is floor(x / cell), clamped to ±2^30,
// and 0 for NaN, at and around the edges where truncation and floor part.
func TestCellCoordIsFloor(t *testing.T) {
	g := newInterestGrid(&Interest{Radius: 2})
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

// TestInterestRebuildWithoutFrame: a rebuild that no frame build noted
// positions for reads them from the world, not from an earlier rebuild.
// (Found by review: the rebuild of an entity the frame build skipped kept
// its position as if noted this tick.)
func TestInterestRebuildWithoutFrame(t *testing.T) {
	is := newInterestServer(t, Interest{Radius: 100})
	is.at("me", 0, 0, 1, false)
	e := is.at("other", 10, 0, 0, false)
	p := newRemote(1, &is.s.cfg)
	require.True(t, is.relevant(p)["other"])
	tr := (*components.Transform)(is.w.Get(e, ecs.ComponentID[components.Transform](is.w)))
	tr.Pos.X = 5000
	require.False(t, is.relevant(p)["other"], "rebuild used the previous rebuild's position")
}

// TestGridRebuildMatchesReference: the grid rebuilt in chunks on two
// workers (or in one, below the chunked sizes or past the counts bound) has
// the tables a plain reading of the world gives: every slot's cell, each
// cell's slots in slot order, odd cells, the bounding box, owners (in slot
// order, the first with a position) and global slots. The worlds mix owned,
// global (some owned), freed and non-finite entities, a run of dead slots a
// chunk long, and a slot count that is not a multiple of 64; the wide one
// passes the per-chunk counts bound.
func TestGridRebuildMatchesReference(t *testing.T) {
	for _, tc := range []struct {
		n      int
		spread float64
	}{{20033, 2000}, {20033, 1e7}, {65, 2000}, {0, 2000}} {
		t.Run(fmt.Sprint(tc.n, "/", tc.spread), func(t *testing.T) {
			is := newInterestServerWith(t, Interest{Radius: 50}, func(c *ServerConfig) { c.Workers, c.ParallelFrame = 2, 1 })
			rng := rand.New(rand.NewPCG(uint64(tc.n), 8))
			var es []ecs.Entity
			for i := range tc.n {
				x, z := (rng.Float64()-0.5)*tc.spread, (rng.Float64()-0.5)*tc.spread
				switch i % 97 {
				case 1:
					x = math.NaN()
				case 2:
					z = math.Inf(1)
				}
				es = append(es, is.at(fmt.Sprint(i), x, z, uint8(rng.IntN(4)), i%50 == 3))
			}
			for i, e := range es {
				if i%150 == 0 || (i >= 4096 && i < 8300) {
					is.w.RemoveEntity(e)
				}
			}
			is.s.applyStructure()
			g := is.s.interest
			is.s.gang.wake()
			g.rebuild(is.s)
			is.s.gang.rest()
			if tc.n > 8192 {
				require.Greater(t, len(g.chunks), 1, "cut into chunks")
			}
			checkGridTables(t, g)
			want := referenceGrid(is.s)
			got := gridTables(g)
			for name, w := range want {
				if !reflect.DeepEqual(got[name], w) {
					t.Errorf("%s differs from the reference", name)
				}
			}
		})
	}
}

// gridTables returns the grid's tables by name (positions as bits: some
// are NaN).
func gridTables(g *interestGrid) map[string]any {
	owned := map[uint8][3]uint64{}
	for o, ok := range g.ownedOK {
		if p := g.owned[o]; ok {
			owned[uint8(o)] = [3]uint64{math.Float64bits(p.X), math.Float64bits(p.Y), math.Float64bits(p.Z)}
		}
	}
	ownedBy := map[uint8][]uint32{}
	for o, slots := range g.ownedBy {
		if len(slots) > 0 {
			ownedBy[uint8(o)] = slices.Clone(slots)
		}
	}
	var global []uint32
	for wi, w := range g.global {
		for ; w != 0; w &= w - 1 {
			global = append(global, uint32(wi*64+tz64(w)))
		}
	}
	cellOdd := []bool{}
	for _, n := range g.cellOddN {
		cellOdd = append(cellOdd, n > 0)
	}
	// Each cell's slots, sorted (a full rebuild lists them in slot order,
	// moves between rebuilds do not).
	cells := [][]uint32{}
	for c := range g.cellLen {
		cells = append(cells, append([]uint32{}, slices.Sorted(slices.Values(g.cellSlots[g.cellStart[c]:g.cellStart[c]+g.cellLen[c]]))...))
	}
	// (copies, never nil: an empty world has empty tables)
	return map[string]any{"cells": cells,
		"cellOf": append([]int32{}, g.cellOf...), "cellOdd": cellOdd, "box": [4]int32{g.minX, g.minZ, g.width, g.depth},
		"owned": owned, "ownedBy": ownedBy, "global": global}
}

// checkGridTables checks what the grid's tables say of one another: each
// cell's entries are slots of that cell (cellOf) at their index (at) and
// noted position, its room holds farSlot at farXZ, every slot with a cell
// is listed once and placed, a cell counts its slots with a non-finite x
// or z, and every slot is in the cell of its cell coordinates.
func checkGridTables(t *testing.T, g *interestGrid) {
	t.Helper()
	listed := 0
	for c := range g.cellLen {
		odd := int32(0)
		for j := g.cellStart[c]; j < g.cellStart[c+1]; j++ {
			slot, p := g.cellSlots[j], g.cellXZ[j]
			if j >= g.cellStart[c]+g.cellLen[c] {
				require.True(t, slot == farSlot && p == farXZ, "cell %d's room at %d holds slot %d at %v", c, j, slot, p)
				continue
			}
			listed++
			require.Equal(t, int32(c), g.cellOf[slot], "slot %d listed in cell %d", slot, c)
			require.Equal(t, j, g.at[slot], "slot %d's index", slot)
			require.True(t, g.placed.Has(slot), "slot %d placed", slot)
			q := g.pos[slot]
			require.Equal(t, math.Float64bits(q.X)|math.Float64bits(q.Z), math.Float64bits(p.x)|math.Float64bits(p.z), "slot %d's position", slot)
			require.Equal(t, g.cellCoord(q.X), g.cx[slot])
			require.Equal(t, g.cellCoord(q.Z), g.cz[slot])
			require.Equal(t, g.index(g.cx[slot], g.cz[slot]), int32(c), "slot %d in the cell of its coordinates", slot)
			if !finite(q.X) || !finite(q.Z) {
				odd++
			}
		}
		require.Equal(t, odd, g.cellOddN[c], "cell %d's non-finite entities", c)
	}
	require.Equal(t, g.placed.Count(), listed, "each placed slot listed once")
}

// referenceGrid computes the grid's tables from the world, slot by slot.
func referenceGrid(s *Server) map[string]any {
	g, n := s.interest, len(s.slots)
	cx, cz, cellOf := make([]int32, n), make([]int32, n), make([]int32, n)
	pos := make([]components.Vec3, n)
	minX, minZ, maxX, maxZ := int32(math.MaxInt32), int32(math.MaxInt32), int32(math.MinInt32), int32(math.MinInt32)
	r := gridTables(&interestGrid{})
	owned, ownedBy := r["owned"].(map[uint8][3]uint64), r["ownedBy"].(map[uint8][]uint32)
	var global []uint32
	for slot := range n {
		si := &s.slots[slot]
		cellOf[slot] = -1
		if !si.alive {
			continue
		}
		o := si.meta.Owner
		if o != 0 {
			ownedBy[o] = append(ownedBy[o], uint32(slot))
		}
		if !s.world.Has(si.entity, s.idPos) {
			global = append(global, uint32(slot))
			continue
		}
		pos[slot] = (*components.Transform)(s.world.Get(si.entity, s.idPos)).Pos
		cx[slot], cz[slot] = g.cellCoord(pos[slot].X), g.cellCoord(pos[slot].Z)
		minX, maxX, minZ, maxZ = min(minX, cx[slot]), max(maxX, cx[slot]), min(minZ, cz[slot]), max(maxZ, cz[slot])
		cellOf[slot] = 0
		if _, ok := owned[o]; o != 0 && !ok {
			p := pos[slot]
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
	for slot := range n {
		if cellOf[slot] < 0 {
			continue
		}
		x, z := min(max(cx[slot]-minX, 0), width-1), min(max(cz[slot]-minZ, 0), depth-1)
		c := z*width + x
		cellOf[slot] = c
		lists[c] = append(lists[c], uint32(slot))
		odd[c] = odd[c] || !finite(pos[slot].X) || !finite(pos[slot].Z)
	}
	cellLists := [][]uint32{}
	for _, l := range lists {
		cellLists = append(cellLists, append([]uint32{}, l...))
	}
	return map[string]any{"cells": cellLists, "cellOf": cellOf, "cellOdd": odd,
		"box": [4]int32{minX, minZ, width, depth}, "owned": owned, "ownedBy": ownedBy, "global": global}
}

// newRemote returns a client as the handshake adds it, without a
// connection.
func newRemote(id ClientID, cfg *ServerConfig) *remote {
	c := &remote{}
	c.init(id, cfg, time.Time{})
	return c
}

// TestGridUpdateMatchesBruteForce: between full rebuilds the grid moves the
// entities that changed cells (update), through the server's own ticks:
// its tables stay consistent and every client's relevance is what checking
// every entity's position in the world gives, with entities crossing
// cells, turning non-finite and back, dormant ones moved in the world (read
// at the update, not noted by the frame), owned ones, and spawns and
// despawns now and then (a full rebuild). Updates and full rebuilds both
// happen.
func TestGridUpdateMatchesBruteForce(t *testing.T) {
	const r, n = 40.0, 3000
	is := newInterestServerWith(t, Interest{Radius: r, Every: 2}, func(c *ServerConfig) { c.Workers, c.ParallelFrame = 2, 1 })
	s, w, g := is.s, is.w, is.s.interest
	trID := ecs.ComponentID[components.Transform](w)
	repID := ecs.ComponentID[components.Replicated](w)
	rng := rand.New(rand.NewPCG(11, 12))
	var es []ecs.Entity
	spawn := func(i int) {
		e := is.at(fmt.Sprint(i), rng.Float64()*800, rng.Float64()*800, uint8(i%5), false)
		if i%13 == 0 {
			(*components.Replicated)(w.Get(e, repID)).Dormant = true
			s.touch(e) // (the server reads Replicated on structural changes)
			s.applyStructure()
		}
		es = append(es, e)
	}
	for i := range n {
		spawn(i)
	}
	foci := make([]components.Vec3, 6)
	for tick := range 200 {
		for i, e := range es {
			if !w.Alive(e) {
				continue
			}
			tr := (*components.Transform)(w.Get(e, trID))
			switch {
			case i%29 == 1 && tick%7 == 0: // non-finite now and then
				tr.Pos.X = math.NaN()
			case i%29 == 1 && tick%7 == 1:
				tr.Pos.X = rng.Float64() * 800
			case i%3 == 0: // walks, crossing cells (20 m) now and then
				tr.Pos.X += rng.Float64()*2 - 1
				tr.Pos.Z += rng.Float64()*2 - 1
			}
		}
		if tick%50 == 25 { // a despawn and a spawn: the next update is a full rebuild
			w.RemoveEntity(es[rng.IntN(len(es))])
			spawn(len(es))
		}
		s.gang.wake()
		s.commitTick()
		s.gang.rest()
		due := g.due(s.tick)
		if due {
			checkGridTables(t, g)
			for k := range foci {
				foci[k] = components.Vec3{X: rng.Float64() * 800, Z: rng.Float64() * 800}
			}
			for k, focus := range foci {
				p := newRemote(ClientID(k+1), &s.cfg)
				p.focus, p.hasFocus = focus, true
				var scratch snapshot.Bitset
				g.relevantFor(s, p, &scratch)
				for slot := range s.slots {
					si := &s.slots[slot]
					want := false
					if si.alive {
						q := (*components.Transform)(w.Get(si.entity, trID)).Pos
						dx, dz := q.X-focus.X, q.Z-focus.Z
						want = dx*dx+dz*dz <= r*r || (si.meta.Owner == uint8(k+1))
					}
					require.Equal(t, want, p.rel.relevant.Has(uint32(slot)), "tick %d focus %d slot %d", tick, k, slot)
				}
			}
		}
		s.endTick()
	}
	t.Logf("%d updates, %d full rebuilds", g.updates, g.rebuilds)
	require.Greater(t, g.updates, 50, "updates between full rebuilds (%d full)", g.rebuilds)
	require.Greater(t, g.rebuilds, 3, "full rebuilds (spawns, every fullEvery)")
}
