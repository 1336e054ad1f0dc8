package sim_test

import (
	"testing"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/tests/internal/harness"
	"github.com/archenet/archenet/transport/sim"
	"github.com/stretchr/testify/require"
)

func TestHandleReuseAndStaleReferences(t *testing.T) {
	h := harness.New(t, 1, sim.Link{}, nil)
	a := h.Spawn(0, components.Vec3{X: 1})
	b := h.Spawn(0, components.Vec3{X: 2})
	h.Run(3)
	oldID, ok := h.Server.NetID(a)
	require.True(t, ok)
	oldMirror, ok := h.Clients[0].Client.Entity(oldID)
	require.True(t, ok)

	// Despawn a and spawn c in the same tick: c reuses a's slot with the next
	// generation, well within the ring window.
	h.World.RemoveEntity(a)
	h.Run(1)
	c := h.Spawn(0, components.Vec3{X: 999, Y: 5})
	h.Run(1)
	newID, ok := h.Server.NetID(c)
	require.True(t, ok)
	require.Equal(t, oldID.Index(), newID.Index(), "slot reused")
	require.Equal(t, oldID.Gen+1, newID.Gen)
	h.Run(3)
	h.RequireConverged(nil)
	newMirror, ok := h.Clients[0].Client.Entity(newID)
	require.True(t, ok)
	require.NotEqual(t, oldMirror, newMirror, "a new mirror, not the old one moved")
	require.False(t, h.Clients[0].World.Alive(oldMirror))
	_, ok = h.Clients[0].Client.Entity(oldID)
	require.False(t, ok)

	// Stale references are rejected before any state change.
	_, ok = h.Server.Resolve(oldID)
	require.False(t, ok, "stale generation")
	e, ok := h.Server.Resolve(newID)
	require.True(t, ok)
	require.Equal(t, c, e)
	forged := newID
	forged.Handle = components.MakeHandle(7, newID.Index())
	_, ok = h.Server.Resolve(forged)
	require.False(t, ok, "wrong owner bits")
	bid, _ := h.Server.NetID(b)
	_, ok = h.Server.Resolve(components.NetID{Handle: bid.Handle + 1000, Gen: 0})
	require.False(t, ok, "unknown slot")
}
