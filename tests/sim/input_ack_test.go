package sim_test

import (
	"testing"
	"time"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/tests/internal/harness"
	"github.com/archenet/archenet/transport/sim"
	"github.com/stretchr/testify/require"
)

// The server's input feedback rides with the input ack in every snapshot
// datagram, and the client reads each report from OnSnapshot.
func TestInputFeedbackReachesClient(t *testing.T) {
	sent := map[uint32]int{} // server tick → depth sent to client 1
	var h *harness.Harness
	h = harness.New(t, 0, sim.Link{}, func(c *replication.ServerConfig) {
		c.InputAck = func(id uint8) (uint32, bool) { return 40 + h.Server.Tick(), id == 1 }
		c.InputFeedback = func(id uint8) (uint32, int, bool) {
			d := int(h.Server.Tick()%9) - 3 // −3..5
			sent[h.Server.Tick()] = d
			return 45 + h.Server.Tick(), d, true
		}
	})
	var got []replication.InputReport
	var ticks []uint32
	var c *harness.ClientSide
	h.ClientConfig = func(cfg *replication.ClientConfig) {
		cfg.OnSnapshot = func(tick uint32, _ time.Time) {
			r, ok := c.Client.InputReport(tick)
			require.True(t, ok && r.HasFeedback, "tick %d", tick)
			got, ticks = append(got, r), append(ticks, tick)
		}
	}
	c = h.AddClient()
	e := h.Spawn(1, components.Vec3{})
	h.Game = func(tick int) { h.Pos(e).X = float64(tick) } // something changes every tick
	h.Run(30)
	require.GreaterOrEqual(t, len(got), 25)
	negative := false
	for i, r := range got {
		tick := ticks[i]
		want, ok := sent[tick]
		require.True(t, ok, "tick %d was not sent", tick)
		require.Equal(t, replication.InputReport{Applied: 40 + tick, Held: 45 + tick, Depth: want, HasFeedback: true}, r, "tick %d", tick)
		negative = negative || r.Depth < 0
	}
	require.True(t, negative, "negative depths arrive too")
	_, ok := c.Client.InputReport(ticks[0] - 100)
	require.False(t, ok, "a tick the client does not hold")
}

func TestInputAckReachesClient(t *testing.T) {
	applied := map[uint8]uint32{}
	h := harness.New(t, 2, sim.Link{}, func(c *replication.ServerConfig) {
		c.InputAck = func(id uint8) (uint32, bool) { v, ok := applied[id]; return v, ok }
	})
	h.Spawn(1, components.Vec3{})
	h.Run(3)
	_, _, ok := h.Clients[0].Client.InputAck()
	require.False(t, ok)
	applied[1] = 500
	h.Game = func(tick int) { applied[1]++ }
	h.Run(3)
	in, st, ok := h.Clients[0].Client.InputAck()
	require.True(t, ok)
	require.Equal(t, uint32(503), in)
	require.Equal(t, h.Server.Tick(), st)
	// The mirror's state tick is the tick of the snapshot that last changed it.
	e := h.Spawn(0, components.Vec3{})
	h.Run(2)
	id, _ := h.Server.NetID(e)
	before, ok := h.Clients[0].Client.StateTick(id)
	require.True(t, ok)
	h.Pos(e).X = 3
	h.Run(1)
	after, ok := h.Clients[0].Client.StateTick(id)
	require.True(t, ok)
	require.Equal(t, h.Server.Tick(), after)
	require.Less(t, before, after)

	_, _, ok = h.Clients[1].Client.InputAck()
	require.False(t, ok, "only client 1 has an input ack")
}
