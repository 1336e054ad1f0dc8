package replication

import (
	"math/bits"
	"unsafe"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/internal/snapshot"
	"github.com/mlange-42/arche/ecs"
	"github.com/mlange-42/arche/ecs/event"
)

// slotInfo is the server's record of one net slot.
type slotInfo struct {
	entity ecs.Entity
	gen    uint32
	meta   snapshot.Meta
	alive  bool
	dirty  bool // MarkDirty since the last frame
	rep    components.Replicated
	keyed  bool     // a predicted spawn of its owner (Server.PredictedSpawn)
	key    ownedKey // its owner and key
	noted  uint32   // the tick of its last relaidOut entry
}

// relaidOut is a slot whose generation, owner or component set changed
// this tick (a spawn, a despawn, a reuse, a component added or removed),
// with what it was at the last frame: the Meta a client that holds it was
// sent. Each slot is listed at most once per tick.
type relaidOut struct {
	slot     uint32
	was      snapshot.Meta
	wasAlive bool
}

// noteLayout lists slot in s.relayout with its state before this tick's
// first change to it; call it before changing the slot.
func (s *Server) noteLayout(slot uint32) {
	si := &s.slots[slot]
	if si.noted == s.tick {
		return
	}
	si.noted = s.tick
	s.relayout = append(s.relayout, relaidOut{slot: slot, was: si.meta, wasAlive: si.alive})
	if s.interest != nil {
		s.interest.relaid = true // (the next rebuild is a full one)
	}
}

// structureListener is the arche listener the server installs: it collects
// the entities whose structure changed (created, removed, components added
// or removed) until the next Send. It keeps arche's interface off the
// Server's own API.
type structureListener struct{ s *Server }

// Notify implements arche's Listener.
func (l structureListener) Notify(_ *ecs.World, e ecs.EntityEvent) { l.s.touch(e.Entity) }

// Subscriptions implements arche's Listener.
func (l structureListener) Subscriptions() event.Subscription {
	return event.EntityCreated | event.EntityRemoved | event.ComponentAdded | event.ComponentRemoved
}

// Components implements arche's Listener: all components (the server
// filters on Replicated itself, so adding any replicated component to a
// replicated entity is seen).
func (l structureListener) Components() *ecs.Mask { return nil }

func (s *Server) touch(e ecs.Entity) {
	if _, ok := s.touched[e]; !ok {
		s.touched[e] = struct{}{}
		s.order = append(s.order, e)
	}
}

// advanceTick numbers the net tick Send builds (see ServerConfig.Tick).
func (s *Server) advanceTick() {
	next := s.tick + 1
	if s.cfg.Tick != nil {
		t := s.cfg.Tick()
		switch {
		case s.tick == 0 && t != 0:
			next = t // the first Send: align with the simulation
		case t != next && !s.tickWarned:
			s.tickWarned = true
			s.cfg.Logger.Warn("replication: ServerConfig.Tick did not advance by one net tick per Send; counting instead",
				"tick", t, "expected", next)
		}
	}
	s.tick = next
}

// applyStructure turns the entities touched by listener events into slot
// allocations, layout changes and frees.
func (s *Server) applyStructure() {
	for _, e := range s.order {
		delete(s.touched, e)
		slot, has := s.byEntity[e]
		if !s.world.Alive(e) || !s.world.Has(e, s.idRep) {
			if has {
				s.freeSlot(slot)
			}
			continue
		}
		set := s.setOf(e)
		if set == 0 {
			if has {
				s.freeSlot(slot)
			}
			continue
		}
		var owner uint8
		if s.world.Has(e, s.idOwner) {
			owner = (*components.Owner)(s.world.Get(e, s.idOwner)).Client
		}
		if !has {
			slot = s.allocSlot(e)
		}
		si := &s.slots[slot]
		m := snapshot.Meta{Gen: si.gen, Owner: owner, Set: set}
		if !has || si.meta != m {
			s.noteLayout(slot)
			si.meta = m
		}
		si.rep = *(*components.Replicated)(s.world.Get(e, s.idRep))
		w := si.rep.Priority
		if w <= 0 {
			w = 1
		}
		s.weights[slot] = w
	}
	s.order = s.order[:0]
	if len(s.spawnKeys.pending) > 0 {
		s.takeKeys()
	}
}

func (s *Server) setOf(e ecs.Entity) uint64 {
	var set uint64
	for i, id := range s.compIDs {
		if s.world.Has(e, id) {
			set |= 1 << i
		}
	}
	return set
}

func (s *Server) allocSlot(e ecs.Entity) uint32 {
	var slot uint32
	if n := len(s.free); n > 0 {
		slot = s.free[n-1]
		s.free = s.free[:n-1]
		s.noteLayout(slot)
		s.slots[slot].gen++ // a reused slot is a new incarnation
	} else {
		slot = uint32(len(s.slots))
		s.slots = append(s.slots, slotInfo{})
		s.weights = append(s.weights, 1)
		s.noteLayout(slot)
	}
	si := &s.slots[slot]
	si.entity, si.alive, si.dirty = e, true, true
	s.byEntity[e] = slot
	s.alive.Set(slot)
	if s.interest != nil {
		s.interest.fresh.Set(slot)
	}
	return slot
}

func (s *Server) freeSlot(slot uint32) {
	s.noteLayout(slot)
	si := &s.slots[slot]
	delete(s.byEntity, si.entity)
	if si.keyed {
		s.forgetKey(si.key)
		si.keyed = false
	}
	si.alive = false
	si.entity = ecs.Entity{}
	s.alive.Clear(slot)
	s.free = append(s.free, slot)
}

// buildFrame runs the one pass over replicated entities.
func (s *Server) buildFrame() {
	s.snap.Begin(s.tick)
	// The interest grid takes the positions this pass reads anyway.
	notePos := s.interest != nil && s.interest.due(s.tick)
	if notePos {
		s.interest.beginPositions(len(s.slots))
	}
	if n, ok := s.snap.Aligned(); ok && len(s.workers) > 1 && n >= s.cfg.ParallelFrame && s.sameEntities(n) {
		s.putShares(n, notePos)
	} else {
		s.putAll(notePos)
	}
	s.snap.Commit()
}

// sameEntities reports whether the live entities are exactly the previous
// frame's n, with the same Meta: then each worker can put a share of them.
func (s *Server) sameEntities(n int) bool {
	alive := 0
	for _, w := range s.alive {
		alive += bits.OnesCount64(w)
	}
	if alive != n {
		return false
	}
	if len(s.relayout) == 0 {
		// No slot was allocated, freed or changed its Meta since the
		// last frame (applyStructure notes each in relayout), and that
		// frame holds every live slot with its Meta then.
		return true
	}
	for j := range n {
		slot, m := s.snap.Entry(j)
		if si := &s.slots[slot]; !si.alive || si.meta != m {
			return false
		}
	}
	return true
}

// putAll puts every live entity into the frame, in slot order.
func (s *Server) putAll(notePos bool) {
	// The component pointers live in this frame's own array, filled
	// here: a pointer stored in the heap, or through a pointer argument,
	// costs a GC write barrier while the GC marks (hundreds of
	// instructions each). putShares does the same.
	var ptrs [64]unsafe.Pointer
	for slot := range s.slots {
		si := &s.slots[slot]
		if !si.alive {
			continue
		}
		if s.keeps(si, uint32(slot)) && s.snap.Keep(uint32(slot), si.meta) {
			continue
		}
		if si.dirty {
			si.dirty = false // (stored only when set: the frame build leaves the slot table clean)
		}
		n := 0
		for set := si.meta.Set; set != 0; set &= set - 1 {
			id := bits.TrailingZeros64(set)
			ptrs[n] = s.world.Get(si.entity, s.compIDs[id])
			if notePos && id == int(s.posPl.ID) { // (the interest grid takes the positions)
				s.interest.notePos(uint32(slot), s.interest.cfg.Position.At(ptrs[n]))
			}
			n++
		}
		s.snap.Put(uint32(slot), si.meta, ptrs[:n])
	}
}

// keeps reports whether slot keeps last frame's state this tick: dormant
// and not marked dirty, or between its send-rate divisor's ticks.
func (s *Server) keeps(si *slotInfo, slot uint32) bool {
	return (si.rep.Dormant && !si.dirty) || (si.rep.SendEvery > 1 && (s.tick+slot)%uint32(si.rep.SendEvery) != 0)
}

// putShares builds a frame of last frame's n entities on the workers: the
// entries are cut into chunks of about frameChunk (between 64-slot words,
// so that the interest grid's position bits of one word are one chunk's),
// which the workers take in turn.
func (s *Server) putShares(n int, notePos bool) {
	fs := &s.frame
	k := min(max(n/frameChunk, 1), maxFrameChunks)
	bounds := &fs.bounds
	bounds[k] = n
	for i := 1; i < k; i++ {
		j := max(i*n/k, bounds[i-1])
		for j < n && j > 0 {
			a, _ := s.snap.Entry(j - 1)
			b, _ := s.snap.Entry(j)
			if a>>6 != b>>6 {
				break
			}
			j++
		}
		bounds[i] = j
	}
	for len(fs.shares) < k {
		fs.shares = append(fs.shares, s.snap.NewAlignedPut())
	}
	if fs.put == nil {
		fs.put = s.putShare // (once: a method value is a closure)
	}
	fs.notePos = notePos
	s.snap.StartAligned()
	s.gang.each(k, fs.put)
	s.snap.EndAligned(fs.shares[:k])
}

// frameShares is the state of a frame built on the workers (putShares):
// its chunks, their bounds in the previous frame's entries, and whether
// the chunks note positions for the interest grid.
type frameShares struct {
	shares  []*snapshot.AlignedPut
	bounds  [maxFrameChunks + 1]int
	notePos bool
	put     func(c int) // putShare, made once
}

// putShare puts chunk c of the frame putShares builds.
func (s *Server) putShare(c int) {
	fs := &s.frame
	notePos := fs.notePos
	var ptrs [64]unsafe.Pointer
	a := fs.shares[c]
	a.Range(fs.bounds[c], fs.bounds[c+1])
	for j := fs.bounds[c]; j < fs.bounds[c+1]; j++ {
		slot, _ := s.snap.Entry(j)
		si := &s.slots[slot]
		if s.keeps(si, slot) {
			continue // (the entry keeps the previous frame's value)
		}
		if si.dirty {
			si.dirty = false // (stored only when set: the frame build leaves the slot table clean)
		}
		n := 0 // (as in putAll)
		for set := si.meta.Set; set != 0; set &= set - 1 {
			id := bits.TrailingZeros64(set)
			ptrs[n] = s.world.Get(si.entity, s.compIDs[id])
			if notePos && id == int(s.posPl.ID) {
				s.interest.notePos(slot, s.interest.cfg.Position.At(ptrs[n]))
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
