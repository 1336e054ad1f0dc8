package store

import (
	"testing"
	"unsafe"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/internal/entity"
)

func benchWorld(b *testing.B, moving float64) {
	s := newScene(2000)
	for i := 0; i < 40; i++ {
		s.step(moving)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		s.step(moving)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/2000, "ns/entity")
}

// BenchmarkFrameBuildMoving: 2000 transform entities, all moving: every
// entity is quantized each tick (the move itself is included).
func BenchmarkFrameBuildMoving(b *testing.B) { benchWorld(b, 1) }

// BenchmarkFrameBuild25: 25% moving; resting entities reuse their lanes
// through the raw-bytes cache.
func BenchmarkFrameBuild25(b *testing.B) { benchWorld(b, 0.25) }

// BenchmarkRingMemory reports the memory of a 32-tick ring of 2000
// transform entities (frames, lanes, per-slot indexes and caches).
func BenchmarkRingMemory(b *testing.B) {
	s := newScene(2000)
	for i := 0; i < 40; i++ {
		s.step(0.25)
	}
	for b.Loop() {
		s.step(0.25)
	}
	b.ReportMetric(float64(s.w.MemoryBytes()), "ring-bytes")
}

// frameScene holds two states of n transform entities that differ in every
// entity, so a frame build can alternate between them with the scene's own
// motion outside the timing.
func frameScene(n int) (*Ring, [2][]transform) {
	s := newScene(n)
	var states [2][]transform
	states[0] = append([]transform(nil), s.ents...)
	states[1] = append([]transform(nil), s.ents...)
	for i := range states[1] {
		e := &states[1][i]
		e.Pos.X += 0.1
		e.Rot = e.Rot.Mul(components.QuatAxisAngle(components.Vec3{Y: 1}, 0.02)).Normalize()
	}
	return s.w, states
}

func benchFrame(b *testing.B, change bool) {
	const n = 2000
	w, states := frameScene(n)
	ptrs := make([]unsafe.Pointer, 1)
	tick := uint32(0)
	build := func(st []transform) {
		tick++
		w.Begin(tick)
		for i := range st {
			ptrs[0] = unsafe.Pointer(&st[i])
			w.Put(uint32(i), entity.Meta{Set: 1}, ptrs)
		}
		w.Commit()
		w.EndTick()
	}
	for range 40 {
		build(states[tick%2])
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		st := states[0]
		if change {
			st = states[tick%2]
		}
		build(st)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/entity")
}

// BenchmarkFrameUnchanged: one frame of 2000 transform entities of which
// none changed since the last frame (per-entity cost of the frame build).
func BenchmarkFrameUnchanged(b *testing.B) { benchFrame(b, false) }

// BenchmarkFrameChanged: one frame of 2000 transform entities that all
// changed: each is quantized and compared (the motion is precomputed).
func BenchmarkFrameChanged(b *testing.B) { benchFrame(b, true) }
