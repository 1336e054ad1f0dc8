// Package capture reads the server's arche world into replication's state
// each net tick: the entities whose structure changed (an arche listener's
// events) into the slot table, and then, in one pass over the replicated
// entities, their components into the tick's frame of the ring — on the
// workers when the world is large and no entity spawned, despawned or
// changed its components — noting their positions for the interest grid
// on the way.
package capture

import (
	"math/bits"
	"unsafe"

	arche "github.com/mlange-42/arche/ecs"
	"github.com/mlange-42/arche/ecs/event"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/internal/entity"
	"github.com/archenet/archenet/replication/internal/gang"
	"github.com/archenet/archenet/replication/internal/grid"
	"github.com/archenet/archenet/replication/internal/slots"
	"github.com/archenet/archenet/replication/internal/store"
)

// IDs are the arche ids of the components capture reads: the registered
// ones (by registry id), Replicated and Owner, and the one the interest
// grid reads positions from (PosID its registry id, −1 without a grid; Pos
// reads a position from a pointer to it).
type IDs struct {
	Comps      []arche.ID
	Rep, Owner arche.ID
	PosID      int
	Pos        func(unsafe.Pointer) components.Vec3
}

// Capture is the server's reader of its world.
type Capture struct {
	world *arche.World
	ids   IDs
	slots *slots.Table
	ring  *store.Ring
	grid  *grid.Grid // nil: no interest
	gang  *gang.Gang
	// parallel: the frame may be built on the workers from this many
	// entities (0: never)
	parallel int
	log      structureLog
	frame    frameShares
	// owned: the slots whose entity had an Owner component at its last
	// Apply (listed once: in ownedSet), whose Owner is compared each Apply
	// (a change in place is no structural event)
	owned    []uint32
	ownedSet entity.Bitset
}

// New returns the capture of world into t and r; g may be nil (no
// interest grid); frames of at least parallel entities are built on gg's
// workers (0: never).
func New(world *arche.World, ids IDs, t *slots.Table, r *store.Ring, g *grid.Grid, gg *gang.Gang, parallel int) *Capture {
	return &Capture{world: world, ids: ids, slots: t, ring: r, grid: g, gang: gg, parallel: parallel,
		log: structureLog{touched: map[arche.Entity]struct{}{}}}
}

// structureLog is the entities whose structure changed (created, removed,
// components added or removed) since the last Apply, in event order
// (deterministic), each once.
type structureLog struct {
	touched map[arche.Entity]struct{}
	order   []arche.Entity
}

// Touch notes that e's structure changed.
func (c *Capture) Touch(e arche.Entity) {
	if _, ok := c.log.touched[e]; !ok {
		c.log.touched[e] = struct{}{}
		c.log.order = append(c.log.order, e)
	}
}

// Pending reports whether entities were touched since the last Apply.
func (c *Capture) Pending() bool { return len(c.log.order) > 0 }

// Listener returns the arche listener that feeds Touch: it collects the
// entities whose structure changed (created, removed, components added or
// removed) until the next Apply.
func (c *Capture) Listener() Listener { return Listener{c} }

// Listener is the arche listener of a Capture (see Capture.Listener).
type Listener struct{ c *Capture }

// Notify implements arche's Listener.
func (l Listener) Notify(_ *arche.World, e arche.EntityEvent) { l.c.Touch(e.Entity) }

// Subscriptions implements arche's Listener.
func (l Listener) Subscriptions() event.Subscription {
	return event.EntityCreated | event.EntityRemoved | event.ComponentAdded | event.ComponentRemoved
}

// Components implements arche's Listener: all components (capture filters
// on Replicated itself, so adding any replicated component to a replicated
// entity is seen).
func (l Listener) Components() *arche.Mask { return nil }

// Apply turns the entities touched since the last Apply into slot
// allocations, layout changes and frees; the grid, if any, is told when a
// slot's layout changed (its next rebuild is a full one).
func (c *Capture) Apply() {
	w, t := c.world, c.slots
	c.ownersChanged()
	for _, e := range c.log.order {
		delete(c.log.touched, e)
		slot, has := t.Of(e)
		if !w.Alive(e) || !w.Has(e, c.ids.Rep) {
			if has {
				t.Free(slot)
			}
			continue
		}
		set := c.setOf(e)
		if set == 0 {
			if has {
				t.Free(slot)
			}
			continue
		}
		var owner uint8
		hasOwner := w.Has(e, c.ids.Owner)
		if hasOwner {
			owner = (*components.Owner)(w.Get(e, c.ids.Owner)).Client
		}
		if !has {
			slot = t.Alloc(e)
		}
		if hasOwner && !c.ownedSet.Has(slot) {
			c.ownedSet.Set(slot)
			c.owned = append(c.owned, slot)
		}
		si := &t.Infos[slot]
		m := entity.Meta{Gen: si.Gen, Owner: owner, Set: set}
		if !has || si.Meta != m {
			t.NoteLayout(slot)
			si.Meta = m
		}
		si.Rep = *(*components.Replicated)(w.Get(e, c.ids.Rep))
		wt := si.Rep.Priority
		if wt <= 0 {
			wt = 1
		}
		t.Weights[slot] = wt
	}
	c.log.order = c.log.order[:0]
	t.TakeKeys()
	if c.grid != nil && len(t.Relayout) > 0 {
		c.grid.Relaid() // (the next rebuild is a full one)
	}
}

// ownersChanged touches the entities whose Owner was changed in place
// since the last Apply (handed to another client without a structural
// change), and forgets the listed slots whose entity has no Owner now.
func (c *Capture) ownersChanged() {
	w, t := c.world, c.slots
	keep := c.owned[:0]
	for _, slot := range c.owned {
		si := &t.Infos[slot]
		if !si.Alive || !w.Alive(si.Entity) || !w.Has(si.Entity, c.ids.Owner) {
			c.ownedSet.Clear(slot) // (a structural change: touched already, or freed)
			continue
		}
		keep = append(keep, slot)
		if (*components.Owner)(w.Get(si.Entity, c.ids.Owner)).Client != si.Meta.Owner {
			c.Touch(si.Entity)
		}
	}
	c.owned = keep
}

func (c *Capture) setOf(e arche.Entity) uint64 {
	var set uint64
	for i, id := range c.ids.Comps {
		if c.world.Has(e, id) {
			set |= 1 << i
		}
	}
	return set
}

// Frame runs the one pass over replicated entities into the ring's frame
// of tick; with notePos, the grid notes the positions it reads.
func (c *Capture) Frame(tick uint32, notePos bool) {
	c.ring.Begin(tick)
	if notePos {
		c.grid.BeginPositions(len(c.slots.Infos))
	}
	if n, ok := c.ring.Aligned(); ok && c.parallel > 0 && n >= c.parallel && c.sameEntities(n) {
		c.putShares(n, tick, notePos)
	} else {
		c.putAll(tick, notePos)
	}
	c.ring.Commit()
}

// sameEntities reports whether the live entities are exactly the previous
// frame's n, with the same Meta: then each worker can put a share of them.
func (c *Capture) sameEntities(n int) bool {
	alive := 0
	for _, w := range c.slots.Alive {
		alive += bits.OnesCount64(w)
	}
	if alive != n {
		return false
	}
	if len(c.slots.Relayout) == 0 {
		// No slot was allocated, freed or changed its Meta since the
		// last frame (Apply notes each in Relayout), and that frame
		// holds every live slot with its Meta then.
		return true
	}
	for j := range n {
		slot, m := c.ring.Entry(j)
		if si := &c.slots.Infos[slot]; !si.Alive || si.Meta != m {
			return false
		}
	}
	return true
}

// keeps reports whether slot keeps last frame's state at tick: dormant and
// not marked dirty, or between its send-rate divisor's ticks.
func keeps(si *slots.Info, slot, tick uint32) bool {
	return (si.Rep.Dormant && !si.Dirty) || (si.Rep.SendEvery > 1 && (tick+slot)%uint32(si.Rep.SendEvery) != 0)
}

// putAll puts every live entity into the frame, in slot order.
func (c *Capture) putAll(tick uint32, notePos bool) {
	// The component pointers live in this frame's own array, filled
	// here: a pointer stored in the heap, or through a pointer argument,
	// costs a GC write barrier while the GC marks (hundreds of
	// instructions each). putShare does the same.
	var ptrs [64]unsafe.Pointer
	infos := c.slots.Infos
	for slot := range infos {
		si := &infos[slot]
		if !si.Alive {
			continue
		}
		if keeps(si, uint32(slot), tick) && c.ring.Keep(uint32(slot), si.Meta) {
			continue
		}
		if si.Dirty {
			si.Dirty = false // (stored only when set: the frame build leaves the slot table clean)
		}
		n := 0
		for set := si.Meta.Set; set != 0; set &= set - 1 {
			id := bits.TrailingZeros64(set)
			ptrs[n] = c.world.Get(si.Entity, c.ids.Comps[id])
			if notePos && id == c.ids.PosID { // (the interest grid takes the positions)
				c.grid.NotePos(uint32(slot), c.ids.Pos(ptrs[n]))
			}
			n++
		}
		c.ring.Put(uint32(slot), si.Meta, ptrs[:n])
	}
}

// putShares builds a frame of last frame's n entities on the workers: the
// entries are cut into chunks of about frameChunk (between 64-slot words,
// so that the interest grid's position bits of one word are one chunk's),
// which the workers take in turn.
func (c *Capture) putShares(n int, tick uint32, notePos bool) {
	fs := &c.frame
	k := min(max(n/frameChunk, 1), maxFrameChunks)
	bounds := &fs.bounds
	bounds[k] = n
	for i := 1; i < k; i++ {
		j := max(i*n/k, bounds[i-1])
		for j < n && j > 0 {
			a, _ := c.ring.Entry(j - 1)
			b, _ := c.ring.Entry(j)
			if a>>6 != b>>6 {
				break
			}
			j++
		}
		bounds[i] = j
	}
	for len(fs.shares) < k {
		fs.shares = append(fs.shares, c.ring.NewAlignedPut())
	}
	if fs.put == nil {
		fs.put = c.putShare // (once: a method value is a closure)
	}
	fs.notePos, fs.tick = notePos, tick
	c.ring.StartAligned()
	c.gang.Each(k, fs.put)
	c.ring.EndAligned(fs.shares[:k])
}

// frameShares is the state of a frame built on the workers (putShares):
// its chunks, their bounds in the previous frame's entries, its tick and
// whether the chunks note positions for the interest grid.
type frameShares struct {
	shares  []*store.AlignedPut
	bounds  [maxFrameChunks + 1]int
	tick    uint32
	notePos bool
	put     func(c int) // putShare, made once
}

// putShare puts chunk i of the frame putShares builds.
func (c *Capture) putShare(i int) {
	fs := &c.frame
	notePos, tick := fs.notePos, fs.tick
	var ptrs [64]unsafe.Pointer
	a := fs.shares[i]
	a.Range(fs.bounds[i], fs.bounds[i+1])
	infos := c.slots.Infos
	for j := fs.bounds[i]; j < fs.bounds[i+1]; j++ {
		slot, _ := c.ring.Entry(j)
		si := &infos[slot]
		if keeps(si, slot, tick) {
			continue // (the entry keeps the previous frame's value)
		}
		if si.Dirty {
			si.Dirty = false // (stored only when set: the frame build leaves the slot table clean)
		}
		n := 0 // (as in putAll)
		for set := si.Meta.Set; set != 0; set &= set - 1 {
			id := bits.TrailingZeros64(set)
			ptrs[n] = c.world.Get(si.Entity, c.ids.Comps[id])
			if notePos && id == c.ids.PosID {
				c.grid.NotePos(slot, c.ids.Pos(ptrs[n]))
			}
			n++
		}
		a.PutAt(j, ptrs[:n])
	}
}

// frameChunk is about how many entries a worker takes at a time when the
// workers build a frame together; maxFrameChunks bounds the chunks.
const (
	frameChunk     = 512
	maxFrameChunks = 64
)
