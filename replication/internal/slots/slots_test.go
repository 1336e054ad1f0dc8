package slots

import (
	"math/rand/v2"
	"slices"
	"testing"

	arche "github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/replication/internal/entity"
)

// newEntities returns n distinct arche entities (the table only keys on
// them).
func newEntities(n int) []arche.Entity {
	w := arche.NewWorld()
	es := make([]arche.Entity, n)
	for i := range es {
		es[i] = w.NewEntity()
	}
	return es
}

// A new table hands out slots 0, 1, 2, … in turn, generation 0, alive,
// dirty, of weight 1, in Alive and Fresh, and finds each by its entity.
func TestAllocNewSlots(t *testing.T) {
	tab := NewTable()
	tab.Begin(1)
	es := newEntities(4)
	for i, e := range es[:3] {
		slot := tab.Alloc(e)
		require.Equal(t, uint32(i), slot)
		got, ok := tab.Of(e)
		require.True(t, ok)
		require.Equal(t, slot, got)
		si := tab.Infos[slot]
		require.Equal(t, e, si.Entity)
		require.Zero(t, si.Gen)
		require.True(t, si.Alive)
		require.True(t, si.Dirty, "a new slot is read by the next frame build")
		require.True(t, tab.Alive.Has(slot))
		require.True(t, tab.Fresh.Has(slot))
	}
	require.Equal(t, []float32{1, 1, 1}, tab.Weights)
	require.Equal(t, 3, tab.Alive.Count())
	_, ok := tab.Of(es[3])
	require.False(t, ok, "an entity never allocated has no slot")
}

// A freed slot forgets its entity and leaves Alive; the next allocation
// reuses it (the table does not grow) as a new incarnation: its generation
// is one more, so a reference to the old entity (slot, gen) never names
// the new one.
func TestFreeAndReuseBumpsGeneration(t *testing.T) {
	tab := NewTable()
	tab.Begin(1)
	es := newEntities(4)
	for _, e := range es[:3] {
		tab.Alloc(e)
	}
	tab.Fresh.Reset()
	tab.Infos[1].Dirty = false

	tab.Free(1)
	_, ok := tab.Of(es[1])
	require.False(t, ok)
	require.False(t, tab.Infos[1].Alive)
	require.Equal(t, arche.Entity{}, tab.Infos[1].Entity)
	require.False(t, tab.Alive.Has(1))
	require.Equal(t, 2, tab.Alive.Count())

	slot := tab.Alloc(es[3])
	require.Equal(t, uint32(1), slot, "the free slot is reused")
	require.Len(t, tab.Infos, 3, "no new slot while one is free")
	require.Equal(t, uint32(1), tab.Infos[1].Gen)
	require.Equal(t, es[3], tab.Infos[1].Entity)
	require.True(t, tab.Infos[1].Alive)
	require.True(t, tab.Infos[1].Dirty)
	require.True(t, tab.Alive.Has(1))
	require.True(t, tab.Fresh.Has(1), "a reused slot is fresh again")
	require.False(t, tab.Fresh.Has(0), "Fresh holds the slots allocated since the reset")
	got, ok := tab.Of(es[3])
	require.True(t, ok)
	require.Equal(t, uint32(1), got)
}

// Through a long seeded run of allocations and frees, the table agrees
// with a model: each live entity has its own slot, Of and Alive say so,
// freed entities have none, a slot's generation counts its reuses, and
// the table holds no more slots than entities were ever alive at once.
func TestAllocFreeAgainstModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tab := NewTable()
	es := newEntities(400)
	live := map[arche.Entity]uint32{} // entity → its slot
	var order []arche.Entity          // the live ones, to pick from by rng
	var gone []arche.Entity
	incarnations := map[uint32]uint32{} // slot → allocations so far
	next, peak := 0, 0
	for tick := uint32(1); tick <= 300; tick++ {
		tab.Begin(tick)
		for range rng.IntN(4) {
			if next < len(es) && (len(live) == 0 || rng.IntN(2) == 0) {
				e := es[next]
				next++
				slot := tab.Alloc(e)
				for o, s := range live {
					require.NotEqual(t, s, slot, "slot %d of %v given to %v", s, o, e)
				}
				live[e] = slot
				order = append(order, e)
				require.Equal(t, incarnations[slot], tab.Infos[slot].Gen, "slot %d", slot)
				incarnations[slot]++
				peak = max(peak, len(live))
			} else {
				i := rng.IntN(len(order))
				e := order[i]
				order = append(order[:i], order[i+1:]...)
				tab.Free(live[e])
				delete(live, e)
				gone = append(gone, e)
			}
		}
		tab.EndTick()
		require.Equal(t, len(live), tab.Alive.Count(), "tick %d", tick)
		for e, slot := range live {
			got, ok := tab.Of(e)
			require.True(t, ok)
			require.Equal(t, slot, got)
			require.True(t, tab.Alive.Has(slot))
			require.Equal(t, e, tab.Infos[slot].Entity)
		}
		for _, e := range gone {
			_, ok := tab.Of(e)
			require.False(t, ok, "a freed entity has no slot")
		}
	}
	require.Equal(t, peak, len(tab.Infos), "no more slots than entities alive at once")
	require.Equal(t, peak, len(tab.Weights))
	require.Greater(t, len(gone), 50, "the run frees (and so reuses) slots")
}

// NoteLayout lists a slot in Relayout at most once per tick, with what it
// was before the tick's first change: a new slot as never alive, a freed
// and reused one as the incarnation the clients were sent. EndTick forgets
// the list; the next tick lists the slot again.
func TestNoteLayoutOncePerTick(t *testing.T) {
	tab := NewTable()
	e := newEntities(2)
	m1 := entity.Meta{Gen: 0, Owner: 3, Set: 0b1}

	tab.Begin(1)
	slot := tab.Alloc(e[0])
	tab.Infos[slot].Meta = m1
	tab.NoteLayout(slot) // (a second change in the same tick)
	require.Equal(t, []Relaid{{Slot: slot}}, tab.Relayout, "new: listed once, as never alive")
	tab.EndTick()
	require.Empty(t, tab.Relayout)

	tab.Begin(2)
	tab.NoteLayout(slot)
	tab.Infos[slot].Meta.Set = 0b11
	tab.NoteLayout(slot)
	require.Equal(t, []Relaid{{Slot: slot, Was: m1, WasAlive: true}}, tab.Relayout)
	tab.EndTick()

	// Freed and reused within one tick: listed once, as it was before.
	tab.Begin(3)
	m2 := tab.Infos[slot].Meta
	tab.Free(slot)
	require.Equal(t, slot, tab.Alloc(e[1]))
	require.Equal(t, []Relaid{{Slot: slot, Was: m2, WasAlive: true}}, tab.Relayout)
	tab.EndTick()

	tab.Begin(4)
	tab.Free(slot)
	require.Equal(t, []Relaid{{Slot: slot, Was: m2, WasAlive: true}}, tab.Relayout, "the tick's first change is noted again")
}

// Keys counts the keyed entities of each owner from Add until their
// entity ends, whether the key was pending or moved to the entity's slot:
// a key is alive (and cannot be used twice) until then, and usable again
// after. TakeKeys moves the pending keys to their slots.
func TestKeysCountPerOwner(t *testing.T) {
	tab := NewTable()
	tab.Begin(1)
	es := newEntities(5)
	k1, k2, k3 := Key{Owner: 1, Key: 7}, Key{Owner: 1, Key: 8}, Key{Owner: 255, Key: 7}
	tab.Keys.Add(es[0], k1)
	tab.Keys.Add(es[1], k2)
	tab.Keys.Add(es[2], k3)
	require.Equal(t, 2, tab.Keys.Count(1))
	require.Equal(t, 1, tab.Keys.Count(255), "the last owner id has a count of its own")
	require.Zero(t, tab.Keys.Count(2))
	require.True(t, tab.Keys.Alive(k1))
	require.True(t, tab.Keys.Alive(k3))
	require.False(t, tab.Keys.Alive(Key{Owner: 2, Key: 7}), "keys are per owner")
	require.True(t, tab.Keys.Pending(es[0]))
	require.False(t, tab.Keys.Pending(es[3]))

	slots := make([]uint32, 4)
	for i, e := range es[:4] {
		slots[i] = tab.Alloc(e)
	}
	tab.TakeKeys()
	require.False(t, tab.Keys.Pending(es[0]), "taken: no longer pending")
	require.Equal(t, Info{}.Key, tab.Infos[slots[3]].Key)
	require.False(t, tab.Infos[slots[3]].Keyed, "an entity never keyed has no key")
	for i, k := range []Key{k1, k2, k3} {
		require.True(t, tab.Infos[slots[i]].Keyed)
		require.Equal(t, k, tab.Infos[slots[i]].Key)
	}
	require.Equal(t, 2, tab.Keys.Count(1), "a key moved to its slot still counts")
	require.Empty(t, tab.Keys.Ended(1))
	tab.EndTick()

	tab.Begin(2)
	tab.Free(slots[0])
	require.Equal(t, 1, tab.Keys.Count(1))
	require.False(t, tab.Keys.Alive(k1), "released with its entity")
	require.True(t, tab.Keys.Alive(k2))
	require.False(t, tab.Infos[slots[0]].Keyed)
	tab.Free(slots[3]) // (not keyed: no count changes)
	require.Equal(t, 1, tab.Keys.Count(1))
	require.Equal(t, 1, tab.Keys.Count(255))
	require.Empty(t, tab.Keys.Ended(1), "a key whose entity had a slot ends with the despawn, not in Ended")

	// The released key is usable again; its new entity takes a freed slot.
	e := es[4]
	tab.Keys.Add(e, k1)
	require.Equal(t, 2, tab.Keys.Count(1))
	slot := tab.Alloc(e)
	tab.TakeKeys()
	require.True(t, tab.Infos[slot].Keyed)
	require.Equal(t, k1, tab.Infos[slot].Key)
	require.NotZero(t, tab.Infos[slot].Gen, "a reused slot")
}

// A keyed entity that ends before the Send that would give it a slot (or
// is never given one) releases its key at TakeKeys and is listed in its
// owner's Ended for this tick only; ClearEnded forgets the list.
func TestKeysEndedBeforeTheirSlot(t *testing.T) {
	tab := NewTable()
	tab.Begin(1)
	es := newEntities(5)
	tab.Keys.Add(es[0], Key{Owner: 2, Key: 10}) // never allocated
	tab.Keys.Add(es[1], Key{Owner: 2, Key: 11}) // allocated and freed this tick
	tab.Keys.Add(es[2], Key{Owner: 5, Key: 10}) // lives
	tab.Keys.Add(es[3], Key{Owner: 6, Key: 1})  // never allocated
	tab.Free(tab.Alloc(es[1]))
	live := tab.Alloc(es[2])
	require.Equal(t, 2, tab.Keys.Count(2))
	tab.TakeKeys()

	require.ElementsMatch(t, []uint32{10, 11}, tab.Keys.Ended(2))
	require.Equal(t, []uint32{1}, tab.Keys.Ended(6))
	require.Empty(t, tab.Keys.Ended(5))
	require.Zero(t, tab.Keys.Count(2))
	require.Zero(t, tab.Keys.Count(6))
	require.Equal(t, 1, tab.Keys.Count(5))
	require.False(t, tab.Keys.Alive(Key{Owner: 2, Key: 10}))
	require.False(t, tab.Keys.Pending(es[0]))
	require.True(t, tab.Infos[live].Keyed)

	tab.Keys.ClearEnded()
	tab.EndTick()
	require.Empty(t, tab.Keys.Ended(2))
	require.Empty(t, tab.Keys.Ended(6))

	// The next tick's ended keys are that tick's alone.
	tab.Begin(2)
	tab.Keys.Add(es[4], Key{Owner: 6, Key: 2})
	tab.TakeKeys()
	require.Equal(t, []uint32{2}, tab.Keys.Ended(6))
	require.Empty(t, tab.Keys.Ended(2))
}

// TestKeysEndedInOrder: an owner's ended keys come in ascending order
// whatever order the game keyed them in (they are kept in a map until the
// Send), so that the same tick sends the same bytes.
func TestKeysEndedInOrder(t *testing.T) {
	tab := NewTable()
	tab.Begin(1)
	es := newEntities(40)
	for i, e := range es {
		tab.Keys.Add(e, Key{Owner: uint8(3 + i%2), Key: uint32(1000 - i)}) // none allocated
	}
	tab.TakeKeys()
	for _, owner := range []uint8{3, 4} {
		ended := tab.Keys.Ended(owner)
		require.Len(t, ended, 20)
		require.True(t, slices.IsSorted(ended), "owner %d: %v", owner, ended)
	}
}
