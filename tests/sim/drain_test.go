package sim_test

import (
	"testing"
	"time"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/tests/internal/harness"
	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/sim"
	"github.com/stretchr/testify/require"
)

// TestServerDrain: a draining server tells its clients why and by when
// (Client.Draining), refuses a new client with transport.CodeDraining and
// its reason (Client.Err), keeps serving the connected ones, and ends them
// with the same code when the caller closes it.
func TestServerDrain(t *testing.T) {
	h := harness.New(t, 2, sim.Link{}, nil)
	h.Spawn(0, components.Vec3{X: 1, Z: 1})
	h.Run(10)
	for _, c := range h.Clients {
		require.True(t, c.Client.Ready())
		_, draining := c.Client.Draining()
		require.False(t, draining)
	}
	deadline := h.Net.Now().Add(30 * time.Second)
	h.Server.Drain("maintenance", deadline)
	require.True(t, h.Server.Draining())
	late := h.AddClient()
	h.Run(5)
	for _, c := range h.Clients[:2] {
		d, ok := c.Client.Draining()
		require.True(t, ok)
		require.Equal(t, "maintenance", d.Reason)
		require.Equal(t, 30*time.Second, d.Left)
		// Sent at the server's tick, heard a tick later.
		require.WithinDuration(t, deadline, d.Deadline, 2*harness.TickDt)
		require.Equal(t, replication.StateReady, c.Client.State())
	}
	require.Equal(t, replication.StateClosed, late.Client.State())
	requireDrainCode(t, late.Client.Err(), "server draining: maintenance")
	require.Contains(t, late.Client.Err().Error(), "rejected by server: server draining: maintenance")

	require.NoError(t, h.Server.CloseWithReason(transport.CodeDraining, "server draining: maintenance"))
	h.Run(3)
	for _, c := range h.Clients[:2] {
		require.Equal(t, replication.StateClosed, c.Client.State())
		requireDrainCode(t, c.Client.Err(), "server draining: maintenance")
	}
}

func requireDrainCode(t *testing.T, err error, reason string) {
	t.Helper()
	var ce *transport.CloseError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, transport.CodeDraining, ce.Code, err.Error())
	require.Equal(t, reason, ce.Reason)
	require.True(t, ce.Remote)
}
