package sim_test

import (
	"testing"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/tests/internal/harness"
	"github.com/archenet/archenet/transport/sim"
	"github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/require"
)

func TestSpawnDespawnComponentChanges(t *testing.T) {
	h := harness.New(t, 2, sim.Link{}, nil)
	var ents []ecs.Entity
	for i := 0; i < 20; i++ {
		ents = append(ents, h.Spawn(0, components.Vec3{X: float64(i)}))
	}
	h.Run(5)
	for _, c := range h.Clients {
		require.Equal(t, replication.StateReady, c.Client.State(), "%v", c.Client.Err())
	}
	h.RequireConverged(nil)

	// Move, despawn, add and remove components.
	for i, e := range ents[:10] {
		(*components.Transform)(h.World.Get(e, ecs.ComponentID[components.Transform](h.World))).Pos.Y = float64(i) * 0.5
	}
	h.World.RemoveEntity(ents[3])
	h.World.Add(ents[4], ecs.ComponentID[harness.Health](h.World))
	(*harness.Health)(h.World.Get(ents[4], ecs.ComponentID[harness.Health](h.World))).HP = 77
	h.World.Add(ents[5], ecs.ComponentID[harness.Team](h.World))
	h.Run(3)
	h.RequireConverged(nil)
	h.World.Remove(ents[5], ecs.ComponentID[harness.Team](h.World))
	h.World.Remove(ents[6], ecs.ComponentID[components.Replicated](h.World)) // no longer replicated
	h.Run(3)
	h.RequireConverged(nil)
	require.Equal(t, 18, h.Clients[0].Client.Mirrors())
}
