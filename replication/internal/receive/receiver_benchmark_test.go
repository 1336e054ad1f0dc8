package receive

import (
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/internal/baseline"
	"github.com/archenet/archenet/replication/internal/encode"
	"github.com/archenet/archenet/replication/internal/entity"
	"github.com/archenet/archenet/replication/internal/store"
	"github.com/archenet/archenet/replication/schema"
)

type benchTransform struct {
	Pos components.Vec3 `net:"world,step=0.001"`
	Rot components.Quat `net:"quat,bits=10"`
}

// BenchmarkReceiverDecode: decoding one datagram of 1000 transform
// entities of which 10% changed since the acked baseline (the client side
// of encode's BenchmarkClientBuild).
func BenchmarkReceiverDecode(b *testing.B) {
	reg := schema.NewRegistry()
	schema.MustRegister[benchTransform](reg)
	ring := store.New(reg, 0)
	enc := encode.NewGroup(ring).NewEncoder()
	c := baseline.NewTracker(0, 0)
	rcv := NewReceiver(reg, 0, 0)
	rng := rand.New(rand.NewPCG(1, 2))
	ents := make([]benchTransform, 1000)
	for i := range ents {
		ents[i] = benchTransform{Pos: components.Vec3{X: rng.Float64() * 1000, Y: 1, Z: rng.Float64() * 1000},
			Rot: components.QuatAxisAngle(components.Vec3{Y: 1}, rng.Float64()*6)}
	}
	ptrs := make([]unsafe.Pointer, 1)
	var pk encode.Packets
	tick := uint32(0)
	step := func(opt encode.BuildOptions) {
		for i := range ents {
			if rng.Float64() < 0.1 {
				ents[i].Pos.X += 0.1
				ents[i].Rot = ents[i].Rot.Mul(components.QuatAxisAngle(components.Vec3{Y: 1}, 0.02)).Normalize()
			}
		}
		tick++
		ring.Begin(tick)
		for i := range ents {
			ptrs[0] = unsafe.Pointer(&ents[i])
			ring.Put(uint32(i), entity.Meta{Set: 1}, ptrs)
		}
		ring.Commit()
		enc.Build(c, opt, &pk)
		ring.EndTick()
	}
	for range 30 {
		step(encode.BuildOptions{Budget: 1 << 20})
		for j := range pk.Len() {
			if _, err := rcv.Decode(pk.At(j)); err != nil {
				b.Fatal(err)
			}
		}
		a := rcv.Ack()
		c.Ack(&a)
	}
	step(encode.BuildOptions{})
	if pk.Len() != 1 {
		b.Fatalf("%d datagrams", pk.Len())
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		rcv.ring[tick%uint32(len(rcv.ring))].valid = false // decode the same datagram again
		if _, err := rcv.Decode(pk.At(0)); err != nil {
			b.Fatal(err)
		}
	}
}
