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
	tick := newFrameRig(b, n)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		tick()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/entity")
}

// TestServerFrameAllocatesNothing: once the ring of frames is built, a net
// tick's frame — built on two workers, with the interest grid rebuilt —
// allocates nothing (the workers' jobs are made once, their state kept in
// the Server), with the frame built by the workers and by the caller alone.
func TestServerFrameAllocatesNothing(t *testing.T) {
	for _, n := range []int{300, 5000} {
		tick := newFrameRig(t, n)
		if allocs := testing.AllocsPerRun(20, tick); allocs != 0 {
			t.Errorf("%d entities: %v allocations per tick", n, allocs)
		}
	}
}

// newFrameRig returns a server of n replicated entities in a 4096 m world
// (interest radius 150 m, two workers), warmed up, and its net tick
// without clients: a quarter of the entities move, then the frame.
func newFrameRig(tb testing.TB, n int) (tick func()) {
	reg := schema.NewRegistry()
	schema.MustRegister[components.Transform](reg)
	w := ecs.NewWorld()
	cfg := ServerConfig{Registry: reg, Interest: &Interest{Radius: 150}, Logger: quietLogger, Workers: 2}
	s, err := NewServer(&w, nil, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = s.Close() })
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
	tick = func() {
		for i := range n / 4 {
			tr := trs[(i*4+int(s.tick))%n]
			tr.Pos.X += 0.01 + float64(i%7)*0.003
			tr.Pos.Z += 0.02
		}
		s.work.gang.Wake()
		s.commitTick()
		s.work.gang.Rest()
		s.endTick()
	}
	for range 2 * s.ring.Depth() { // (every frame of the ring built once: no allocation after)
		tick()
	}
	return tick
}
