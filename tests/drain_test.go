package tests

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/sim"
)

// TestServerDrain: a draining server tells its clients why and by when
// (Client.Draining), refuses a new client with transport.CodeDraining and
// its reason (Client.Err), keeps serving the connected ones, and ends them
// with the same code when the caller closes it.
func TestServerDrain(t *testing.T) {
	h := newHarness(t, 2, sim.Link{}, nil)
	h.spawn(0, components.Vec3{X: 1, Z: 1})
	h.run(10)
	for _, c := range h.clients {
		require.True(t, c.c.Ready())
		_, draining := c.c.Draining()
		require.False(t, draining)
	}
	deadline := h.net.Now().Add(30 * time.Second)
	h.srv.Drain("maintenance", deadline)
	require.True(t, h.srv.Draining())
	late := h.addClient()
	h.run(5)
	for _, c := range h.clients[:2] {
		d, ok := c.c.Draining()
		require.True(t, ok)
		require.Equal(t, "maintenance", d.Reason)
		require.Equal(t, 30*time.Second, d.Left)
		// Sent at the server's tick, heard a tick later.
		require.WithinDuration(t, deadline, d.Deadline, 2*tickDt)
		require.Equal(t, replication.StateReady, c.c.State())
	}
	require.Equal(t, replication.StateClosed, late.c.State())
	requireDrainCode(t, late.c.Err(), "server draining: maintenance")
	require.Contains(t, late.c.Err().Error(), "rejected by server: server draining: maintenance")

	require.NoError(t, h.srv.CloseWithReason(transport.CodeDraining, "server draining: maintenance"))
	h.run(3)
	for _, c := range h.clients[:2] {
		require.Equal(t, replication.StateClosed, c.c.State())
		requireDrainCode(t, c.c.Err(), "server draining: maintenance")
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
