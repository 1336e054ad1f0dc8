package grid

import (
	"testing"

	"github.com/mlange-42/arche/ecs"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/internal/entity"
	"github.com/archenet/archenet/replication/internal/gang"
	"github.com/archenet/archenet/replication/internal/slots"
)

// The registry ids of the test's components: the one positions are read
// from, and another (an entity with only it has no position: global).
const (
	posID = 0
	tagID = 1
)

// testConfig is the grid's settings for an Interest{Radius: radius,
// CellSize: cell}, its defaults resolved as replication's gridConfig
// resolves them (hysteresis 0.15, cells radius/2, every 2nd tick).
func testConfig(radius, cell float64) Config {
	if cell <= 0 {
		cell = radius / 2
	}
	return Config{Radius: radius, Leave: radius * 1.15, CellSize: cell, Every: 2}
}

// ent is a test entity: where it is and who owns it, as plain data, and
// the slot it holds.
type ent struct {
	e      ecs.Entity
	slot   uint32
	pos    components.Vec3
	owner  uint8
	global bool // no position
	alive  bool
}

// rig is a grid fed as the server feeds it, from the test's entities: a
// slot table (slots.Table) holds them, the frame build's notes
// (BeginPositions, NotePos) and the rebuilds run as the server's tick runs
// them, and the grid's Source reads a position from the test's data. With
// two workers a helper is started and the rebuild is chunked, as on a
// server with Workers 2 and ParallelFrame 1.
type rig struct {
	g    *Grid
	tab  *slots.Table
	ents []*ent
	of   map[ecs.Entity]*ent
	// handles only hands out the entity handles the slot table keys on:
	// the entities' state is the ents'
	handles ecs.World
	gang    gang.Gang
	chunked bool
	tick    uint32
	src     Source
	note    func(i int) // the frame build's chunk i (frame), made once
	noteN   int         // frame's chunks
	notePos bool        // frame notes positions
}

// newRig returns an empty rig of the grid cfg on workers goroutines.
func newRig(t testing.TB, cfg Config, workers int) *rig {
	r := &rig{g: New(cfg), tab: slots.NewTable(), of: map[ecs.Entity]*ent{}, handles: ecs.NewWorld(), chunked: workers > 1, tick: 1}
	r.gang.Start(workers - 1)
	t.Cleanup(r.gang.Stop)
	r.tab.Begin(r.tick)
	r.note = r.noteChunk
	return r
}

// spawn adds an entity at x, z owned by owner (0: the server); without a
// position if global.
func (r *rig) spawn(x, z float64, owner uint8, global bool) *ent {
	e := &ent{e: r.handles.NewEntity(), pos: components.Vec3{X: x, Z: z}, owner: owner, global: global, alive: true}
	e.slot = r.tab.Alloc(e.e)
	si := &r.tab.Infos[e.slot]
	set := uint64(1) << posID
	if global {
		set = 1 << tagID
	}
	si.Meta = entity.Meta{Gen: si.Gen, Owner: owner, Set: set}
	r.ents = append(r.ents, e)
	r.of[e.e] = e
	return e
}

// despawn frees e's slot.
func (r *rig) despawn(e *ent) {
	r.tab.Free(e.slot)
	e.alive = false
	delete(r.of, e.e)
}

// setDormant makes e dormant: the frame build keeps its last state and
// notes no position for it once it was put (the rebuild reads it).
func (r *rig) setDormant(e *ent) { r.tab.Infos[e.slot].Rep.Dormant = true }

// source is what the grid's rebuild reads: the slot table, and the
// test's data for the positions not noted.
func (r *rig) source() *Source {
	r.src = Source{Slots: r.tab.Infos, PosID: posID, Read: r.read, Gang: &r.gang, Chunked: r.chunked}
	return &r.src
}

// read returns e's position (Source.Read).
func (r *rig) read(e ecs.Entity) components.Vec3 { return r.of[e].pos }

// frame is the server's frame build, as the grid sees it: every live
// slot is put (a dormant one only while dirty), and its position noted
// when notePos (relevance is due). With a chunked rig, the workers take
// chunks of 64-slot words, as the server's putShares.
func (r *rig) frame(notePos bool) {
	n := len(r.tab.Infos)
	if notePos {
		r.g.BeginPositions(n)
	}
	r.notePos = notePos
	r.noteN = 1
	if r.chunked {
		r.noteN = max(1, min(8, (n+63)/64))
	}
	r.gang.Wake()
	r.gang.Each(r.noteN, r.note)
	r.gang.Rest()
}

// noteChunk is frame's chunk i.
func (r *rig) noteChunk(i int) {
	n := len(r.tab.Infos)
	words := (n + 63) / 64
	lo, hi := min(n, i*words/r.noteN*64), min(n, (i+1)*words/r.noteN*64)
	for slot := lo; slot < hi; slot++ {
		si := &r.tab.Infos[slot]
		if !si.Alive || (si.Rep.Dormant && !si.Dirty) {
			continue
		}
		si.Dirty = false
		if r.notePos && si.Meta.Set&(1<<posID) != 0 {
			r.g.NotePos(uint32(slot), r.read(si.Entity))
		}
	}
}

// relaid tells the grid of the slots allocated, freed or changed since the
// last tick (as the server's applyStructure does).
func (r *rig) relaid() {
	if len(r.tab.Relayout) > 0 {
		r.g.Relaid()
	}
}

// rebuild runs the grid's rebuild on the workers (without a frame before
// it: the positions are read).
func (r *rig) rebuild() {
	r.gang.Wake()
	r.g.Rebuild(r.source())
	r.gang.Rest()
}

// rebuildNow runs a tick that rebuilds the grid whether or not relevance
// is due: the changes since the last, the frame's notes (if frame), the
// rebuild.
func (r *rig) rebuildNow(frame bool) {
	r.relaid()
	if frame {
		r.frame(true)
	}
	r.rebuild()
	r.endTick()
}

// step runs a net tick up to the clients' relevance as the server's
// commitTick does: the changes, the frame (noting positions when relevance
// is due) and, when due, the rebuild. It reports whether it was due; end it
// with endTick.
func (r *rig) step() bool {
	due := r.g.Due(r.tick)
	r.relaid()
	r.frame(due)
	if due {
		r.rebuild()
	}
	return due
}

// endTick ends the tick and begins the next (layout changes made between
// ticks are the next one's).
func (r *rig) endTick() {
	r.tab.EndTick()
	r.tick++
	r.tab.Begin(r.tick)
}

// relevantFor returns client id's relevance from the grid (as a worker
// computes it), with focus (when ok) and the relevance it had before.
func (r *rig) relevantFor(id uint8, focus components.Vec3, ok bool, before entity.Bitset) entity.Bitset {
	rel := Relevance{Relevant: before}
	var scratch entity.Bitset
	r.g.RelevantFor(id, focus, ok, r.tab.Alive, r.tab.Infos, &rel, &scratch)
	return rel.Relevant
}

// namesIn returns the names of es in set.
func namesIn(set entity.Bitset, es map[string]*ent) map[string]bool {
	out := map[string]bool{}
	for name, e := range es {
		if e.alive && set.Has(e.slot) {
			out[name] = true
		}
	}
	return out
}
