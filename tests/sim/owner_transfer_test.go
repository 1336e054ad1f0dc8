package sim_test

import (
	"testing"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/tests/internal/harness"
	"github.com/archenet/archenet/transport/sim"
	"github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/require"
)

// Handing an entity to another client reaches every client, whether its
// Owner is changed in place or replaced (removed and added with the new
// client): the entity keeps its mirror, its NetID names the new owner (the
// old NetID no longer resolves), the new owner gets its owner-only fields
// and the old one no longer does.
func TestOwnerHandedOver(t *testing.T) {
	h := harness.New(t, 2, sim.Link{}, nil)
	hid := ecs.ComponentID[harness.Health](h.World)
	oid := ecs.ComponentID[components.Owner](h.World)
	e := h.Spawn(1, components.Vec3{}, hid)
	*(*harness.Health)(h.World.Get(e, hid)) = harness.Health{HP: 90, Ammo: 33}
	h.Run(3)
	h.RequireConverged(nil)
	first, _ := h.Server.NetID(e)
	mirrors := [2]ecs.Entity{}
	for ci, cs := range h.Clients {
		mirrors[ci], _ = cs.Client.Entity(first)
	}

	handOver := func(how string, to uint8, ammo uint16, hand func()) {
		t.Helper()
		was, _ := h.Server.NetID(e)
		hand()
		(*harness.Health)(h.World.Get(e, hid)).Ammo = ammo
		h.Run(3)
		id, _ := h.Server.NetID(e)
		require.Equal(t, to, id.Owner(), how)
		require.Equal(t, was.Index(), id.Index(), how)
		h.RequireConverged(nil)
		for ci, cs := range h.Clients {
			want := uint16(0)
			if cs.Client.ID() == to {
				want = ammo
			}
			m, ok := cs.Client.Entity(id)
			require.True(t, ok, "%s: client %d", how, ci+1)
			require.Equal(t, mirrors[ci], m, "%s: client %d keeps the mirror", how, ci+1)
			require.Equal(t, id, *(*components.NetID)(cs.World.Get(m, ecs.ComponentID[components.NetID](cs.World))), how)
			require.Equal(t, want, (*harness.Health)(cs.World.Get(m, ecs.ComponentID[harness.Health](cs.World))).Ammo, "%s: client %d", how, ci+1)
			_, ok = cs.Client.Entity(was)
			require.False(t, ok, "%s: client %d still resolves the old NetID", how, ci+1)
		}
	}
	handOver("in place", 2, 21, func() { (*components.Owner)(h.World.Get(e, oid)).Client = 2 })
	handOver("replaced", 1, 8, func() {
		h.World.Remove(e, oid)
		h.World.Add(e, oid)
		(*components.Owner)(h.World.Get(e, oid)).Client = 1
	})
	handOver("to the server", 0, 5, func() { (*components.Owner)(h.World.Get(e, oid)).Client = 0 })
}

// Replicated's fields are read when the entity's components change: a
// replaced Replicated (removed and added back in one tick) takes effect,
// without a despawn.
func TestReplicatedReplaced(t *testing.T) {
	h := harness.New(t, 1, sim.Link{}, nil)
	rid := ecs.ComponentID[components.Replicated](h.World)
	e := h.Spawn(0, components.Vec3{})
	h.Game = func(int) { h.Pos(e).X += 0.5 }
	h.Run(5)
	h.RequireConverged(nil)
	id, _ := h.Server.NetID(e)
	cs := h.Clients[0]
	m, _ := cs.Client.Entity(id)
	tid := ecs.ComponentID[components.Transform](cs.World)
	x := func() float64 { return (*components.Transform)(cs.World.Get(m, tid)).Pos.X }

	h.World.Remove(e, rid)
	h.World.Add(e, rid)
	(*components.Replicated)(h.World.Get(e, rid)).Dormant = true
	h.Run(3) // (the state of the tick it went dormant arrives)
	at := x()
	h.Run(10)
	require.Equal(t, at, x(), "a dormant entity's moves are not sent")
	still, ok := cs.Client.Entity(id)
	require.True(t, ok)
	require.Equal(t, m, still, "no despawn")
	h.Server.MarkDirty(e)
	h.Run(3)
	require.Greater(t, x(), at, "MarkDirty sends it")
}
