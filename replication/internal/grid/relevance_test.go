package grid

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/internal/entity"
)

// Someone far beyond the grid's edge cells sees the entities around it.
func TestInterestBeyondTheGrid(t *testing.T) {
	r := newRig(t, testConfig(10, 0), 1)
	es := map[string]*ent{
		"origin":        r.spawn(0, 0, 0, false),
		"me":            r.spawn(1e7, 0, 1, false),
		"neighbour":     r.spawn(1e7+5, 3, 0, false),
		"far-neighbour": r.spawn(1e7+50, 0, 0, false),
	}
	r.rebuildNow(true)
	got := namesIn(r.relevantFor(1, components.Vec3{}, false, nil), es) // (focus: what it owns)
	require.Equal(t, map[string]bool{"me": true, "neighbour": true}, got)
}

// The grid's whole-cell shortcuts give exactly what checking every entity
// gives: random entities (many on cell borders, some right at either
// radius, a few at NaN), random foci and previous relevance, several cell
// sizes; and with a filter, what checking every entity the filter accepts
// gives.
func TestInterestCellsMatchBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, cell := range []float64{0, 7, 25, 60} {
		const r = 50.0
		rg := newRig(t, testConfig(r, cell), 1)
		es := map[string]*ent{}
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
			es[name] = rg.spawn(x, z, 0, false)
		}
		leave := rg.g.leave
		for round := range 40 {
			focus := components.Vec3{X: rng.Float64()*500 - 250, Z: rng.Float64()*500 - 250}
			if round%5 == 0 { // exactly a radius from an entity
				p := es[fmt.Sprint("e", rng.IntN(600))].pos
				focus = components.Vec3{X: p.X + r, Z: p.Z}
			}
			// Entities right at either radius, all around the focus.
			for k := range 24 {
				d := []float64{r, leave}[k%2] * (1 + float64(k%3-1)*1e-12)
				a := rng.Float64() * 2 * math.Pi
				name := fmt.Sprint("r", round, "-", k)
				es[name] = rg.spawn(focus.X+d*math.Cos(a), focus.Z+d*math.Sin(a), 0, false)
			}
			rg.rebuildNow(true)
			var prev entity.Bitset
			before := map[string]bool{}
			for name, e := range es {
				if rng.IntN(2) == 0 {
					before[name] = true
					prev.Set(e.slot)
				}
			}
			want := map[string]bool{}
			for name, e := range es {
				dx, dz := e.pos.X-focus.X, e.pos.Z-focus.Z
				d2 := dx*dx + dz*dz
				if d2 <= r*r || (d2 <= leave*leave && before[name]) {
					want[name] = true
				}
			}
			require.Equal(t, want, namesIn(rg.relevantFor(1, focus, true, append(entity.Bitset{}, prev...)), es), "cell %v, round %d", cell, round)
			// With a filter (odd entity ids): cells taken whole check it too.
			rg.g.filter = func(_ uint8, e ecs.Entity) bool { return e.ID()%2 == 1 }
			for name, e := range es {
				if e.e.ID()%2 == 0 {
					delete(want, name)
				}
			}
			require.Equal(t, want, namesIn(rg.relevantFor(1, focus, true, prev), es), "filtered: cell %v, round %d", cell, round)
			rg.g.filter = nil
		}
	}
}

// TestGridUpdateMatchesBruteForce: between full rebuilds the grid moves the
// entities that changed cells (update), through ticks as the server runs
// them (the frame build notes positions on two workers, relevance every
// second tick): its tables stay consistent and every client's relevance is
// what checking every entity's position gives, with entities crossing
// cells, turning non-finite and back, dormant ones moved (read at the
// update, not noted by the frame), owned ones, and spawns and despawns now
// and then (a full rebuild). Updates and full rebuilds both happen.
func TestGridUpdateMatchesBruteForce(t *testing.T) {
	const r, n = 40.0, 3000
	cfg := testConfig(r, 0)
	cfg.Every = 2
	rg := newRig(t, cfg, 2)
	g := rg.g
	rng := rand.New(rand.NewPCG(11, 12))
	spawn := func(i int) {
		e := rg.spawn(rng.Float64()*800, rng.Float64()*800, uint8(i%5), false)
		if i%13 == 0 {
			rg.setDormant(e)
		}
	}
	for i := range n {
		spawn(i)
	}
	foci := make([]components.Vec3, 6)
	for tick := range 200 {
		for i, e := range rg.ents {
			if !e.alive {
				continue
			}
			p := &e.pos
			switch {
			case i%29 == 1 && tick%7 == 0: // non-finite now and then
				p.X = math.NaN()
			case i%29 == 1 && tick%7 == 1:
				p.X = rng.Float64() * 800
			case i%3 == 0: // walks, crossing cells (20 m) now and then
				p.X += rng.Float64()*2 - 1
				p.Z += rng.Float64()*2 - 1
			}
		}
		if tick%50 == 25 { // a despawn and a spawn: the next update is a full rebuild
			if e := rg.ents[rng.IntN(len(rg.ents))]; e.alive {
				rg.despawn(e)
			}
			spawn(len(rg.ents))
		}
		if rg.step() {
			checkGridTables(t, g)
			for k := range foci {
				foci[k] = components.Vec3{X: rng.Float64() * 800, Z: rng.Float64() * 800}
			}
			bySlot := make([]*ent, len(rg.tab.Infos))
			for _, e := range rg.ents {
				if e.alive {
					bySlot[e.slot] = e
				}
			}
			for k, focus := range foci {
				got := rg.relevantFor(uint8(k+1), focus, true, nil)
				for slot, e := range bySlot {
					want := false
					if e != nil {
						dx, dz := e.pos.X-focus.X, e.pos.Z-focus.Z
						want = dx*dx+dz*dz <= r*r || e.owner == uint8(k+1)
					}
					if got.Has(uint32(slot)) != want { // (not require: it runs a million times)
						t.Fatalf("tick %d focus %d slot %d: relevant %v, want %v", tick, k, slot, !want, want)
					}
				}
			}
		}
		rg.endTick()
	}
	updates, rebuilds := g.Counts()
	t.Logf("%d updates, %d full rebuilds", updates, rebuilds)
	require.Greater(t, updates, 50, "updates between full rebuilds (%d full)", rebuilds)
	require.Greater(t, rebuilds, 3, "full rebuilds (spawns, every fullEvery)")
}
