package replication

// mirrorTable maps net slots to mirrors without trusting slot numbers, which
// come from the network: slots below a bound derived from the client's
// MaxEntities index a slice grown on demand (an honest server allocates
// slots densely from 0), larger ones live in a map. Memory follows the
// mirrors that exist and that bound, never the largest slot named.
type mirrorTable struct {
	dense    []mirror
	denseMax int
	sparse   map[uint32]*mirror
}

func newMirrorTable(maxEntities int) mirrorTable {
	return mirrorTable{denseMax: max(maxEntities, 1024)}
}

// get returns the entry of slot, or nil if it has none (an entry that exists
// may hold no live mirror: check alive).
func (t *mirrorTable) get(slot uint32) *mirror {
	if int(slot) < len(t.dense) {
		return &t.dense[slot]
	}
	if t.sparse == nil {
		return nil
	}
	return t.sparse[slot]
}

// at returns the entry of slot, creating it.
func (t *mirrorTable) at(slot uint32) *mirror {
	if int(slot) < len(t.dense) {
		return &t.dense[slot]
	}
	if int(slot) < t.denseMax {
		n := max(int(slot)+1, min(2*len(t.dense), t.denseMax))
		t.dense = append(t.dense, make([]mirror, n-len(t.dense))...)
		return &t.dense[slot]
	}
	if m := t.sparse[slot]; m != nil {
		return m
	}
	if t.sparse == nil {
		t.sparse = map[uint32]*mirror{}
	}
	m := &mirror{}
	t.sparse[slot] = m
	return m
}

// release forgets slot's entry once its mirror is gone.
func (t *mirrorTable) release(slot uint32) {
	if int(slot) >= len(t.dense) && t.sparse != nil {
		delete(t.sparse, slot)
	}
}

// each calls fn for every live mirror.
func (t *mirrorTable) each(fn func(slot uint32, m *mirror)) {
	for i := range t.dense {
		if m := &t.dense[i]; m.alive {
			fn(uint32(i), m)
		}
	}
	for slot, m := range t.sparse {
		if m.alive {
			fn(slot, m)
		}
	}
}
