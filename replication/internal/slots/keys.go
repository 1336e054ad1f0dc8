package slots

import (
	"slices"

	arche "github.com/mlange-42/arche/ecs"
)

// Keys is the server's record of predicted spawns (Server.PredictedSpawn):
// the key of each keyed entity (pending until its slot is allocated at the
// next Send), the keys alive and the count each owner holds, and the keys
// whose entity ended before it had a slot, to tell their owners.
type Keys struct {
	pending map[arche.Entity]Key // created this tick, no slot yet
	alive   map[Key]struct{}     // keys alive
	count   [256]int             // per owner
	// ended are, per owner, the keys whose entity the game removed before
	// it had a slot (before the Send after its creation): the owner is
	// told this tick, so its provisional entity ends at once instead of
	// timing out.
	ended [256][]uint32
	owing []uint8 // owners with ended keys
}

// Count returns how many keyed entities owner holds.
func (k *Keys) Count(owner uint8) int { return k.count[owner] }

// Alive reports whether key is alive.
func (k *Keys) Alive(key Key) bool {
	_, ok := k.alive[key]
	return ok
}

// Pending reports whether e was keyed this tick.
func (k *Keys) Pending(e arche.Entity) bool {
	_, ok := k.pending[e]
	return ok
}

// Add keys e (created this tick) with key.
func (k *Keys) Add(e arche.Entity, key Key) {
	if k.pending == nil {
		k.pending, k.alive = map[arche.Entity]Key{}, map[Key]struct{}{}
	}
	k.pending[e] = key
	k.alive[key] = struct{}{}
	k.count[key.Owner]++
}

// take moves each pending key to the slot just allocated for its entity;
// the key of an entity that died before its slot is forgotten, and its
// owner told this tick (Ended).
func (k *Keys) take(t *Table) {
	for e, key := range k.pending {
		slot, ok := t.Of(e)
		if !ok || !t.Infos[slot].Alive {
			k.forget(key)
			if len(k.ended[key.Owner]) == 0 {
				k.owing = append(k.owing, key.Owner)
			}
			k.ended[key.Owner] = append(k.ended[key.Owner], key.Key)
			continue
		}
		t.Infos[slot].Keyed, t.Infos[slot].Key = true, key
	}
	clear(k.pending)
	// The map gave the keys in no order: the message an owner is sent holds
	// them in ascending order, the same bytes for the same tick.
	slices.Sort(k.owing)
	for _, o := range k.owing {
		slices.Sort(k.ended[o])
	}
}

// Ended returns the keys owner is to be told ended this tick, in
// ascending order.
func (k *Keys) Ended(owner uint8) []uint32 { return k.ended[owner] }

// ClearEnded forgets the keys told this tick (after the flush).
func (k *Keys) ClearEnded() {
	for _, o := range k.owing {
		k.ended[o] = k.ended[o][:0]
	}
	k.owing = k.owing[:0]
}

// forget releases a key (its entity is gone).
func (k *Keys) forget(key Key) {
	if _, ok := k.alive[key]; ok {
		delete(k.alive, key)
		k.count[key.Owner]--
	}
}
