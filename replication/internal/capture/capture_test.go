package capture

import (
	"math/rand/v2"
	"testing"
	"unsafe"

	arche "github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/internal/entity"
	"github.com/archenet/archenet/replication/internal/gang"
	"github.com/archenet/archenet/replication/internal/grid"
	"github.com/archenet/archenet/replication/internal/slots"
	"github.com/archenet/archenet/replication/internal/store"
	"github.com/archenet/archenet/replication/schema"
)

// tag is a second replicated component (registry id 1; Transform is 0).
type tag struct {
	Team uint8 `net:"range=0:3"`
}

const (
	tfBit  = 1 << 0 // Transform in a Meta's Set
	tagBit = 1 << 1 // tag
)

// rig is a world captured as the server captures it, tick by tick: Begin
// of the slot table, Apply, Frame, then the tick's end.
type rig struct {
	t    testing.TB
	w    *arche.World
	reg  *schema.Registry
	ids  IDs
	tab  *slots.Table
	ring *store.Ring
	grid *grid.Grid
	gang *gang.Gang
	c    *Capture
	tick uint32
}

// newRig returns a rig whose frames of at least parallel entities are built
// on helpers+1 goroutines (parallel 0: never), with the grid g (nil: none).
func newRig(t testing.TB, parallel, helpers int, g *grid.Grid) *rig {
	w := arche.NewWorld()
	reg := schema.NewRegistry()
	schema.MustRegister[components.Transform](reg)
	schema.MustRegister[tag](reg)
	r := &rig{t: t, w: &w, reg: reg, tab: slots.NewTable(), ring: store.New(reg, 8), grid: g, gang: &gang.Gang{}}
	r.ids = IDs{Comps: []arche.ID{arche.ComponentID[components.Transform](&w), arche.ComponentID[tag](&w)},
		Rep: arche.ComponentID[components.Replicated](&w), Owner: arche.ComponentID[components.Owner](&w), PosID: -1}
	if g != nil {
		r.ids.PosID = 0
		r.ids.Pos = func(p unsafe.Pointer) components.Vec3 { return (*components.Transform)(p).Pos }
	}
	r.gang.Start(helpers)
	t.Cleanup(r.gang.Stop)
	r.c = New(r.w, r.ids, r.tab, r.ring, g, r.gang, parallel)
	r.w.SetListener(r.c.Listener())
	return r
}

// spawn creates an entity with rep (nil: not replicated), a Transform at
// x (if hasTf), a tag (if team ≥ 0) and an Owner (if owner > 0).
func (r *rig) spawn(rep *components.Replicated, hasTf bool, x float64, team int, owner uint8) arche.Entity {
	var ids []arche.ID
	if rep != nil {
		ids = append(ids, r.ids.Rep)
	}
	if hasTf {
		ids = append(ids, r.ids.Comps[0])
	}
	if team >= 0 {
		ids = append(ids, r.ids.Comps[1])
	}
	if owner > 0 {
		ids = append(ids, r.ids.Owner)
	}
	e := r.w.NewEntity(ids...)
	if rep != nil {
		*(*components.Replicated)(r.w.Get(e, r.ids.Rep)) = *rep
	}
	if hasTf {
		*r.tf(e) = components.Transform{Pos: components.Vec3{X: x}, Rot: components.QuatIdentity()}
	}
	if team >= 0 {
		(*tag)(r.w.Get(e, r.ids.Comps[1])).Team = uint8(team)
	}
	if owner > 0 {
		(*components.Owner)(r.w.Get(e, r.ids.Owner)).Client = owner
	}
	return e
}

// tf returns e's Transform.
func (r *rig) tf(e arche.Entity) *components.Transform {
	return (*components.Transform)(r.w.Get(e, r.ids.Comps[0]))
}

// apply starts the next tick and applies the structure changes since the
// last (the slot table's Relayout then holds the tick's).
func (r *rig) apply() {
	r.tick++
	r.tab.Begin(r.tick)
	r.c.Apply()
}

// frame builds the tick's frame (noting positions if notePos) and returns
// it.
func (r *rig) frame(notePos bool) *store.Frame {
	r.c.Frame(r.tick, notePos)
	f := r.ring.Current()
	require.Equal(r.t, r.tick, f.Tick)
	return f
}

// end ends the tick, as the server's endTick.
func (r *rig) end() {
	r.ring.EndTick()
	r.tab.EndTick()
	r.tab.Keys.ClearEnded()
}

// step is a whole tick.
func (r *rig) step() *store.Frame {
	r.apply()
	f := r.frame(false)
	r.end()
	return f
}

// slot returns e's slot, which it must have.
func (r *rig) slot(e arche.Entity) uint32 {
	r.t.Helper()
	s, ok := r.tab.Of(e)
	require.True(r.t, ok, "%v has a slot", e)
	return s
}

// lanes returns e's components as the ring quantizes them, in registry
// order: what its frame entry must hold.
func (r *rig) lanes(e arche.Entity) []uint64 {
	var out []uint64
	for i, p := range r.reg.Plans() {
		if !r.w.Has(e, r.ids.Comps[i]) {
			continue
		}
		l := make([]uint64, p.NumLanes())
		p.QuantizeBytes(unsafe.Slice((*byte)(r.w.Get(e, r.ids.Comps[i])), p.Size), l)
		out = append(out, l...)
	}
	return out
}

// entry returns slot's Meta and lanes in f.
func entry(t testing.TB, f *store.Frame, slot uint32) (entity.Meta, []uint64) {
	i := f.Lookup(slot)
	require.GreaterOrEqual(t, i, 0, "slot %d in the frame of tick %d", slot, f.Tick)
	return f.Metas[i], f.EntityLanes(i)
}

// Apply gives each new entity with Replicated and at least one registered
// component a slot, in the order they were created, with its Meta (its
// component set, its Owner's client) and its Replicated settings and
// weight; the others get none. Each new slot is listed in Relayout once,
// as never alive.
func TestApplySpawns(t *testing.T) {
	r := newRig(t, 0, 0, nil)
	a := r.spawn(&components.Replicated{}, true, 1, -1, 2)
	b := r.spawn(&components.Replicated{Priority: 3, SendEvery: 2}, true, 2, 1, 0)
	plain := r.spawn(nil, true, 3, 1, 0)                       // not replicated
	bare := r.spawn(&components.Replicated{}, false, 0, -1, 4) // no registered component
	c := r.spawn(&components.Replicated{Dormant: true}, false, 0, 3, 0)
	r.apply()

	require.Equal(t, uint32(0), r.slot(a))
	require.Equal(t, uint32(1), r.slot(b))
	require.Equal(t, uint32(2), r.slot(c))
	for _, e := range []arche.Entity{plain, bare} {
		_, ok := r.tab.Of(e)
		require.False(t, ok)
	}
	require.Len(t, r.tab.Infos, 3)
	require.Equal(t, entity.Meta{Owner: 2, Set: tfBit}, r.tab.Infos[0].Meta)
	require.Equal(t, entity.Meta{Set: tfBit | tagBit}, r.tab.Infos[1].Meta)
	require.Equal(t, entity.Meta{Set: tagBit}, r.tab.Infos[2].Meta)
	require.Equal(t, components.Replicated{Priority: 3, SendEvery: 2}, r.tab.Infos[1].Rep)
	require.True(t, r.tab.Infos[2].Rep.Dormant)
	require.Equal(t, []float32{1, 3, 1}, r.tab.Weights, "priority 0 weighs 1")
	require.Equal(t, []slots.Relaid{{Slot: 0}, {Slot: 1}, {Slot: 2}}, r.tab.Relayout)
}

// Apply follows each kind of structure change of a replicated entity into
// the slot table: a component added or removed changes its Meta (the slot
// and generation stay); an Owner added sets its owner; losing Replicated,
// or every registered component, or being removed frees its slot; a new
// entity then reuses a freed slot as its next generation. Each slot a tick
// changes is listed in Relayout once, with its Meta at the last frame; an
// event that changes nothing replicated lists nothing.
func TestApplyStructureChanges(t *testing.T) {
	r := newRig(t, 0, 0, nil)
	a := r.spawn(&components.Replicated{}, true, 1, -1, 0)
	b := r.spawn(&components.Replicated{}, true, 2, 0, 0)
	c := r.spawn(&components.Replicated{}, true, 3, -1, 0)
	r.step()
	sa, sb, sc := r.slot(a), r.slot(b), r.slot(c)
	ma, mb := r.tab.Infos[sa].Meta, r.tab.Infos[sb].Meta

	// Components added and removed (a twice in one tick); an Owner added.
	r.w.Add(a, r.ids.Comps[1])
	r.w.Add(a, r.ids.Owner)
	(*components.Owner)(r.w.Get(a, r.ids.Owner)).Client = 9
	r.w.Remove(b, r.ids.Comps[0])
	r.w.Add(c, r.ids.Owner) // (client 0: nothing replicated changes)
	r.apply()
	require.Equal(t, entity.Meta{Owner: 9, Set: tfBit | tagBit}, r.tab.Infos[sa].Meta)
	require.Equal(t, entity.Meta{Set: tagBit}, r.tab.Infos[sb].Meta)
	require.Equal(t, sa, r.slot(a))
	require.Zero(t, r.tab.Infos[sa].Gen)
	require.Equal(t, []slots.Relaid{{Slot: sa, Was: ma, WasAlive: true}, {Slot: sb, Was: mb, WasAlive: true}}, r.tab.Relayout)
	r.frame(false)
	r.end()

	// Replicated removed from a, b's last registered component removed,
	// c removed from the world: all three slots freed.
	mb = r.tab.Infos[sb].Meta
	r.w.Remove(a, r.ids.Rep)
	r.w.Remove(b, r.ids.Comps[1])
	r.w.RemoveEntity(c)
	r.apply()
	for _, e := range []arche.Entity{a, b, c} {
		_, ok := r.tab.Of(e)
		require.False(t, ok)
	}
	require.Zero(t, r.tab.Alive.Count())
	require.ElementsMatch(t, []uint32{sa, sb, sc}, slotsOf(r.tab.Relayout))
	require.Equal(t, slots.Relaid{Slot: sb, Was: mb, WasAlive: true}, r.tab.Relayout[1])
	f := r.frame(false)
	require.Zero(t, f.Len(), "freed slots leave the frame")
	r.end()

	// A new entity reuses a freed slot as a new generation; so does a
	// once-replicated entity that is replicated again.
	d := r.spawn(&components.Replicated{}, true, 4, -1, 0)
	r.w.Add(a, r.ids.Rep)
	r.apply()
	require.Len(t, r.tab.Infos, 3, "no new slot while freed ones are left")
	for _, e := range []arche.Entity{d, a} {
		si := r.tab.Infos[r.slot(e)]
		require.Equal(t, uint32(1), si.Gen)
		require.Equal(t, si.Gen, si.Meta.Gen, "the Meta names the new generation")
	}
	r.frame(false)
	r.end()

	// An entity created and removed between two ticks never gets a slot.
	e := r.spawn(&components.Replicated{}, true, 5, -1, 0)
	r.w.RemoveEntity(e)
	r.apply()
	_, ok := r.tab.Of(e)
	require.False(t, ok)
	require.Empty(t, r.tab.Relayout)
	require.Len(t, r.tab.Infos, 3)
}

func slotsOf(rs []slots.Relaid) []uint32 {
	var out []uint32
	for _, x := range rs {
		out = append(out, x.Slot)
	}
	return out
}

// Apply hands the predicted-spawn keys given this tick to the slots it
// allocated; a keyed entity removed before Apply ends its key (its owner is
// told).
func TestApplyTakesKeys(t *testing.T) {
	r := newRig(t, 0, 0, nil)
	kept := r.spawn(&components.Replicated{}, true, 1, -1, 3)
	lost := r.spawn(&components.Replicated{}, true, 2, -1, 3)
	r.tab.Keys.Add(kept, slots.Key{Owner: 3, Key: 100})
	r.tab.Keys.Add(lost, slots.Key{Owner: 3, Key: 101})
	r.w.RemoveEntity(lost)
	r.apply()
	si := r.tab.Infos[r.slot(kept)]
	require.True(t, si.Keyed)
	require.Equal(t, slots.Key{Owner: 3, Key: 100}, si.Key)
	require.Equal(t, []uint32{101}, r.tab.Keys.Ended(3))
	require.Equal(t, 1, r.tab.Keys.Count(3))
}

// Frame puts every live entity into the tick's frame in slot order, with
// its Meta and its components quantized, and follows their values tick by
// tick.
func TestFrameHoldsTheWorld(t *testing.T) {
	r := newRig(t, 0, 0, nil)
	a := r.spawn(&components.Replicated{}, true, 1.5, 2, 1)
	b := r.spawn(&components.Replicated{}, false, 0, 1, 0)
	r.spawn(nil, true, 7, -1, 0)
	for tick := 1; tick <= 3; tick++ {
		r.tf(a).Pos.Z = float64(tick) * 0.25
		f := r.step()
		require.Equal(t, []uint32{0, 1}, f.Slots)
		for _, e := range []arche.Entity{a, b} {
			m, lanes := entry(t, f, r.slot(e))
			require.Equal(t, r.tab.Infos[r.slot(e)].Meta, m)
			require.Equal(t, r.lanes(e), lanes, "tick %d", tick)
		}
		require.Equal(t, uint32(tick), r.ring.ChangedAt(r.slot(a)), "a moves every tick")
		require.Equal(t, uint32(1), r.ring.ChangedAt(r.slot(b)), "b only spawned")
		require.False(t, r.tab.Infos[0].Dirty, "the frame build leaves the slot table clean")
	}
}

// A dormant entity is read when it spawns and then only when marked dirty
// (its frame entry keeps its last state meanwhile); an entity with
// SendEvery n is read on every n-th tick only, staggered by its slot.
func TestFrameDormantAndSendEvery(t *testing.T) {
	r := newRig(t, 0, 0, nil)
	every := r.spawn(&components.Replicated{SendEvery: 3}, true, 0, -1, 0)
	dormant := r.spawn(&components.Replicated{Dormant: true}, true, 0, -1, 0)
	r.step()
	sd, se := r.slot(dormant), r.slot(every)
	first := r.lanes(dormant)
	for tick := uint32(2); tick <= 9; tick++ {
		r.tf(dormant).Pos.X = float64(tick)
		r.tf(every).Pos.X = float64(tick)
		f := r.step()
		_, got := entry(t, f, sd)
		require.Equal(t, first, got, "dormant: kept (tick %d)", tick)
		_, got = entry(t, f, se)
		if (tick+se)%3 == 0 {
			require.Equal(t, r.lanes(every), got, "SendEvery: read (tick %d)", tick)
		} else {
			require.NotEqual(t, r.lanes(every), got, "SendEvery: kept (tick %d)", tick)
		}
	}
	r.tab.Infos[sd].Dirty = true // (Server.MarkDirty)
	f := r.step()
	_, got := entry(t, f, sd)
	require.Equal(t, r.lanes(dormant), got, "read once marked dirty")
	require.False(t, r.tab.Infos[sd].Dirty)
}

// With an interest grid, Apply tells it when a slot's layout changed (its
// next rebuild is a full one; without one it updates), and a frame built
// with notePos notes the position of every entity it reads, so the
// rebuild need not read them from the world and relevance follows them.
// On the sequential frame build and on the workers'.
func TestFrameFeedsTheGrid(t *testing.T) {
	for _, parallel := range []int{0, 1} {
		g := grid.New(grid.Config{Radius: 10, Leave: 11.5, CellSize: 5, Every: 1})
		r := newRig(t, parallel, 1, g)
		near := r.spawn(&components.Replicated{}, true, 0, -1, 0)
		far := r.spawn(&components.Replicated{}, true, 100, -1, 0)
		r.spawn(&components.Replicated{}, false, 0, 2, 0) // no position: relevant everywhere
		var reads int
		src := grid.Source{PosID: 0, Gang: r.gang, Read: func(arche.Entity) components.Vec3 { reads++; return components.Vec3{} }}
		var rel grid.Relevance
		var scratch entity.Bitset
		rebuild := func() []uint32 {
			src.Slots = r.tab.Infos
			g.Rebuild(&src)
			g.RelevantFor(1, components.Vec3{}, true, r.tab.Alive, r.tab.Infos, &rel, &scratch)
			var out []uint32
			for slot := range uint32(len(r.tab.Infos)) {
				if rel.Relevant.Has(slot) {
					out = append(out, slot)
				}
			}
			return out
		}

		r.apply()
		r.frame(true)
		require.Equal(t, []uint32{0, 2}, rebuild(), "parallel %d", parallel)
		r.end()
		require.Zero(t, reads, "every position was noted")
		_, full := g.Counts()
		require.Equal(t, 1, full)

		// far moves near, near moves away: no layout change, an update.
		r.tf(far).Pos.X = 3
		r.tf(near).Pos.X = 60
		r.apply()
		f := r.frame(true)
		require.Equal(t, []uint32{1, 2}, rebuild(), "parallel %d", parallel)
		r.end()
		updates, full := g.Counts()
		require.Equal(t, 1, updates, "parallel %d", parallel)
		require.Equal(t, 1, full)
		if parallel > 0 {
			require.Equal(t, f.Tick, r.c.frame.tick, "built on the workers")
		}

		// near loses its position (a layout change, the same slots): the
		// next rebuild is a full one, and near is relevant everywhere.
		r.w.Remove(near, r.ids.Comps[0])
		r.w.Add(near, r.ids.Comps[1])
		r.apply()
		r.frame(true)
		require.Equal(t, []uint32{0, 1, 2}, rebuild(), "parallel %d", parallel)
		r.end()
		_, full = g.Counts()
		require.Equal(t, 2, full, "parallel %d", parallel)
		require.Zero(t, reads)
	}
}

// The workers build a frame only when it holds the previous frame's
// entities with the same Meta: not after a component change, nor after a
// despawn and a spawn that leave as many entities (the slot reused as a
// new generation); the frame is right either way.
func TestWorkersOnlyForTheSameEntities(t *testing.T) {
	r := newRig(t, 1, 1, nil)
	var es []arche.Entity
	for i := range 4 {
		es = append(es, r.spawn(&components.Replicated{}, true, float64(i), -1, 0))
	}
	r.step()
	onWorkers := func() bool { return r.c.frame.tick == r.tick }
	check := func(f *store.Frame) {
		t.Helper()
		require.Equal(t, r.tab.Alive.Count(), f.Len())
		for _, e := range es {
			if !r.w.Alive(e) {
				continue
			}
			m, lanes := entry(t, f, r.slot(e))
			require.Equal(t, r.tab.Infos[r.slot(e)].Meta, m)
			require.Equal(t, r.lanes(e), lanes)
		}
	}

	r.tf(es[1]).Pos.X = 10
	check(r.step())
	require.True(t, onWorkers(), "nothing but values changed")

	r.w.Add(es[2], r.ids.Comps[1])
	check(r.step())
	require.False(t, onWorkers(), "a component added")

	r.w.RemoveEntity(es[3])
	es = append(es, r.spawn(&components.Replicated{}, true, 9, -1, 0))
	check(r.step())
	require.False(t, onWorkers(), "a slot reused")
	require.Equal(t, uint32(1), r.tab.Infos[r.slot(es[4])].Gen)

	check(r.step())
	require.True(t, onWorkers())
}

// The frame built on the workers — possible when no entity spawned,
// despawned or changed its components since the last frame — is, tick for
// tick, the one the sequential build makes of the same world: a seeded run
// of moves, dormant and staggered entities, spawns, despawns and component
// changes, with quiet stretches, on a world large enough for several
// chunks (cut between 64-slot words).
func TestParallelFrameMatchesSequential(t *testing.T) {
	seq, par := newRig(t, 0, 0, nil), newRig(t, 1, 1, nil)
	rigs := []*rig{seq, par}
	ents := make([][]arche.Entity, 2) // per rig, the same entities
	var staggered []bool              // per entity: SendEvery > 1
	rng := rand.New(rand.NewPCG(7, 8))
	spawn := func(x float64, rep components.Replicated, team int) {
		for i, r := range rigs {
			ents[i] = append(ents[i], r.spawn(&rep, true, x, team, 0))
		}
		staggered = append(staggered, rep.SendEvery > 1)
	}
	for i := range 1150 {
		rep := components.Replicated{}
		switch i % 10 {
		case 3:
			rep.Dormant = true
		case 7:
			rep.SendEvery = 4
		}
		spawn(float64(i), rep, -1)
	}
	seq.step()
	par.step()
	onWorkers, chunked := 0, 0
	for tick := range 36 {
		quiet := tick%12 >= 6 // (no structure change: the workers may build)
		for k := range ents[0] {
			r := rng.IntN(1000)
			dx := rng.Float64()
			for i, rg := range rigs {
				e := ents[i][k]
				if !rg.w.Alive(e) {
					continue
				}
				switch {
				case r < 300:
					rg.tf(e).Pos.X += dx
				case r < 303 && !quiet:
					rg.w.RemoveEntity(e)
				case r < 306 && !quiet:
					if rg.w.Has(e, rg.ids.Comps[1]) {
						rg.w.Remove(e, rg.ids.Comps[1])
					} else {
						rg.w.Add(e, rg.ids.Comps[1])
					}
				case r < 310:
					rg.tab.Infos[rg.slot(e)].Dirty = true // (Server.MarkDirty)
				}
			}
		}
		if !quiet && tick%3 == 0 {
			spawn(rng.Float64()*100, components.Replicated{}, 1)
		}
		fs := make([]*store.Frame, 2)
		for i, rg := range rigs {
			fs[i] = rg.step()
		}
		require.Equal(t, fs[0].Slots, fs[1].Slots, "tick %d", tick)
		require.Equal(t, fs[0].Metas, fs[1].Metas, "tick %d", tick)
		require.Equal(t, fs[0].Offs, fs[1].Offs, "tick %d", tick)
		require.Equal(t, fs[0].Lanes, fs[1].Lanes, "tick %d", tick)
		require.Equal(t, seq.ring.ChangedAts(), par.ring.ChangedAts(), "tick %d", tick)
		if par.c.frame.tick == par.tick {
			onWorkers++
			n := fs[1].Len()
			k := min(max(n/frameChunk, 1), maxFrameChunks)
			if k > 1 {
				chunked++
			}
			b := par.c.frame.bounds[:k+1]
			require.Equal(t, 0, b[0])
			require.Equal(t, n, b[k])
			for _, j := range b[1:k] {
				if j > 0 && j < n {
					require.NotEqual(t, fs[1].Slots[j-1]>>6, fs[1].Slots[j]>>6, "a chunk ends between 64-slot words (tick %d)", tick)
				}
			}
		}
		// Every entity read is clean again (a staggered one marked dirty
		// between its sends stays so until it is read).
		for i := range rigs {
			for k, e := range ents[i] {
				if !staggered[k] && rigs[i].w.Alive(e) && rigs[i].tab.Infos[rigs[i].slot(e)].Dirty {
					t.Fatalf("rig %d entity %d still dirty after the frame", i, k)
				}
			}
		}
	}
	require.Greater(t, onWorkers, 12, "the workers built the quiet ticks' frames")
	require.Equal(t, onWorkers, chunked, "in several chunks")
	require.Zero(t, seq.c.frame.tick, "the sequential rig never did")
}
