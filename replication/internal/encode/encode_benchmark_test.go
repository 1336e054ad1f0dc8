package encode

import (
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/internal/baseline"
	"github.com/archenet/archenet/replication/internal/entity"
	"github.com/archenet/archenet/replication/internal/receive"
	"github.com/archenet/archenet/replication/internal/store"
	"github.com/archenet/archenet/replication/internal/wire"
	"github.com/archenet/archenet/replication/schema"
)

type benchTransform struct {
	Pos components.Vec3 `net:"world,step=0.001"`
	Rot components.Quat `net:"quat,bits=10"`
}

type benchScene struct {
	reg  *schema.Registry
	w    *store.Ring
	ents []benchTransform
	rng  *rand.Rand
	ptrs []unsafe.Pointer
	tick uint32
}

func newBenchScene(n int) *benchScene {
	reg := schema.NewRegistry()
	schema.MustRegister[benchTransform](reg)
	s := &benchScene{reg: reg, w: store.New(reg, 0), ents: make([]benchTransform, n), rng: rand.New(rand.NewPCG(1, 2)), ptrs: make([]unsafe.Pointer, 1)}
	for i := range s.ents {
		s.ents[i] = benchTransform{
			Pos: components.Vec3{X: s.rng.Float64() * 1000, Y: 1, Z: s.rng.Float64() * 1000},
			Rot: components.QuatAxisAngle(components.Vec3{Y: 1}, s.rng.Float64()*6),
		}
	}
	return s
}

// tumbler returns a step that turns every body about an axis of its own
// and moves it on (wobble: its vertical speed changes with the tick), and
// commits a frame.
func (s *benchScene) tumbler(wobble bool) func() {
	spin := make([]components.Quat, len(s.ents))
	for i := range spin {
		axis := components.Vec3{X: s.rng.NormFloat64(), Y: s.rng.NormFloat64(), Z: s.rng.NormFloat64()}
		spin[i] = components.QuatAxisAngle(axis.Scale(1/axis.Len()), 0.05+s.rng.Float64()*0.1)
	}
	return func() {
		for i := range s.ents {
			e := &s.ents[i]
			y := float64(i%3-1) * 0.02
			if wobble {
				y *= float64(s.tick % 5)
			}
			e.Pos = e.Pos.Add(components.Vec3{X: 0.05 + float64(i%7)*0.01, Y: y, Z: 0.03})
			e.Rot = spin[i].Mul(e.Rot).Normalize()
		}
		s.commit()
	}
}

// step moves a fraction of the entities and commits a frame.
func (s *benchScene) step(moving float64) *store.Frame {
	for i := range s.ents {
		if s.rng.Float64() < moving {
			e := &s.ents[i]
			e.Pos.X += 0.1
			e.Rot = e.Rot.Mul(components.QuatAxisAngle(components.Vec3{Y: 1}, 0.02)).Normalize()
		}
	}
	f := s.commit()
	s.w.EndTick()
	return f
}

// commit puts every entity of the scene into the next tick's frame.
func (s *benchScene) commit() *store.Frame {
	s.tick++
	s.w.Begin(s.tick)
	for i := range s.ents {
		s.ptrs[0] = unsafe.Pointer(&s.ents[i])
		s.w.Put(uint32(i), entity.Meta{Set: 1}, s.ptrs)
	}
	return s.w.Commit()
}

// syncedClient returns a 1000-entity scene (10% moving per tick) with a
// client fully synced over 30 ticks, and one more tick committed.
func syncedClient(b *testing.B) (*benchScene, *Encoder, *baseline.Tracker, *receive.Receiver) {
	s := newBenchScene(1000)
	enc := newEncoder(s.w)
	c := baseline.NewTracker(0, 0)
	rcv := receive.NewReceiver(s.reg, 0, 0)
	var pk Packets
	for i := 0; i < 30; i++ {
		s.step(0.1)
		enc.Build(c, BuildOptions{Budget: 1 << 20}, &pk)
		for j := range pk.Len() {
			if _, err := rcv.Decode(pk.At(j)); err != nil {
				b.Fatal(err)
			}
		}
		c.Ack(ptr(rcv.Ack()))
	}
	s.step(0.1)
	return s, enc, c, rcv
}

// BenchmarkClientBuild: per-client datagram build for 1000 entities with 10%
// changed since the client's acked baseline, records already cached by an
// earlier client on the same baseline (the steady state of many clients),
// shared builds off (BenchmarkHighMotionBuild/shared has them).
func BenchmarkClientBuild(b *testing.B) {
	_, enc, c, _ := syncedClient(b)
	enc.NoShare = true
	other := c.Clone()
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

// BenchmarkHighMotionBuild: a client's datagrams for 250 tumbling bodies
// that all move every tick, acks 3 ticks behind. "encode": one client, so
// it encodes every record itself; "cached": a second client with the same
// acks, whose records the first one's Build encoded (the per-client cost of
// a server with many clients: selection, packing, stitching, bookkeeping,
// with shared builds off); "shared": the second client's Build repeats the
// first's (share.go: the copy, its header and its view).
func BenchmarkHighMotionBuild(b *testing.B) {
	b.Run("encode", func(b *testing.B) { benchHighMotion(b, 250, false, false, false) })
	b.Run("cached", func(b *testing.B) { benchHighMotion(b, 250, true, false, false) })
	b.Run("shared", func(b *testing.B) { benchHighMotion(b, 250, true, true, false) })
}

// BenchmarkHighMotionDecode: the client's side of BenchmarkHighMotionBuild/
// encode, decoding the tick's datagrams (the records of tumbling bodies,
// predicted from its views 3 ticks behind) into its view: 250 bodies, in
// one datagram a tick, and 2,000, in several.
func BenchmarkHighMotionDecode(b *testing.B) {
	b.Run("250", func(b *testing.B) { benchHighMotion(b, 250, false, false, true) })
	b.Run("2000", func(b *testing.B) { benchHighMotion(b, 2000, false, false, true) })
}

func benchHighMotion(b *testing.B, n int, cached, shared, decode bool) {
	const lag = 3
	s := newBenchScene(n)
	move := s.tumbler(false)
	enc := newEncoder(s.w)
	enc.NoShare = !shared
	c, twin := baseline.NewTracker(0, 0), baseline.NewTracker(0, 0)
	rcv := receive.NewReceiver(s.reg, 0, 0)
	var pk, twinPk Packets
	var acks []wire.Ack
	finish := func() {
		s.w.EndTick()
		if decode {
			b.StartTimer()
		}
		for j := range pk.Len() {
			if _, err := rcv.Decode(pk.At(j)); err != nil {
				b.Fatal(err)
			}
		}
		if decode {
			b.StopTimer()
		}
		acks = append(acks, rcv.Ack())
		if len(acks) > lag {
			c.Ack(&acks[len(acks)-1-lag])
			twin.Ack(&acks[len(acks)-1-lag])
		}
	}
	for range 40 {
		move()
		enc.Build(twin, BuildOptions{}, &twinPk)
		enc.Build(c, BuildOptions{}, &pk)
		finish()
	}
	records := 0
	b.ReportAllocs()
	b.StartTimer() // (finish stops it when it times decoding)
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		move()
		if cached {
			enc.Build(twin, BuildOptions{}, &twinPk)
		}
		if !decode {
			b.StartTimer()
		}
		info := enc.Build(c, BuildOptions{}, &pk)
		if !decode {
			b.StopTimer()
		}
		if shared && enc.SharedBuilds() == 0 {
			b.Fatal("the Build was not shared")
		}
		records += info.Deltas + info.Fulls
		finish()
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(records), "ns/record")
	b.ReportMetric(float64(records)/float64(b.N), "records")
}
