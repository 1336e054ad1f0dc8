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

func TestInterestHysteresis(t *testing.T) {
	h := harness.New(t, 1, sim.Link{}, func(c *replication.ServerConfig) {
		c.Interest = &replication.Interest{Radius: 100}
	})
	avatar := h.Spawn(1, components.Vec3{}) // client 1's focus
	near := h.Spawn(0, components.Vec3{X: 50})
	far := h.Spawn(0, components.Vec3{X: 500})
	global := h.World.NewEntity(ecs.ComponentID[components.Replicated](h.World), ecs.ComponentID[harness.Team](h.World)) // no Transform
	h.Run(3)
	cl := h.Clients[0].Client
	has := func(e ecs.Entity) bool {
		id, _ := h.Server.NetID(e)
		_, ok := cl.Entity(id)
		return ok
	}
	require.True(t, has(avatar))
	require.True(t, has(near))
	require.False(t, has(far))
	require.True(t, has(global))
	relevant := func(_ int, e ecs.Entity) bool { return e != far }
	h.RequireConverged(relevant)

	// far approaches: spawned once inside 100 m.
	h.Pos(far).X = 99
	h.Run(2)
	require.True(t, has(far))
	spawns := cl.Stats.Spawns
	// Oscillating across the 100 m border does not flap (leave radius 115 m).
	for i := 0; i < 20; i++ {
		h.Pos(far).X = 99 + float64(i%2)*14
		h.Step()
		require.True(t, has(far))
	}
	require.Equal(t, spawns, cl.Stats.Spawns)
	// Beyond the leave radius it is despawned on this client.
	h.Pos(far).X = 120
	h.Run(2)
	require.False(t, has(far))
	require.True(t, h.World.Alive(far))
	// The focus follows the avatar.
	h.Pos(avatar).X = 480
	h.Pos(far).X = 500
	h.Run(2)
	require.True(t, has(far))
	require.False(t, has(near))
}
