package peer

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/internal/entity"
	"github.com/archenet/archenet/replication/internal/wire"
)

// BenchmarkPeerTick times the server's per-client work of a net tick — a
// peer's tick: acks taken in, loss judged, spawn diff, candidates, record
// encoding (through the worker's cache, shared by the peers), selection,
// packing, the view recorded — for many clients on one worker, without a
// Server, a transport or clients decoding. Every client sees relevant
// random entities of a world of n, a quarter of which move every tick; its
// acks come back two ticks later. ns/peer-tick is the figure; the
// 254-client case is the load test's per-client phase without its clients.
func BenchmarkPeerTick(b *testing.B) {
	for _, c := range []struct{ entities, peers, relevant int }{{2000, 254, 150}, {50000, 64, 3500}} {
		b.Run(fmt.Sprintf("%dx%d", c.peers, c.entities), func(b *testing.B) { benchPeerTick(b, c.entities, c.peers, c.relevant) })
	}
}

func benchPeerTick(b *testing.B, n, peers, relevant int) {
	r := newPeerRig(b)
	rng := rand.New(rand.NewPCG(1, 2))
	for range n {
		r.spawn(components.Vec3{X: rng.Float64() * 1000, Z: rng.Float64() * 1000})
	}
	rel := make([]entity.Bitset, peers+1)
	for id := 1; id <= peers; id++ {
		r.addPeer(uint8(id))
		for range relevant {
			rel[id].Set(uint32(rng.IntN(n)))
		}
	}
	r.relevant = func(p *Peer) (entity.Bitset, bool) { return rel[p.ID], r.tick%2 == 0 }
	var acks [][]byte // per peer, the ack of two ticks ago
	var ackBufs [3][][]byte
	for i := range ackBufs {
		ackBufs[i] = make([][]byte, peers)
	}
	tick := func() {
		for i := range n / 4 {
			r.values[i].Pos.X += 0.01 + float64(i%7)*0.003
			r.values[i].Pos.Z += 0.02
		}
		r.commit(33 * time.Millisecond)
		if acks = ackBufs[r.tick%3]; r.tick > 2 {
			for i, p := range r.peers {
				if err := p.Receive(acks[i], r.now, r.tick); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	ack := func() { // what each client will ack two ticks from now
		next := ackBufs[(r.tick+2)%3]
		for i := range r.peers {
			a := wire.Ack{Newest: r.tick, Mask: ^uint32(0)}
			next[i] = wire.AppendClientHeader(next[i][:0], &a)
		}
	}
	for range 40 {
		tick()
		r.tickPeers()
		ack()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		tick()
		b.StartTimer()
		r.tickPeers()
		b.StopTimer()
		ack()
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*peers), "ns/peer-tick")
	var state int
	for _, p := range r.peers {
		state += p.MemoryBytes()
	}
	b.ReportMetric(float64(state)/float64(peers), "state-B/peer")
}
