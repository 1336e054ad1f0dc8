package replicationtest

import (
	"fmt"
	"unsafe"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/schema"
	"github.com/mlange-42/arche/ecs"
)

// State is the quantized state of a server's replicated entities in a form that
// travels (its JSON encoding is exact): for checking, with [Converged], a client that
// runs in another process, such as a page, against the server. [Capture] takes it;
// [State.World] rebuilds a world that Converged takes as the server's.
type State struct {
	Entities []EntityState `json:"entities"`
}

// EntityState is one entity of a [State]: its net id, its component set (bit i: the
// registry's component i) and the quantized lanes of those components in registry
// order, owner-only fields included.
type EntityState struct {
	ID    components.NetID `json:"id"`
	Set   uint64           `json:"set"`
	Lanes []uint64         `json:"lanes"`
}

// Capture returns the state of w's replicated entities (those with
// components.Replicated), netID being the server's (replication.Server.NetID). It
// fails for an entity without a net id. Allocates.
func Capture(reg *schema.Registry, w *ecs.World, netID func(ecs.Entity) (components.NetID, bool)) (State, error) {
	var s State
	q := w.Query(ecs.All(ecs.ComponentID[components.Replicated](w)))
	for q.Next() {
		e := q.Entity()
		id, ok := netID(e)
		if !ok {
			q.Close()
			return State{}, fmt.Errorf("entity %v has no net id", e)
		}
		set, lanes := Quantized(reg, w, e, true, false)
		s.Entities = append(s.Entities, EntityState{ID: id, Set: set, Lanes: lanes})
	}
	return s, nil
}

// World rebuilds s as a server world: one entity per EntityState with
// components.Replicated and its components, dequantized from its lanes, and the net id
// function [Check].NetID takes. It fails for a component set or a lane count that does
// not match reg (a State of another registry). Allocates.
func (s State) World(reg *schema.Registry) (*ecs.World, func(ecs.Entity) (components.NetID, bool), error) {
	w := ecs.NewWorld()
	ids := make(map[ecs.Entity]components.NetID, len(s.Entities))
	plans := reg.Plans()
	for _, es := range s.Entities {
		if es.Set>>len(plans) != 0 {
			return nil, nil, fmt.Errorf("entity %08x/%d: component set %b has components the registry lacks", es.ID.Handle, es.ID.Gen, es.Set)
		}
		comps := []ecs.ID{ecs.ComponentID[components.Replicated](&w)}
		for _, p := range plans {
			if es.Set&(1<<p.ID) != 0 {
				comps = append(comps, ecs.TypeID(&w, p.Type))
			}
		}
		e := w.NewEntity(comps...)
		lanes := es.Lanes
		for _, p := range plans {
			if es.Set&(1<<p.ID) == 0 {
				continue
			}
			if len(lanes) < p.NumLanes() {
				return nil, nil, fmt.Errorf("entity %08x/%d: %d lanes, fewer than its components have", es.ID.Handle, es.ID.Gen, len(es.Lanes))
			}
			p.DequantizeBytes(lanes[:p.NumLanes()], unsafe.Slice((*byte)(w.Get(e, ecs.TypeID(&w, p.Type))), p.Size))
			lanes = lanes[p.NumLanes():]
		}
		if len(lanes) != 0 {
			return nil, nil, fmt.Errorf("entity %08x/%d: %d lanes, more than its components have", es.ID.Handle, es.ID.Gen, len(es.Lanes))
		}
		ids[e] = es.ID
	}
	return &w, func(e ecs.Entity) (components.NetID, bool) { id, ok := ids[e]; return id, ok }, nil
}
