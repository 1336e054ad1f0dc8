package sim_test

import (
	"testing"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/tests/internal/harness"
	"github.com/archenet/archenet/transport/sim"
	"github.com/stretchr/testify/require"
)

// A server created after its simulation started numbers snapshots with the
// simulation's net ticks (ServerConfig.Tick), and clients turn them into
// simulation ticks with the divisor the Welcome carries.
func TestSimulationTicks(t *testing.T) {
	netTick := uint32(500) // where the simulation is when the server starts
	h := harness.New(t, 2, sim.Link{}, func(c *replication.ServerConfig) {
		c.NetDivisor = 3
		c.Tick = func() uint32 { return netTick }
	})
	e := h.Spawn(1, components.Vec3{})
	h.Game = func(int) { netTick++; h.Pos(e).X++ }
	h.Run(20)
	require.Equal(t, netTick, h.Server.Tick())
	for _, c := range h.Clients {
		require.Equal(t, 3, c.Client.NetDivisor())
		require.Equal(t, netTick, c.Client.ServerTick())
		require.Equal(t, uint64(netTick)*3, c.Client.SimTick(c.Client.ServerTick()))
		id, _ := h.Server.NetID(e)
		st, ok := c.Client.StateTick(id)
		require.True(t, ok)
		require.Equal(t, netTick, st, "the mirror's state is this net tick's")
	}
	late := h.AddClient() // welcomed at net tick 520
	h.Game = nil
	h.Run(5)
	h.RequireConverged(nil)
	require.Equal(t, 3, late.Client.NetDivisor())
	require.Equal(t, h.Server.Tick(), late.Client.ServerTick())

	// A tick source that stops advancing is overridden: net ticks keep
	// counting one per Send.
	before := h.Server.Tick()
	h.Run(3)
	require.Equal(t, before+3, h.Server.Tick())
}
