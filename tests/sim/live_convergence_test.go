package sim_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/replicationtest"
	"github.com/archenet/archenet/tests/internal/harness"
	"github.com/archenet/archenet/transport/sim"
	"github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/require"
)

// While every entity moves every tick, over a lossy link, each client's
// mirrors equal the server's state at the tick of the state each shows
// (replicationtest.History); a mirror one quantization step off fails the
// check, naming it.
func TestLiveConvergence(t *testing.T) {
	c := sim.Conditions{Latency: 40 * time.Millisecond, Jitter: 10 * time.Millisecond, Loss: 0.05, Reorder: 0.05, ReorderDelay: 15 * time.Millisecond}
	h := harness.NewOn(t, sim.NewNetwork(21, harness.Epoch), sim.Link{Up: c, Down: c}, nil, nil)
	for range 2 {
		h.AddClient()
	}
	rng := rand.New(rand.NewPCG(21, 1))
	var ents []ecs.Entity
	for i := range 60 {
		ents = append(ents, h.Spawn(0, components.Vec3{X: float64(i)}))
	}
	h.Game = func(int) {
		for _, e := range ents {
			p := h.Pos(e)
			p.X += rng.Float64() - 0.5
			p.Z += rng.Float64() - 0.5
		}
	}
	hist := replicationtest.NewHistory(h.Registry, 32)
	compared, unchecked := 0, 0
	check := func() error {
		for _, cs := range h.Clients {
			r, err := hist.Check(replicationtest.LiveCheck{Client: cs.World, Me: cs.Client.ID(), StateTick: cs.Client.StateTick, SkipPredicted: true})
			if err != nil {
				return err
			}
			compared += r.Compared
			unchecked += r.Unchecked
		}
		return nil
	}
	for range 150 {
		h.Step()
		require.NoError(t, hist.Record(h.World, h.Server.NetID, h.Server.Tick()))
		require.NoError(t, check(), "tick %d", h.Server.Tick())
	}
	t.Logf("%d mirror states compared while moving, %d too old to check", compared, unchecked)
	require.Greater(t, compared, 2*60*100, "most mirrors are checked on most ticks")
	require.Zero(t, unchecked, "everything moves: every state shown is a recent one")

	// A mirror one step off.
	cs := h.Clients[0]
	id, _ := h.Server.NetID(ents[7])
	m, ok := cs.Client.Entity(id)
	require.True(t, ok)
	tid := ecs.ComponentID[components.Transform](cs.World)
	(*components.Transform)(cs.World.Get(m, tid)).Pos.X += 0.001
	err := check()
	require.Error(t, err)
	require.Contains(t, err.Error(), "differs from the server's by 1 steps")
	t.Log(err)
}
