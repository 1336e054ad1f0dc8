package replication

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/schema"
	"github.com/mlange-42/arche/ecs"
)

// BenchmarkServerFrame times the server's frame of a net tick without
// clients: every replicated entity's components read from the arche world,
// compared with their last raw bytes and, when moved, quantized; the
// interest grid fed with the positions and rebuilt every second tick. A
// quarter of the entities move every tick (the load test's scene); two
// workers share the frame, as in the load test. ns/entity is the figure.
func BenchmarkServerFrame(b *testing.B) {
	for _, n := range []int{2000, 50000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) { benchServerFrame(b, n) })
	}
}

func benchServerFrame(b *testing.B, n int) {
	reg := schema.NewRegistry()
	schema.MustRegister[components.Transform](reg)
	w := ecs.NewWorld()
	cfg := ServerConfig{Registry: reg, Interest: &Interest{Radius: 150}, Logger: quietLogger, Workers: 2}
	s, err := NewServer(&w, nil, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	rng := rand.New(rand.NewPCG(1, 2))
	trID := ecs.ComponentID[components.Transform](&w)
	ids := []ecs.ID{ecs.ComponentID[components.Replicated](&w), trID}
	trs := make([]*components.Transform, n)
	for i := range trs {
		e := w.NewEntity(ids...)
		trs[i] = (*components.Transform)(w.Get(e, trID))
		trs[i].Pos = components.Vec3{X: rng.Float64() * 4096, Z: rng.Float64() * 4096}
		trs[i].Rot = components.QuatIdentity()
	}
	tick := func() {
		for i := range n / 4 {
			tr := trs[(i*4+int(s.tick))%n]
			tr.Pos.X += 0.01 + float64(i%7)*0.003
			tr.Pos.Z += 0.02
		}
		s.gang.wake()
		s.commitTick()
		s.gang.rest()
		s.endTick()
	}
	for range 2 * s.snap.Depth() { // (every frame of the ring built once: no allocation after)
		tick()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		tick()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/entity")
}
