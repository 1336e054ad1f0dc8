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

func TestLateJoin(t *testing.T) {
	h := harness.New(t, 1, sim.Link{Up: sim.Conditions{Latency: 20e6}, Down: sim.Conditions{Latency: 20e6}}, nil)
	rng := rand.New(rand.NewPCG(1, 9))
	ents := make([]ecs.Entity, 300)
	for i := range ents {
		ents[i] = h.Spawn(0, components.Vec3{X: rng.Float64() * 100})
	}
	game := churn(h, rng, ents)
	h.Game = game
	h.Run(300)
	late := h.AddClient()
	ready := false
	late.Client.OnReady(func() { ready = true })
	for i := 0; i < 10 && !ready; i++ {
		h.Step()
	}
	require.True(t, ready, "late joiner ready within 10 ticks")
	h.Run(20)
	h.Game = nil
	h.Run(3)
	h.RequireConverged(nil)
	require.Equal(t, 300, late.Client.Mirrors())
}
