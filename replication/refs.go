package replication

import (
	"unsafe"

	arche "github.com/mlange-42/arche/ecs"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/schema"
)

// refComp is a registered component with components.Ref fields.
type refComp struct {
	id   arche.ID
	plan *schema.Plan
	// filter selects the entities to visit (made once: a filter made per
	// query is an allocation)
	filter arche.Filter
}

// refComps returns the registered components of reg that hold references,
// with their ids in world.
func refComps(world *arche.World, reg *schema.Registry) []refComp {
	var out []refComp
	for _, p := range reg.Plans() {
		if len(p.Refs()) > 0 {
			out = append(out, refComp{id: arche.TypeID(world, p.Type), plan: p})
		}
	}
	return out
}

// refsToNet writes, for every reference in a replicated component, the
// network identity of the entity it names (none when that entity is not
// replicated, or gone), so that the frame quantizes them: after the tick's
// slots are allocated, before the frame.
func (s *Server) refsToNet() {
	for i := range s.refs {
		rc := &s.refs[i]
		if rc.filter == nil {
			rc.filter = arche.All(rc.id)
		}
		q := s.world.Query(rc.filter)
		for q.Next() {
			ptr := q.Get(rc.id)
			for _, f := range rc.plan.Refs() {
				r := (*components.Ref)(unsafe.Add(ptr, f.Offset))
				var id components.NetID
				ok := false
				if !r.Entity.IsZero() {
					id, ok = s.NetID(r.Entity)
				}
				if r.ID != id || r.Set != ok {
					r.ID, r.Set = id, ok
				}
			}
		}
	}
}

// refsToMirrors points every reference in a mirror's component, and every
// mirror's relation, at the mirror of the entity it names: none while that
// entity has no mirror here (not spawned yet, outside the client's
// interest, despawned), resolved once it has.
func (c *Client) refsToMirrors() {
	c.mirrors.Relations()
	for i := range c.refs {
		rc := &c.refs[i]
		if rc.filter == nil {
			rc.filter = arche.All(rc.id, c.mirrors.NetIDComponent())
		}
		q := c.world.Query(rc.filter)
		for q.Next() {
			ptr := q.Get(rc.id)
			for _, f := range rc.plan.Refs() {
				r := (*components.Ref)(unsafe.Add(ptr, f.Offset))
				var e arche.Entity
				if r.Set {
					e, _ = c.mirrors.Entity(r.ID)
				}
				if r.Entity != e {
					r.Entity = e
				}
			}
		}
	}
}

// relationsToNet notes, for every replicated entity with a replicated
// relation component, the network identity of its target (none when the
// target is not replicated, or gone); a change is a layout change of the
// entity, so clients that hold it get its spawn entry again. After the
// tick's slots are allocated.
func (s *Server) relationsToNet() {
	for i := range s.rels {
		rc := &s.rels[i]
		if rc.filter == nil {
			rc.filter = arche.All(rc.id, s.ids.rep)
		}
		q := s.world.Query(rc.filter)
		for q.Next() {
			slot, ok := s.slots.Of(q.Entity())
			if !ok {
				continue
			}
			var id components.NetID
			has := false
			if target := q.Relation(rc.id); !target.IsZero() {
				id, has = s.NetID(target)
			}
			if si := &s.slots.Infos[slot]; si.Target != id || si.HasTarget != has {
				s.slots.NoteLayout(slot)
				si.Target, si.HasTarget = id, has
			}
		}
	}
}

// relationComps returns the registered relation components of reg with
// their ids in world.
func relationComps(world *arche.World, reg *schema.Registry) []refComp {
	var out []refComp
	for _, p := range reg.Plans() {
		if p.IsRelation() {
			out = append(out, refComp{id: arche.TypeID(world, p.Type), plan: p})
		}
	}
	return out
}
