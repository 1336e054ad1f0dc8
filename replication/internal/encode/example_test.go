package encode_test

import (
	"fmt"
	"unsafe"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/internal/baseline"
	"github.com/archenet/archenet/replication/internal/encode"
	"github.com/archenet/archenet/replication/internal/entity"
	"github.com/archenet/archenet/replication/internal/receive"
	"github.com/archenet/archenet/replication/internal/store"
	"github.com/archenet/archenet/replication/schema"
)

type Body struct {
	Pos components.Vec3 `net:"world,step=0.01"`
}

// A server's ring, one encoder, the tracker of one client and that
// client's receiver, for three ticks.
func Example() {
	reg := schema.NewRegistry()
	schema.MustRegister[Body](reg)

	ring := store.New(reg, 0)                 // server: shared frame ring
	enc := encode.NewGroup(ring).NewEncoder() // one per worker goroutine
	client := baseline.NewTracker(1, 0)       // server's record of one client
	rcv := receive.NewReceiver(reg, 1, 0)     // that client's decoder
	bodies := make([]Body, 100)
	ptr := make([]unsafe.Pointer, 1)
	var dgs encode.Packets // one tick's datagrams

	for tick := uint32(1); tick <= 3; tick++ {
		bodies[tick].Pos.X += 1 // one body moves each tick
		ring.Begin(tick)
		for i := range bodies {
			ptr[0] = unsafe.Pointer(&bodies[i])
			ring.Put(uint32(i), entity.Meta{Set: 1}, ptr)
		}
		ring.Commit()
		info := enc.Build(client, encode.BuildOptions{Budget: 500}, &dgs)
		ring.EndTick()

		for i := range dgs.Len() { // each datagram decodes on its own
			if _, err := rcv.Decode(dgs.At(i)); err != nil {
				panic(err)
			}
		}
		ack := rcv.Ack() // it travels back to the server
		client.Ack(&ack)
		fmt.Printf("tick %d: baseline %d, %d full, %d delta, %d bytes in %d datagrams\n",
			tick, info.Baseline, info.Fulls, info.Deltas, info.Bytes, info.Parts)
	}
	// Output:
	// tick 1: baseline 0, 100 full, 0 delta, 705 bytes in 2 datagrams
	// tick 2: baseline 1, 0 full, 1 delta, 10 bytes in 1 datagrams
	// tick 3: baseline 2, 0 full, 1 delta, 11 bytes in 1 datagrams
}
