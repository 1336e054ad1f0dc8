package sim_test

import (
	"testing"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/tests/internal/harness"
	"github.com/archenet/archenet/transport/sim"
	"github.com/mlange-42/arche/ecs"
)

// BenchmarkMessages times a net tick of a server with 8 clients and 64
// entities over the simulated network (server, network and clients), with
// no game messages and with 8 server messages a tick (4 broadcasts, 4
// about an entity, each naming it) and 2 messages from each client, sent
// reliable or unreliable: the difference is the messages' cost, per tick
// and per message delivered (ns/msg), with the allocations per tick.
func BenchmarkMessages(b *testing.B) {
	for _, mode := range []string{"none", "reliable", "unreliable"} {
		b.Run(mode, func(b *testing.B) {
			h := harness.New(b, 8, sim.Link{}, nil)
			var es []ecs.Entity
			for i := range 64 {
				es = append(es, h.Spawn(0, components.Vec3{X: float64(i)}))
			}
			hits, _ := replication.ServerMessages[harness.Hit](h.Server)
			uses, _ := replication.ServerMessages[harness.Use](h.Server)
			var eps []*replication.ClientEndpoint[harness.Use]
			for _, cs := range h.Clients {
				ep, _ := replication.ClientMessages[harness.Use](cs.Client)
				eps = append(eps, ep)
				hp, _ := replication.ClientMessages[harness.Hit](cs.Client)
				hp.Handle(func(replication.Message[harness.Hit]) {})
			}
			uses.Handle(func(replication.Message[harness.Use]) {})
			d := replication.Reliable
			if mode == "unreliable" {
				d = replication.Unreliable
			}
			tick := 0
			step := func() {
				tick++
				for i := range 32 {
					*h.Pos(es[(tick*32+i)%64]) = components.Vec3{X: float64(tick % 100), Z: float64(i)}
				}
				if mode != "none" {
					for i := range 4 {
						e := es[(tick+i)%64]
						_ = hits.Broadcast(harness.Hit{Damage: int16(i), Seq: uint32(tick)}, d)
						_ = hits.SendAbout(e, harness.Hit{Target: components.RefTo(e), Damage: 5, Seq: uint32(tick)}, d)
					}
					for ci, ep := range eps {
						cs := h.Clients[ci]
						id, _ := h.Server.NetID(es[tick%64])
						m, _ := cs.Client.Entity(id)
						_ = ep.Send(harness.Use{Target: components.RefTo(m), Seq: uint32(tick)}, d)
						_ = ep.Send(harness.Use{Seq: uint32(tick)}, d)
					}
				}
				h.Step()
			}
			for range 60 {
				step()
			}
			out0 := h.Server.Stats.MessagesOut
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				step()
			}
			b.StopTimer()
			if n := h.Server.Stats.MessagesOut - out0; n > 0 {
				b.ReportMetric(float64(n)/float64(b.N), "msgs-out/tick")
			}
		})
	}
}
