package sim_test

import (
	"math/rand/v2"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/tests/internal/harness"
	"github.com/mlange-42/arche/ecs"
)

// churn moves 10% of ents each tick and replaces one entity every 3 ticks.
func churn(h *harness.Harness, rng *rand.Rand, ents []ecs.Entity) func(int) {
	return func(tick int) {
		for _, e := range ents {
			if h.World.Alive(e) && rng.IntN(10) == 0 {
				h.Pos(e).X += rng.Float64() - 0.5
			}
		}
		if tick%3 == 0 {
			i := rng.IntN(len(ents))
			if h.World.Alive(ents[i]) {
				h.World.RemoveEntity(ents[i])
			}
			ents[i] = h.Spawn(0, components.Vec3{X: rng.Float64() * 100})
		}
	}
}
