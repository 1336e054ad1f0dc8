package interp_test

import (
	"math"
	"testing"
	"time"

	arche "github.com/mlange-42/arche/ecs"
	"github.com/mlange-42/arche/generic"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/interp"
)

// BenchmarkSystem10k measures one interpolation frame over 10,000 entities,
// each holding 8 snapshots with the render tick in the middle of them.
func BenchmarkSystem10k(b *testing.B) {
	const entities = 10000
	clock, err := interp.NewClock(interp.ClockConfig{TickInterval: time.Second / 30})
	if err != nil {
		b.Fatal(err)
	}
	for k := range 30 {
		at := epoch.Add(time.Duration(k) * time.Second / 30)
		clock.Observe(uint32(1000+k), at)
		clock.Advance(at)
	}
	rt := clock.RenderTick()

	w := arche.NewWorld()
	m := generic.NewMap2[interp.Buffer, components.Visual](&w)
	q := m.NewBatchQ(entities)
	i := 0
	for q.Next() {
		buf, _ := q.Get()
		for k := -4; k < 4; k++ {
			tick := uint32(int64(rt)) + uint32(k)
			a := float64(i) + float64(k)/30
			buf.Push(tick, components.Vec3{X: 10 * math.Cos(a), Z: 10 * math.Sin(a)},
				components.QuatAxisAngle(components.Vec3{Y: 1}, a))
		}
		i++
	}
	sys := interp.NewSystem(clock, 0)
	sys.Initialize(&w)
	sys.Update(&w)
	if st := sys.Stats(); st.Interpolating != entities {
		b.Fatalf("stats %+v", st)
	}
	b.ReportAllocs()
	for b.Loop() {
		sys.Update(&w)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/entities, "ns/entity")
}

func BenchmarkBufferPushInOrder(b *testing.B) {
	var buf interp.Buffer
	rot := components.QuatAxisAngle(components.Vec3{Y: 1}, 0.3)
	var tick uint32
	b.ReportAllocs()
	for b.Loop() {
		tick++
		buf.Push(tick, components.Vec3{X: float64(tick)}, rot)
	}
}

func BenchmarkClockObserveAdvance(b *testing.B) {
	clock, err := interp.NewClock(interp.ClockConfig{TickInterval: time.Second / 30})
	if err != nil {
		b.Fatal(err)
	}
	var k int
	b.ReportAllocs()
	for b.Loop() {
		at := epoch.Add(time.Duration(k) * time.Second / 30)
		clock.Observe(uint32(k), at)
		clock.Advance(at)
		k++
	}
}
