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
