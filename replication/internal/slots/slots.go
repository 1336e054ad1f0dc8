// Package slots is the server's slot table: which arche entity each net
// slot holds, its generation (bumped when a slot is reused, so a stale
// reference is never taken for the new entity), its identity and layout as
// clients are told it, and the slots whose layout changed this tick.
package slots

import (
	arche "github.com/mlange-42/arche/ecs"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/internal/entity"
)

// Info is the record of one net slot.
type Info struct {
	Entity arche.Entity
	Gen    uint32
	Meta   entity.Meta
	Alive  bool
	Dirty  bool // MarkDirty since the last frame
	Rep    components.Replicated
	Keyed  bool // a predicted spawn of its owner (Server.PredictedSpawn)
	Key    Key  // its owner and key
	// Target is the target of its relation component as clients are told
	// it (HasTarget false: none, or no relation).
	Target    components.NetID
	HasTarget bool
	noted     uint32
}

// Key is a predicted spawn's key with the client that owns it.
type Key struct {
	Owner uint8
	Key   uint32
}

// Relaid is a slot whose generation, owner or component set changed this
// tick (a spawn, a despawn, a reuse, a component added or removed), with
// what it was at the last frame: the Meta a client that holds it was sent.
// Each slot is listed at most once per tick.
type Relaid struct {
	Slot     uint32
	Was      entity.Meta
	WasAlive bool
	// WasTarget and WasHasTarget: its relation target then.
	WasTarget    components.NetID
	WasHasTarget bool
}

// Table is the slot table. Infos is indexed by slot; Alive and Fresh are
// sets of slots; Relayout lists this tick's layout changes (NoteLayout);
// Weights is each slot's priority weight.
type Table struct {
	Infos    []Info
	Alive    entity.Bitset
	Fresh    entity.Bitset // slots allocated since the caller last reset it
	Relayout []Relaid
	Weights  []float32
	Keys     Keys // predicted spawns' keys
	free     []uint32
	byEntity map[arche.Entity]uint32
	tick     uint32
}

// NewTable returns an empty table.
func NewTable() *Table { return &Table{byEntity: map[arche.Entity]uint32{}} }

// Begin starts tick: layout changes are noted for it.
func (t *Table) Begin(tick uint32) { t.tick = tick }

// EndTick forgets the tick's layout changes.
func (t *Table) EndTick() { t.Relayout = t.Relayout[:0] }

// Of returns the slot of e.
func (t *Table) Of(e arche.Entity) (uint32, bool) {
	slot, ok := t.byEntity[e]
	return slot, ok
}

// Before returns what slot was at the last frame, before this tick's
// layout changes: the generation a client that holds it holds, and whether
// it was alive.
func (t *Table) Before(slot uint32) (gen uint32, alive bool) {
	si := &t.Infos[slot]
	if si.noted == t.tick {
		for i := range t.Relayout {
			if r := &t.Relayout[i]; r.Slot == slot {
				return r.Was.Gen, r.WasAlive
			}
		}
	}
	return si.Meta.Gen, si.Alive
}

// NoteLayout lists slot in Relayout with its state before this tick's
// first change to it; call it before changing the slot.
func (t *Table) NoteLayout(slot uint32) {
	si := &t.Infos[slot]
	if si.noted == t.tick {
		return
	}
	si.noted = t.tick
	t.Relayout = append(t.Relayout, Relaid{Slot: slot, Was: si.Meta, WasAlive: si.Alive, WasTarget: si.Target, WasHasTarget: si.HasTarget})
}

// Alloc gives e a slot: a free one (a new incarnation: its generation is
// bumped) or a new one.
func (t *Table) Alloc(e arche.Entity) uint32 {
	var slot uint32
	if n := len(t.free); n > 0 {
		slot = t.free[n-1]
		t.free = t.free[:n-1]
		t.NoteLayout(slot)
		t.Infos[slot].Gen++ // a reused slot is a new incarnation
	} else {
		slot = uint32(len(t.Infos))
		t.Infos = append(t.Infos, Info{})
		t.Weights = append(t.Weights, 1)
		t.NoteLayout(slot)
	}
	si := &t.Infos[slot]
	si.Entity, si.Alive, si.Dirty = e, true, true
	t.byEntity[e] = slot
	t.Alive.Set(slot)
	t.Fresh.Set(slot)
	return slot
}

// Free frees slot, ending the predicted-spawn key of its entity.
func (t *Table) Free(slot uint32) {
	t.NoteLayout(slot)
	si := &t.Infos[slot]
	delete(t.byEntity, si.Entity)
	if si.Keyed {
		t.Keys.forget(si.Key)
	}
	si.Keyed = false
	si.Target, si.HasTarget = components.NetID{}, false
	si.Alive = false
	si.Entity = arche.Entity{}
	t.Alive.Clear(slot)
	t.free = append(t.free, slot)
}

// TakeKeys gives the slots allocated this tick the keys their entities
// were given (Keys.Add); call it after the tick's allocations.
func (t *Table) TakeKeys() {
	if len(t.Keys.pending) > 0 {
		t.Keys.take(t)
	}
}

// Restored is one slot of a table being restored (Table.Restore): its
// generation and, if alive, its entity.
type Restored struct {
	Gen    uint32
	Alive  bool
	Entity arche.Entity
}

// Restore makes the empty table hold restored slots, in order, with free
// the free slots in the order they are to be reused (the dead ones, each
// once): a restored server hands out the handles and generations its
// checkpoint's did. The alive slots' layouts are set by the next Apply
// (their entities must have been touched).
func (t *Table) Restore(restored []Restored, free []uint32) {
	for i, r := range restored {
		slot := uint32(i)
		t.Infos = append(t.Infos, Info{Gen: r.Gen, Meta: entity.Meta{Gen: r.Gen}})
		t.Weights = append(t.Weights, 1)
		if r.Alive {
			si := &t.Infos[slot]
			si.Entity, si.Alive, si.Dirty = r.Entity, true, true
			t.byEntity[r.Entity] = slot
			t.Alive.Set(slot)
			t.Fresh.Set(slot)
		}
	}
	t.free = append(t.free, free...)
}

// FreeSlots returns the free slots in the order they are reused (last
// first), for a checkpoint.
func (t *Table) FreeSlots() []uint32 { return t.free }
