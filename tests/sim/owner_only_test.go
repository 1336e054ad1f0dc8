package sim_test

import (
	"testing"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/tests/internal/harness"
	"github.com/archenet/archenet/transport/sim"
	"github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/require"
)

func TestOwnerOnlyFields(t *testing.T) {
	h := harness.New(t, 2, sim.Link{}, nil)
	hid := ecs.ComponentID[harness.Health](h.World)
	mine := h.Spawn(1, components.Vec3{}, hid)
	*(*harness.Health)(h.World.Get(mine, hid)) = harness.Health{HP: 90, Ammo: 33}
	h.Run(3)
	h.RequireConverged(nil) // compares owner-only lanes for the owner, zero for others
	id, _ := h.Server.NetID(mine)
	for ci, want := range []uint16{33, 0} {
		cs := h.Clients[ci]
		require.Equal(t, uint8(ci+1), cs.Client.ID())
		e, ok := cs.Client.Entity(id)
		require.True(t, ok)
		hp := (*harness.Health)(cs.World.Get(e, ecs.ComponentID[harness.Health](cs.World)))
		require.Equal(t, int16(90), hp.HP)
		require.Equal(t, want, hp.Ammo, "client %d", ci+1)
	}
	// Changes of the owner-only field reach only the owner.
	for i := 0; i < 20; i++ {
		(*harness.Health)(h.World.Get(mine, hid)).Ammo--
		h.Step()
		e, _ := h.Clients[1].Client.Entity(id)
		require.Equal(t, uint16(0), (*harness.Health)(h.Clients[1].World.Get(e, ecs.ComponentID[harness.Health](h.Clients[1].World))).Ammo)
	}
	h.Run(2)
	h.RequireConverged(nil)
	e, _ := h.Clients[0].Client.Entity(id)
	require.Equal(t, uint16(13), (*harness.Health)(h.Clients[0].World.Get(e, ecs.ComponentID[harness.Health](h.Clients[0].World))).Ammo)
}
