package snapshot

import (
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/schema"
)

type benchTransform struct {
	Pos components.Vec3 `net:"world,step=0.001"`
	Rot components.Quat `net:"quat,bits=10"`
}

type benchScene struct {
	reg  *schema.Registry
	w    *World
	ents []benchTransform
	rng  *rand.Rand
	ptrs []unsafe.Pointer
	tick uint32
}

func newBenchScene(n int) *benchScene {
	reg := schema.NewRegistry()
	schema.MustRegister[benchTransform](reg)
	s := &benchScene{reg: reg, w: NewWorld(reg, 0), ents: make([]benchTransform, n), rng: rand.New(rand.NewPCG(1, 2)), ptrs: make([]unsafe.Pointer, 1)}
	for i := range s.ents {
		s.ents[i] = benchTransform{
			Pos: components.Vec3{X: s.rng.Float64() * 1000, Y: 1, Z: s.rng.Float64() * 1000},
			Rot: components.QuatAxisAngle(components.Vec3{Y: 1}, s.rng.Float64()*6),
		}
	}
	return s
}

// step moves a fraction of the entities and commits a frame.
func (s *benchScene) step(moving float64) *Frame {
	for i := range s.ents {
		if s.rng.Float64() < moving {
			e := &s.ents[i]
			e.Pos.X += 0.1
			e.Rot = e.Rot.Mul(components.QuatAxisAngle(components.Vec3{Y: 1}, 0.02)).Normalize()
		}
	}
	s.tick++
	s.w.Begin(s.tick)
	for i := range s.ents {
		s.ptrs[0] = unsafe.Pointer(&s.ents[i])
		s.w.Put(uint32(i), Meta{Set: 1}, s.ptrs)
	}
	f := s.w.Commit()
	s.w.EndTick()
	return f
}

func benchWorld(b *testing.B, moving float64) {
	s := newBenchScene(2000)
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

// BenchmarkSnapshotBuildMoving: 2000 transform entities, all moving: every
// entity is quantized each tick (the move itself is included).
func BenchmarkSnapshotBuildMoving(b *testing.B) { benchWorld(b, 1) }

// BenchmarkSnapshotBuild25: 25% moving; resting entities reuse their lanes
// through the raw-bytes cache.
func BenchmarkSnapshotBuild25(b *testing.B) { benchWorld(b, 0.25) }

// syncedClient returns a 1000-entity scene (10% moving per tick) with a
// client fully synced over 30 ticks, and one more tick committed.
func syncedClient(b *testing.B) (*benchScene, *Encoder, *Client, *Receiver) {
	s := newBenchScene(1000)
	enc := NewEncoder(s.w)
	c := NewClient(0, 0)
	rcv := NewReceiver(s.reg, 0, 0)
	var pk Packets
	for i := 0; i < 30; i++ {
		s.step(0.1)
		enc.Build(c, BuildOptions{Budget: 1 << 20}, &pk)
		for j := range pk.Len() {
			if _, err := rcv.Decode(pk.At(j)); err != nil {
				b.Fatal(err)
			}
		}
		c.Ack(rcv.Ack())
	}
	s.step(0.1)
	return s, enc, c, rcv
}

// BenchmarkClientBuild: per-client datagram build for 1000 entities with 10%
// changed since the client's acked baseline, records already cached by an
// earlier client on the same baseline (the steady state of many clients).
func BenchmarkClientBuild(b *testing.B) {
	_, enc, c, _ := syncedClient(b)
	other := NewClient(0, 0)
	*other = *c
	other.views = append([]view(nil), c.views...)
	var pk Packets
	info := enc.Build(other, BuildOptions{}, &pk) // warms the record cache
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		info = enc.Build(c, BuildOptions{}, &pk)
	}
	b.ReportMetric(float64(info.Deltas), "records")
	b.ReportMetric(float64(pk.Bytes()), "bytes")
}

// BenchmarkReceiverDecode: the client side of BenchmarkClientBuild.
func BenchmarkReceiverDecode(b *testing.B) {
	s, enc, c, rcv := syncedClient(b)
	var pk Packets
	enc.Build(c, BuildOptions{}, &pk)
	if pk.Len() != 1 {
		b.Fatalf("%d datagrams", pk.Len())
	}
	S := s.tick
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		rcv.ring[S%uint32(len(rcv.ring))].valid = false // decode the same datagram again
		if _, err := rcv.Decode(pk.At(0)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRingMemory reports the memory of a 32-tick ring of 2000
// transform entities (frames, lanes, per-slot indexes and caches).
func BenchmarkRingMemory(b *testing.B) {
	s := newBenchScene(2000)
	for i := 0; i < 40; i++ {
		s.step(0.25)
	}
	for b.Loop() {
		s.step(0.25)
	}
	b.ReportMetric(float64(s.w.MemoryBytes()), "ring-bytes")
}
