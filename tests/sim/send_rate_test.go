package sim_test

import (
	"testing"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/tests/internal/harness"
	"github.com/archenet/archenet/transport/sim"
	"github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/require"
)

func TestSendRateDivisorAndDormancy(t *testing.T) {
	h := harness.New(t, 1, sim.Link{}, nil)
	rid := ecs.ComponentID[components.Replicated](h.World)
	slow := h.Spawn(0, components.Vec3{})
	(*components.Replicated)(h.World.Get(slow, rid)).SendEvery = 4
	dormant := h.Spawn(0, components.Vec3{})
	(*components.Replicated)(h.World.Get(dormant, rid)).Dormant = true
	h.World.Remove(dormant, rid) // re-add so the server sees the new Replicated value
	h.World.Add(dormant, rid)
	(*components.Replicated)(h.World.Get(dormant, rid)).Dormant = true
	h.World.Remove(slow, rid)
	h.World.Add(slow, rid)
	(*components.Replicated)(h.World.Get(slow, rid)).SendEvery = 4
	h.Run(3)
	cl := h.Clients[0]
	sid, _ := h.Server.NetID(slow)
	mirrorX := func(id components.NetID) float64 {
		e, ok := cl.Client.Entity(id)
		require.True(t, ok)
		return (*components.Transform)(cl.World.Get(e, ecs.ComponentID[components.Transform](cl.World))).Pos.X
	}
	changes := 0
	last := mirrorX(sid)
	for i := 0; i < 40; i++ {
		h.Pos(slow).X += 1 // moves every tick
		h.Step()
		if x := mirrorX(sid); x != last {
			changes++
			last = x
		}
	}
	require.InDelta(t, 10, changes, 1, "a SendEvery=4 entity updates every 4th net tick")
	h.Run(5)
	require.Equal(t, h.Pos(slow).X, mirrorX(sid))

	// Dormant: changes are not seen until MarkDirty.
	did, _ := h.Server.NetID(dormant)
	h.Pos(dormant).Z = 7
	h.Run(5)
	e, _ := cl.Client.Entity(did)
	require.Equal(t, 0.0, (*components.Transform)(cl.World.Get(e, ecs.ComponentID[components.Transform](cl.World))).Pos.Z)
	h.Server.MarkDirty(dormant)
	h.Run(2)
	require.Equal(t, 7.0, (*components.Transform)(cl.World.Get(e, ecs.ComponentID[components.Transform](cl.World))).Pos.Z)
}
