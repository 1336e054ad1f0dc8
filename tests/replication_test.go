package tests

import (
	"math/rand/v2"
	"testing"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/transport/sim"
	"github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/require"
)

func TestSpawnDespawnComponentChanges(t *testing.T) {
	h := newHarness(t, 2, sim.Link{}, nil)
	var ents []ecs.Entity
	for i := 0; i < 20; i++ {
		ents = append(ents, h.spawn(0, components.Vec3{X: float64(i)}))
	}
	h.run(5)
	for _, c := range h.clients {
		require.Equal(t, replication.StateReady, c.c.State(), "%v", c.c.Err())
	}
	h.requireConverged(nil)

	// Move, despawn, add and remove components.
	for i, e := range ents[:10] {
		(*components.Transform)(h.sw.Get(e, ecs.ComponentID[components.Transform](h.sw))).Pos.Y = float64(i) * 0.5
	}
	h.sw.RemoveEntity(ents[3])
	h.sw.Add(ents[4], ecs.ComponentID[Health](h.sw))
	(*Health)(h.sw.Get(ents[4], ecs.ComponentID[Health](h.sw))).HP = 77
	h.sw.Add(ents[5], ecs.ComponentID[Team](h.sw))
	h.run(3)
	h.requireConverged(nil)
	h.sw.Remove(ents[5], ecs.ComponentID[Team](h.sw))
	h.sw.Remove(ents[6], ecs.ComponentID[components.Replicated](h.sw)) // no longer replicated
	h.run(3)
	h.requireConverged(nil)
	require.Equal(t, 18, h.clients[0].c.Mirrors())
}

func TestConvergenceAfterLoss(t *testing.T) {
	lossy := sim.Conditions{Latency: 50e6, Jitter: 20e6, Loss: 0.2}
	h := newHarness(t, 3, sim.Link{Up: lossy, Down: lossy}, nil)
	rng := rand.New(rand.NewPCG(5, 5))
	var ents []ecs.Entity
	for i := 0; i < 200; i++ {
		ents = append(ents, h.spawn(0, components.Vec3{X: rng.Float64() * 100, Z: rng.Float64() * 100}))
	}
	tid := ecs.ComponentID[components.Transform](h.sw)
	moving := true
	h.game = func(tick int) {
		if !moving {
			return
		}
		for _, e := range ents {
			if !h.sw.Alive(e) {
				continue
			}
			if rng.IntN(10) == 0 {
				tr := (*components.Transform)(h.sw.Get(e, tid))
				tr.Pos.X += rng.Float64() - 0.5
			}
		}
		// Constant churn: despawn one, spawn one.
		if tick%3 == 0 {
			i := rng.IntN(len(ents))
			if h.sw.Alive(ents[i]) {
				h.sw.RemoveEntity(ents[i])
			}
			ents[i] = h.spawn(0, components.Vec3{X: rng.Float64() * 100})
		}
	}
	h.run(300)
	// Loss ends; movement continues for a while, then the world settles.
	for _, c := range h.clients {
		calm := lossy
		calm.Loss = 0
		c.conn.SetConditions(calm, calm)
	}
	h.run(30)
	moving = false
	// Latency 50 ms + jitter: state reaches the clients within 3 ticks.
	h.run(3)
	h.requireConverged(nil)
	for id := 1; id <= 3; id++ {
		ci, _ := h.srv.Client(uint8(id))
		t.Logf("server view of client %d: rtt %v, loss %.2f, budget %d B/s, %d B snapshots over %d ticks (%.0f B/s)",
			id, ci.RTT, ci.Loss, ci.BytesPerSecond, ci.SnapshotBytes, h.tick, float64(ci.SnapshotBytes)/float64(h.tick)*netRate)
	}
	for ci, c := range h.clients {
		st := c.c.Stats
		t.Logf("client %d: %d datagrams (%d dropped), %d B in (%d in datagrams, %d in messages), %d B out, %d spawns, %d despawns",
			ci, st.Datagrams, st.DatagramsDropped, st.BytesIn, st.DatagramBytesIn, st.MessageBytesIn, st.BytesOut, st.Spawns, st.Despawns)
		// The byte counters add up to what the transport carried, reliable
		// messages included.
		ts := c.conn.Stats()
		require.Equal(t, ts.DatagramBytesReceived, st.DatagramBytesIn)
		require.Equal(t, ts.MessageBytesReceived, st.MessageBytesIn)
		require.Equal(t, st.DatagramBytesIn+st.MessageBytesIn, st.BytesIn)
		require.Equal(t, ts.DatagramBytesSent+ts.MessageBytesSent, st.BytesOut)
		require.Greater(t, st.MessageBytesIn, uint64(0))
	}
}
