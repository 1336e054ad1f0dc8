package sim_test

import (
	"reflect"
	"testing"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/tests/internal/harness"
	"github.com/archenet/archenet/transport/sim"
	"github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/require"
)

// aimOf reads the Aim of client cs's mirror of server entity e.
func aimOf(h *harness.Harness, cs *harness.ClientSide, e ecs.Entity) (components.Ref, bool) {
	id, ok := h.Server.NetID(e)
	if !ok {
		return components.Ref{}, false
	}
	m, ok := cs.Client.Entity(id)
	if !ok {
		return components.Ref{}, false
	}
	return (*harness.Aim)(cs.World.Get(m, ecs.ComponentID[harness.Aim](cs.World))).At, true
}

// mirrorOf is client cs's mirror of server entity e (zero: none).
func mirrorOf(h *harness.Harness, cs *harness.ClientSide, e ecs.Entity) ecs.Entity {
	id, _ := h.Server.NetID(e)
	m, _ := cs.Client.Entity(id)
	return m
}

// A reference in a replicated component reads, on each client, as the
// mirror of the entity it names: on the first tick both are applied when
// they are spawned together; as none while the target is outside the
// client's interest, then as its mirror once it enters; it follows a
// change of target; and when the target is despawned and its slot reused,
// it reads none, never the new entity.
func TestComponentReferences(t *testing.T) {
	hidden := map[ecs.Entity]replication.ClientID{} // hidden from client 2
	h := harness.New(t, 2, sim.Link{}, hideFrom(hidden))
	aid := ecs.ComponentID[harness.Aim](h.World)
	h.Run(5)
	target := h.Spawn(0, components.Vec3{X: 1})
	holder := h.Spawn(0, components.Vec3{X: 2}, aid)
	(*harness.Aim)(h.World.Get(holder, aid)).At = components.RefTo(target)
	hidden[target] = 2
	h.Step()
	c1, c2 := h.Clients[0], h.Clients[1]
	r, ok := aimOf(h, c1, holder)
	require.True(t, ok, "the holder arrived in one tick")
	require.Equal(t, mirrorOf(h, c1, target), r.Entity, "spawned together: resolved on the first tick both are applied")
	require.False(t, r.Entity.IsZero())
	r, ok = aimOf(h, c2, holder)
	require.True(t, ok)
	require.True(t, r.Set, "client 2 knows which entity")
	require.True(t, r.Entity.IsZero(), "but does not see it: none")
	tid, _ := h.Server.NetID(target)
	require.Equal(t, tid, r.ID)

	delete(hidden, target)
	h.Run(2)
	r, _ = aimOf(h, c2, holder)
	require.False(t, r.Entity.IsZero(), "resolved once the target entered")
	require.Equal(t, mirrorOf(h, c2, target), r.Entity)

	// Another target.
	other := h.Spawn(0, components.Vec3{X: 3})
	h.Run(1)
	(*harness.Aim)(h.World.Get(holder, aid)).At = components.RefTo(other)
	h.Run(2)
	for _, cs := range h.Clients {
		r, _ = aimOf(h, cs, holder)
		require.Equal(t, mirrorOf(h, cs, other), r.Entity)
	}

	// The target goes, its slot is reused: none, not the newcomer.
	oid, _ := h.Server.NetID(other)
	h.World.RemoveEntity(other)
	newcomer := h.Spawn(0, components.Vec3{X: 4})
	h.Run(2)
	nid, _ := h.Server.NetID(newcomer)
	require.Equal(t, oid.Index(), nid.Index(), "the slot was reused")
	for ci, cs := range h.Clients {
		r, _ = aimOf(h, cs, holder)
		require.True(t, r.Entity.IsZero(), "client %d", ci+1)
		require.NotEqual(t, mirrorOf(h, cs, newcomer), r.Entity)
	}
	h.RequireConverged(nil)
}

// An unchanged reference costs no bits in the ticks' deltas while its
// holder moves.
func TestUnchangedReferenceCostsNothing(t *testing.T) {
	h := harness.New(t, 1, sim.Link{}, nil)
	aid := ecs.ComponentID[harness.Aim](h.World)
	target := h.Spawn(0, components.Vec3{})
	holder := h.Spawn(0, components.Vec3{}, aid)
	(*harness.Aim)(h.World.Get(holder, aid)).At = components.RefTo(target)
	h.Game = func(int) { h.Pos(holder).X += 0.25 }
	h.Run(10)
	h.RequireConverged(nil)
	h.Server.SetBitAccounting(true)
	h.Run(30)
	acc, ok := h.Server.BitAccount()
	require.True(t, ok)
	transform := int(h.Registry.ByType(reflect.TypeFor[components.Transform]()).ID)
	aim := int(h.Registry.ByType(reflect.TypeFor[harness.Aim]()).ID)
	t.Logf("30 ticks: Transform %d bits, Aim %d bits", acc.Components[transform], acc.Components[aim])
	require.Positive(t, acc.Components[transform], "the holder moved")
	require.Zero(t, acc.Components[aim])
}

// A replicated relation (a child attached to a moving parent) keeps its
// target on every client, mapped to the parent's mirror; it reads none
// while the parent is outside a client's interest and resolves when it
// enters; through the parent's despawn and a new parent in the reused slot
// it never points at a wrong entity.
func TestRelationReplicated(t *testing.T) {
	hidden := map[ecs.Entity]replication.ClientID{} // hidden from client 2
	h := harness.New(t, 2, sim.Link{}, hideFrom(hidden))
	rel := ecs.ComponentID[harness.AttachedTo](h.World)
	parent := h.Spawn(0, components.Vec3{})
	hidden[parent] = 2
	child := h.Spawn(0, components.Vec3{X: 1}, rel)
	h.World.Relations().Set(child, rel, parent)
	h.Game = func(int) {
		if h.World.Alive(parent) {
			h.Pos(parent).X += 0.5
		}
	}

	// check: each client's child mirror names the mirror of the server's
	// target, or none when it has no such mirror; never anything else.
	check := func(what string) (resolved int) {
		t.Helper()
		target := h.World.Relations().Get(child, rel)
		for ci, cs := range h.Clients {
			mc := mirrorOf(h, cs, child)
			require.False(t, mc.IsZero(), "%s: client %d has the child", what, ci+1)
			got := cs.World.Relations().Get(mc, ecs.ComponentID[harness.AttachedTo](cs.World))
			var want ecs.Entity
			if h.World.Alive(target) {
				want = mirrorOf(h, cs, target)
			}
			require.Equal(t, want, got, "%s: client %d", what, ci+1)
			if !got.IsZero() {
				resolved++
			}
		}
		return resolved
	}
	h.Run(2)
	require.Equal(t, 1, check("spawned together"), "client 1 resolves the parent, client 2 does not see it")
	delete(hidden, parent)
	h.Run(2)
	require.Equal(t, 2, check("the parent entered"))

	pid, _ := h.Server.NetID(parent)
	h.World.RemoveEntity(parent)
	h.Step()
	require.Zero(t, check("the parent despawned"))
	parent2 := h.Spawn(0, components.Vec3{})
	h.Step()
	require.Zero(t, check("a new entity in the parent's slot, not the child's target"))
	p2, _ := h.Server.NetID(parent2)
	require.Equal(t, pid.Index(), p2.Index())
	h.World.Relations().Set(child, rel, parent2)
	parent = parent2
	for range 5 {
		h.Step()
		check("re-attached")
	}
	require.Equal(t, 2, check("re-attached"))
	h.RequireConverged(nil)
}

// BenchmarkUnchangedReference times net ticks of a server with one client
// where a holder moves and its reference does not; the figure is the bits
// the reference's component took per tick (0: a delta leaves it out).
func BenchmarkUnchangedReference(b *testing.B) {
	h := harness.New(b, 1, sim.Link{}, nil)
	aid := ecs.ComponentID[harness.Aim](h.World)
	target := h.Spawn(0, components.Vec3{})
	holder := h.Spawn(0, components.Vec3{}, aid)
	(*harness.Aim)(h.World.Get(holder, aid)).At = components.RefTo(target)
	h.Game = func(int) { h.Pos(holder).X += 0.25 }
	h.Run(10)
	h.Server.SetBitAccounting(true)
	b.ReportAllocs()
	b.ResetTimer()
	h.Run(b.N)
	b.StopTimer()
	acc, _ := h.Server.BitAccount()
	aim := int(h.Registry.ByType(reflect.TypeFor[harness.Aim]()).ID)
	b.ReportMetric(float64(acc.Components[aim])/float64(b.N), "ref-bits/tick")
}
