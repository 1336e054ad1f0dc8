package mirror

import (
	arche "github.com/mlange-42/arche/ecs"

	"github.com/archenet/archenet/components"
)

// mirror is the entry of one net slot.
type mirror struct {
	entity arche.Entity
	owner  uint8
	gen    uint32
	set    uint64
	src    uint32 // server tick of the applied state
	alive  bool
	// predicted: a provisional entity adopted (Mirrors.SpawnPredicted),
	// simulated by the game, never interpolated.
	predicted bool
	// target is what its relation component names (hasTarget false:
	// none); relListed: its slot is in Mirrors.relSlots
	target               components.NetID
	hasTarget, relListed bool
	relPass              uint32 // the Relations pass that kept it listed
}

// table maps net slots to mirrors without trusting slot numbers, which
// come from the network: slots below a bound derived from the client's
// MaxEntities index a slice grown on demand (an honest server allocates
// slots densely from 0), larger ones live in a map. Memory follows the
// mirrors that exist and that bound, never the largest slot named.
type table struct {
	dense    []mirror
	denseMax int
	sparse   map[uint32]*mirror
}

func newTable(maxEntities int) table {
	return table{denseMax: max(maxEntities, 1024)}
}

// get returns the entry of slot, or nil if it has none (an entry that exists
// may hold no live mirror: check alive).
func (t *table) get(slot uint32) *mirror {
	if int(slot) < len(t.dense) {
		return &t.dense[slot]
	}
	if t.sparse == nil {
		return nil
	}
	return t.sparse[slot]
}

// at returns the entry of slot, creating it.
func (t *table) at(slot uint32) *mirror {
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
func (t *table) release(slot uint32) {
	if int(slot) >= len(t.dense) && t.sparse != nil {
		delete(t.sparse, slot)
	}
}

// each calls fn for every live mirror.
func (t *table) each(fn func(slot uint32, m *mirror)) {
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
