package harness

import (
	"math/rand/v2"

	"github.com/archenet/archenet/components"
	"github.com/mlange-42/arche/ecs"
)

// SpawnChurn moves every entity of ents each tick and replaces n of them
// (a despawn and a spawn each): heavy reliable traffic.
func SpawnChurn(h *Harness, ents []ecs.Entity, n int, rng *rand.Rand) func(int) {
	return func(tick int) {
		for _, e := range ents {
			h.Pos(e).X += 0.05
		}
		for range n {
			i := rng.IntN(len(ents))
			h.World.RemoveEntity(ents[i])
			ents[i] = h.Spawn(0, components.Vec3{X: rng.Float64() * 100, Z: rng.Float64() * 100})
		}
	}
}
