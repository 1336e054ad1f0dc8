package snapshot_test

import (
	"fmt"
	"unsafe"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/internal/snapshot"
	"github.com/archenet/archenet/replication/schema"
)

type Body struct {
	Pos components.Vec3 `net:"world,step=0.01"`
}

func Example() {
	reg := schema.NewRegistry()
	schema.MustRegister[Body](reg)

	world := snapshot.NewWorld(reg, 0) // server: shared frame ring
	enc := snapshot.NewEncoder(world)
	client := snapshot.NewClient(1, 0)     // server's state of one client
	rcv := snapshot.NewReceiver(reg, 1, 0) // that client's decoder
	bodies := make([]Body, 100)
	ptr := make([]unsafe.Pointer, 1)
	var dgs snapshot.Packets // one tick's datagrams

	for tick := uint32(1); tick <= 3; tick++ {
		bodies[tick].Pos.X += 1 // one body moves each tick
		world.Begin(tick)
		for i := range bodies {
			ptr[0] = unsafe.Pointer(&bodies[i])
			world.Put(uint32(i), snapshot.Meta{Set: 1}, ptr)
		}
		world.Commit()
		info := enc.Build(client, snapshot.BuildOptions{Budget: 500}, &dgs)
		world.EndTick()

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
