package replication

import (
	"math/bits"
	"unsafe"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/internal/entity"
	"github.com/archenet/archenet/replication/internal/slots"
	"github.com/archenet/archenet/replication/internal/store"
	arche "github.com/mlange-42/arche/ecs"
	"github.com/mlange-42/arche/ecs/event"
)

// structureLog is the entities whose structure changed (created, removed,
// components added or removed) since the last Send, in event order
// (deterministic), each once.
type structureLog struct {
	touched map[arche.Entity]struct{}
	order   []arche.Entity
}

// structureListener is the arche listener the server installs: it collects
// the entities whose structure changed (created, removed, components added
// or removed) until the next Send. It keeps arche's interface off the
// Server's own API.
type structureListener struct{ s *Server }

// Notify implements arche's Listener.
func (l structureListener) Notify(_ *arche.World, e arche.EntityEvent) { l.s.touch(e.Entity) }

// Subscriptions implements arche's Listener.
func (l structureListener) Subscriptions() event.Subscription {
	return event.EntityCreated | event.EntityRemoved | event.ComponentAdded | event.ComponentRemoved
}

// Components implements arche's Listener: all components (the server
// filters on Replicated itself, so adding any replicated component to a
// replicated entity is seen).
func (l structureListener) Components() *arche.Mask { return nil }

func (s *Server) touch(e arche.Entity) {
	if _, ok := s.changes.touched[e]; !ok {
		s.changes.touched[e] = struct{}{}
		s.changes.order = append(s.changes.order, e)
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
	s.slots.Begin(next)
}

// applyStructure turns the entities touched by listener events into slot
// allocations, layout changes and frees.
func (s *Server) applyStructure() {
	for _, e := range s.changes.order {
		delete(s.changes.touched, e)
		slot, has := s.slots.Of(e)
		if !s.world.Alive(e) || !s.world.Has(e, s.ids.rep) {
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
		if s.world.Has(e, s.ids.owner) {
			owner = (*components.Owner)(s.world.Get(e, s.ids.owner)).Client
		}
		if !has {
			slot = s.slots.Alloc(e)
		}
		si := &s.slots.Infos[slot]
		m := entity.Meta{Gen: si.Gen, Owner: owner, Set: set}
		if !has || si.Meta != m {
			s.slots.NoteLayout(slot)
			si.Meta = m
		}
		si.Rep = *(*components.Replicated)(s.world.Get(e, s.ids.rep))
		w := si.Rep.Priority
		if w <= 0 {
			w = 1
		}
		s.slots.Weights[slot] = w
	}
	s.changes.order = s.changes.order[:0]
	if len(s.spawnKeys.pending) > 0 {
		s.takeKeys()
	}
	if s.interest != nil && len(s.slots.Relayout) > 0 {
		s.interest.Relaid() // (the next rebuild is a full one)
	}
}

func (s *Server) setOf(e arche.Entity) uint64 {
	var set uint64
	for i, id := range s.ids.comps {
		if s.world.Has(e, id) {
			set |= 1 << i
		}
	}
	return set
}

// freeSlot frees slot, ending the predicted-spawn key of its entity.
func (s *Server) freeSlot(slot uint32) {
	if k, keyed := s.slots.Free(slot); keyed {
		s.forgetKey(k)
	}
}

// buildFrame runs the one pass over replicated entities.
func (s *Server) buildFrame() {
	s.ring.Begin(s.tick)
	// The interest grid takes the positions this pass reads anyway.
	notePos := s.interest != nil && s.interest.Due(s.tick)
	if notePos {
		s.interest.BeginPositions(len(s.slots.Infos))
	}
	if n, ok := s.ring.Aligned(); ok && len(s.work.workers) > 1 && n >= s.cfg.ParallelFrame && s.sameEntities(n) {
		s.putShares(n, notePos)
	} else {
		s.putAll(notePos)
	}
	s.ring.Commit()
	s.group.BeginTick()
}

// sameEntities reports whether the live entities are exactly the previous
// frame's n, with the same Meta: then each worker can put a share of them.
func (s *Server) sameEntities(n int) bool {
	alive := 0
	for _, w := range s.slots.Alive {
		alive += bits.OnesCount64(w)
	}
	if alive != n {
		return false
	}
	if len(s.slots.Relayout) == 0 {
		// No slot was allocated, freed or changed its Meta since the
		// last frame (applyStructure notes each in Relayout), and that
		// frame holds every live slot with its Meta then.
		return true
	}
	for j := range n {
		slot, m := s.ring.Entry(j)
		if si := &s.slots.Infos[slot]; !si.Alive || si.Meta != m {
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
	// instructions each). putShare does the same.
	var ptrs [64]unsafe.Pointer
	infos := s.slots.Infos
	for slot := range infos {
		si := &infos[slot]
		if !si.Alive {
			continue
		}
		if s.keeps(si, uint32(slot)) && s.ring.Keep(uint32(slot), si.Meta) {
			continue
		}
		if si.Dirty {
			si.Dirty = false // (stored only when set: the frame build leaves the slot table clean)
		}
		n := 0
		for set := si.Meta.Set; set != 0; set &= set - 1 {
			id := bits.TrailingZeros64(set)
			ptrs[n] = s.world.Get(si.Entity, s.ids.comps[id])
			if notePos && id == int(s.ids.posPl.ID) { // (the interest grid takes the positions)
				s.interest.NotePos(uint32(slot), s.cfg.Interest.Position.At(ptrs[n]))
			}
			n++
		}
		s.ring.Put(uint32(slot), si.Meta, ptrs[:n])
	}
}

// keeps reports whether slot keeps last frame's state this tick: dormant
// and not marked dirty, or between its send-rate divisor's ticks.
func (s *Server) keeps(si *slots.Info, slot uint32) bool {
	return (si.Rep.Dormant && !si.Dirty) || (si.Rep.SendEvery > 1 && (s.tick+slot)%uint32(si.Rep.SendEvery) != 0)
}

// putShares builds a frame of last frame's n entities on the workers: the
// entries are cut into chunks of about frameChunk (between 64-slot words,
// so that the interest grid's position bits of one word are one chunk's),
// which the workers take in turn.
func (s *Server) putShares(n int, notePos bool) {
	fs := &s.work.frame
	k := min(max(n/frameChunk, 1), maxFrameChunks)
	bounds := &fs.bounds
	bounds[k] = n
	for i := 1; i < k; i++ {
		j := max(i*n/k, bounds[i-1])
		for j < n && j > 0 {
			a, _ := s.ring.Entry(j - 1)
			b, _ := s.ring.Entry(j)
			if a>>6 != b>>6 {
				break
			}
			j++
		}
		bounds[i] = j
	}
	for len(fs.shares) < k {
		fs.shares = append(fs.shares, s.ring.NewAlignedPut())
	}
	if fs.put == nil {
		fs.put = s.putShare // (once: a method value is a closure)
	}
	fs.notePos = notePos
	s.ring.StartAligned()
	s.work.gang.Each(k, fs.put)
	s.ring.EndAligned(fs.shares[:k])
}

// frameShares is the state of a frame built on the workers (putShares):
// its chunks, their bounds in the previous frame's entries, and whether
// the chunks note positions for the interest grid.
type frameShares struct {
	shares  []*store.AlignedPut
	bounds  [maxFrameChunks + 1]int
	notePos bool
	put     func(c int) // putShare, made once
}

// putShare puts chunk c of the frame putShares builds.
func (s *Server) putShare(c int) {
	fs := &s.work.frame
	notePos := fs.notePos
	var ptrs [64]unsafe.Pointer
	a := fs.shares[c]
	a.Range(fs.bounds[c], fs.bounds[c+1])
	infos := s.slots.Infos
	for j := fs.bounds[c]; j < fs.bounds[c+1]; j++ {
		slot, _ := s.ring.Entry(j)
		si := &infos[slot]
		if s.keeps(si, slot) {
			continue // (the entry keeps the previous frame's value)
		}
		if si.Dirty {
			si.Dirty = false // (stored only when set: the frame build leaves the slot table clean)
		}
		n := 0
		for set := si.Meta.Set; set != 0; set &= set - 1 {
			id := bits.TrailingZeros64(set)
			ptrs[n] = s.world.Get(si.Entity, s.ids.comps[id])
			if notePos && id == int(s.ids.posPl.ID) { // (as in putAll)
				s.interest.NotePos(slot, s.cfg.Interest.Position.At(ptrs[n]))
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
