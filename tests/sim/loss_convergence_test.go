package sim_test

import (
	"math/rand/v2"
	"testing"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/tests/internal/harness"
	"github.com/archenet/archenet/transport/sim"
	"github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/require"
)

func TestConvergenceAfterLoss(t *testing.T) {
	lossy := sim.Conditions{Latency: 50e6, Jitter: 20e6, Loss: 0.2}
	h := harness.New(t, 3, sim.Link{Up: lossy, Down: lossy}, nil)
	rng := rand.New(rand.NewPCG(5, 5))
	var ents []ecs.Entity
	for i := 0; i < 200; i++ {
		ents = append(ents, h.Spawn(0, components.Vec3{X: rng.Float64() * 100, Z: rng.Float64() * 100}))
	}
	tid := ecs.ComponentID[components.Transform](h.World)
	moving := true
	h.Game = func(tick int) {
		if !moving {
			return
		}
		for _, e := range ents {
			if !h.World.Alive(e) {
				continue
			}
			if rng.IntN(10) == 0 {
				tr := (*components.Transform)(h.World.Get(e, tid))
				tr.Pos.X += rng.Float64() - 0.5
			}
		}
		// Constant churn: despawn one, spawn one.
		if tick%3 == 0 {
			i := rng.IntN(len(ents))
			if h.World.Alive(ents[i]) {
				h.World.RemoveEntity(ents[i])
			}
			ents[i] = h.Spawn(0, components.Vec3{X: rng.Float64() * 100})
		}
	}
	h.Run(300)
	// Loss ends; movement continues for a while, then the world settles.
	for _, c := range h.Clients {
		calm := lossy
		calm.Loss = 0
		c.Conn.SetConditions(calm, calm)
	}
	h.Run(30)
	moving = false
	// Latency 50 ms + jitter: state reaches the clients within 3 ticks.
	h.Run(3)
	h.RequireConverged(nil)
	for id := 1; id <= 3; id++ {
		ci, _ := h.Server.Client(uint8(id))
		t.Logf("server view of client %d: rtt %v, loss %.2f, budget %d B/s, %d B snapshots over %d ticks (%.0f B/s)",
			id, ci.RTT, ci.Loss, ci.BytesPerSecond, ci.SnapshotBytes, h.Tick, float64(ci.SnapshotBytes)/float64(h.Tick)*harness.NetRate)
	}
	for ci, c := range h.Clients {
		st := c.Client.Stats
		t.Logf("client %d: %d datagrams (%d dropped), %d B in (%d in datagrams, %d in messages), %d B out, %d spawns, %d despawns",
			ci, st.Datagrams, st.DatagramsDropped, st.BytesIn, st.DatagramBytesIn, st.MessageBytesIn, st.BytesOut, st.Spawns, st.Despawns)
		// The byte counters add up to what the transport carried, reliable
		// messages included.
		ts := c.Conn.Stats()
		require.Equal(t, ts.DatagramBytesReceived, st.DatagramBytesIn)
		require.Equal(t, ts.MessageBytesReceived, st.MessageBytesIn)
		require.Equal(t, st.DatagramBytesIn+st.MessageBytesIn, st.BytesIn)
		require.Equal(t, ts.DatagramBytesSent+ts.MessageBytesSent, st.BytesOut)
		require.Greater(t, st.MessageBytesIn, uint64(0))
	}
}
