package replicationtest_test

import (
	"encoding/json"
	"fmt"

	"github.com/mlange-42/arche/ecs"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/replicationtest"
	"github.com/archenet/archenet/replication/schema"
)

// A server's state travels as JSON to where the client runs (a page, say), is
// rebuilt there, and the client's world is judged against it.
func ExampleCapture() {
	reg := schema.NewRegistry()
	schema.MustRegister[components.Transform](reg)

	// The server: one replicated entity, net id 7/1.
	server := ecs.NewWorld()
	e := server.NewEntity(ecs.ComponentID[components.Replicated](&server), ecs.ComponentID[components.Transform](&server))
	(*components.Transform)(server.Get(e, ecs.ComponentID[components.Transform](&server))).Pos = components.Vec3{X: 1.5}
	netID := func(ecs.Entity) (components.NetID, bool) { return components.NetID{Handle: 7, Gen: 1}, true }
	s, err := replicationtest.Capture(reg, &server, netID)
	if err != nil {
		panic(err)
	}
	doc, _ := json.Marshal(s)

	// Elsewhere: a client that mirrors it.
	client := ecs.NewWorld()
	m := client.NewEntity(ecs.ComponentID[components.NetID](&client), ecs.ComponentID[components.Transform](&client))
	*(*components.NetID)(client.Get(m, ecs.ComponentID[components.NetID](&client))) = components.NetID{Handle: 7, Gen: 1}
	tr := (*components.Transform)(client.Get(m, ecs.ComponentID[components.Transform](&client)))
	tr.Pos = components.Vec3{X: 1.5}

	var got replicationtest.State
	if err := json.Unmarshal(doc, &got); err != nil {
		panic(err)
	}
	w, ids, err := got.World(reg)
	if err != nil {
		panic(err)
	}
	check := replicationtest.Check{Registry: reg, Server: w, NetID: ids, Client: &client, Me: 1}
	fmt.Println("mirror at 1.5:", replicationtest.Converged(check))
	tr.Pos.X = 1.6
	fmt.Println("mirror at 1.6:", replicationtest.Converged(check) != nil)
	// Output:
	// mirror at 1.5: <nil>
	// mirror at 1.6: true
}

// While the server's entity moves, a client showing an older tick's state
// is still right: the check compares it with the server's state at that
// tick.
func ExampleHistory() {
	reg := schema.NewRegistry()
	schema.MustRegister[components.Transform](reg)
	server := ecs.NewWorld()
	trID := ecs.ComponentID[components.Transform](&server)
	e := server.NewEntity(ecs.ComponentID[components.Replicated](&server), trID)
	netID := func(ecs.Entity) (components.NetID, bool) { return components.NetID{Handle: 7, Gen: 1}, true }
	hist := replicationtest.NewHistory(reg, 32)
	for tick := uint32(1); tick <= 3; tick++ { // the server moves it each tick
		(*components.Transform)(server.Get(e, trID)).Pos.X = float64(tick)
		_ = hist.Record(&server, netID, tick)
	}

	// The client shows tick 2's state (a datagram of tick 3 is on its way).
	client := ecs.NewWorld()
	m := client.NewEntity(ecs.ComponentID[components.NetID](&client), ecs.ComponentID[components.Transform](&client))
	*(*components.NetID)(client.Get(m, ecs.ComponentID[components.NetID](&client))) = components.NetID{Handle: 7, Gen: 1}
	(*components.Transform)(client.Get(m, ecs.ComponentID[components.Transform](&client))).Pos.X = 2
	stateTick := func(components.NetID) (uint32, bool) { return 2, true }
	r, err := hist.Check(replicationtest.LiveCheck{Client: &client, Me: 1, StateTick: stateTick})
	fmt.Println(r.Compared, err)
	// Output:
	// 1 <nil>
}
