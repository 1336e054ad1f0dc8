package entity

// DefaultDepth is the default number of ticks of history both ends keep:
// the frames of the server's ring, the views it records per client, and a
// client's decoded views.
const DefaultDepth = 32

// MaxSlots bounds entity slots (net indices are 24 bits).
const MaxSlots = 1 << 24

// Meta is the identity and layout of an entity.
type Meta struct {
	Gen   uint32 // net generation of the slot's current incarnation
	Owner uint8  // owning client id (0 = server)
	Set   uint64 // replicated component ids present (bit i = registry id i)
}

// Entries is a table of entities sorted by slot, with their identity and
// layout and their quantized lanes: what a frame of the server's ring and a
// client's decoded view hold.
type Entries struct {
	Slots []uint32 // sorted entity slots (net indices)
	Metas []Meta
	Offs  []uint32 // first lane of each entry in Lanes
	Lanes []uint64
}

// EntityLanes returns the lanes of entry i (all components of its set, in
// registry id order).
func (e *Entries) EntityLanes(i int) []uint64 {
	end := uint32(len(e.Lanes))
	if i+1 < len(e.Offs) {
		end = e.Offs[i+1]
	}
	return e.Lanes[e.Offs[i]:end]
}

// Len returns the number of entities.
func (e *Entries) Len() int { return len(e.Slots) }

// Reset empties the table, keeping its memory.
func (e *Entries) Reset() {
	e.Slots, e.Metas, e.Offs, e.Lanes = e.Slots[:0], e.Metas[:0], e.Offs[:0], e.Lanes[:0]
}
