package replication_test

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/replication/schema"
	"github.com/archenet/archenet/transport/sim"
	"github.com/mlange-42/arche/ecs"
	"github.com/mlange-42/arche/generic"
)

// A server world and a client world over a simulated network (use
// transport/quic for a real one).
func Example() {
	reg := schema.NewRegistry()
	schema.MustRegister[components.Transform](reg)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	net := sim.NewNetwork(1, time.Unix(0, 0))

	// Server: an authoritative world with one replicated, moving entity.
	serverWorld := ecs.NewWorld()
	server, _ := replication.NewServer(&serverWorld, net.Listen("game"), replication.ServerConfig{Registry: reg, Now: net.Now, Logger: log})
	spawner := generic.NewMap2[components.Replicated, components.Transform](&serverWorld)
	ball := spawner.New()

	// Client: its own world, mirrored.
	clientWorld := ecs.NewWorld()
	conn, _ := net.Dial("game", sim.Link{})
	client, _ := replication.NewClient(&clientWorld, conn, replication.ClientConfig{Registry: reg, Now: net.Now, Logger: log})

	transforms := generic.NewMap[components.Transform](&serverWorld)
	for tick := 0; tick < 10; tick++ {
		server.Receive()
		transforms.Get(ball).Pos.X += 0.5 // the game moves the ball
		server.Send()
		net.Advance(time.Second / 30)
		client.Receive()
		client.Send()
	}

	id, _ := server.NetID(ball)
	mirror, _ := client.Entity(id)
	fmt.Println("client", client.ID(), client.State())
	mirrors := generic.NewMap[components.Transform](&clientWorld)
	fmt.Println("mirror x:", mirrors.Get(mirror).Pos.X)
	// Output:
	// client 1 ready
	// mirror x: 5
}

// Game messages both ways: the server tells the clients that see an entity
// that it was hit (an entity-scoped event naming it), and a client asks to
// use an entity it sees (a request naming it, resolved on the server to the
// live entity, or refused before the handler runs if stale).
func ExampleServerMessages() {
	type Hit struct { // server → clients
		Target components.Ref
		Damage uint8 `net:"range=0:100"`
	}
	type Use struct { // client → server
		Door components.Ref
	}
	reg := schema.NewRegistry()
	schema.MustRegister[components.Transform](reg)
	schema.MustRegisterMessage[Hit](reg)
	schema.MustRegisterMessage[Use](reg)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	net := sim.NewNetwork(1, time.Unix(0, 0))

	serverWorld := ecs.NewWorld()
	server, _ := replication.NewServer(&serverWorld, net.Listen("game"), replication.ServerConfig{Registry: reg, Now: net.Now, Logger: log})
	doors := generic.NewMap2[components.Replicated, components.Transform](&serverWorld)
	door := doors.New()
	hits, _ := replication.ServerMessages[Hit](server)
	uses, _ := replication.ServerMessages[Use](server)
	uses.Handle(func(m replication.Message[Use]) {
		fmt.Println("client", m.From, "uses the door:", m.Value.Door.Entity == door)
	})

	clientWorld := ecs.NewWorld()
	conn, _ := net.Dial("game", sim.Link{})
	client, _ := replication.NewClient(&clientWorld, conn, replication.ClientConfig{Registry: reg, Now: net.Now, Logger: log})
	clientHits, _ := replication.ClientMessages[Hit](client)
	clientUses, _ := replication.ClientMessages[Use](client)

	step := func() {
		server.Receive()
		server.Send()
		net.Advance(time.Second / 30)
		client.Receive()
		client.Send()
	}
	for range 3 {
		step()
	}
	_ = hits.SendAbout(door, Hit{Target: components.RefTo(door), Damage: 30}, replication.Reliable)
	step()
	for m := range clientHits.Received() {
		id, _ := server.NetID(door)
		mirror, _ := client.Entity(id)
		fmt.Println("hit for", m.Value.Damage, "at tick", m.Tick, "on the door's mirror:", m.Value.Target.Entity == mirror)
		_ = clientUses.Send(Use{Door: m.Value.Target}, replication.Reliable)
	}
	for range 3 { // (the client sends it, the network carries it, the server reads it)
		step()
	}
	// Output:
	// hit for 30 at tick 4 on the door's mirror: true
	// client 1 uses the door: true
}

// A client whose link dies comes back to its seat on a new connection:
// the same id, the same mirrors; the game hears a suspend and a resume,
// not a leave and a join.
func ExampleClient_Resume() {
	reg := schema.NewRegistry()
	schema.MustRegister[components.Transform](reg)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	net := sim.NewNetwork(1, time.Unix(0, 0))

	serverWorld := ecs.NewWorld()
	server, _ := replication.NewServer(&serverWorld, net.Listen("game"), replication.ServerConfig{Registry: reg, Now: net.Now, Logger: log,
		OnSuspend: func(c replication.ClientID, _ error) { fmt.Println("game: client", c, "suspended") },
		OnResume:  func(c replication.ClientID) { fmt.Println("game: client", c, "resumed") },
	})
	spawner := generic.NewMap2[components.Replicated, components.Transform](&serverWorld)
	ball := spawner.New()
	transforms := generic.NewMap[components.Transform](&serverWorld)

	clientWorld := ecs.NewWorld()
	conn, _ := net.Dial("game", sim.Link{})
	client, _ := replication.NewClient(&clientWorld, conn, replication.ClientConfig{Registry: reg, Now: net.Now, Logger: log})
	run := func(ticks int) {
		for range ticks {
			server.Receive()
			transforms.Get(ball).Pos.X += 0.5
			server.Send()
			net.Advance(time.Second / 30)
			client.Receive()
			client.Send()
		}
	}
	run(10)
	id, _ := server.NetID(ball)
	before, _ := client.Entity(id)

	conn.SetLinkDown(true) // 12 s without a link: both ends give up on it
	run(360)
	fmt.Println("client:", client.State())

	conn, _ = net.DialFrom("game", "new-address", sim.Link{})
	_ = client.Resume(conn)
	run(5)
	after, _ := client.Entity(id)
	fmt.Println("client", client.ID(), client.State(), "same mirror:", after == before)
	// Output:
	// game: client 1 suspended
	// client: closed
	// game: client 1 resumed
	// client 1 ready same mirror: true
}

// A match moves to another server: a checkpoint of server A is restored as
// server B, A's drain notice names B, and the client resumes its seat there.
func ExampleServer_Checkpoint() {
	reg := schema.NewRegistry()
	schema.MustRegister[components.Transform](reg)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	net := sim.NewNetwork(1, time.Unix(0, 0))

	worldA := ecs.NewWorld()
	a, _ := replication.NewServer(&worldA, net.Listen("a"), replication.ServerConfig{Registry: reg, Now: net.Now, Logger: log})
	spawner := generic.NewMap2[components.Replicated, components.Transform](&worldA)
	ball := spawner.New()
	transformsA := generic.NewMap[components.Transform](&worldA)
	transformsA.Get(ball).Pos.X = 7

	clientWorld := ecs.NewWorld()
	conn, _ := net.Dial("a", sim.Link{})
	client, _ := replication.NewClient(&clientWorld, conn, replication.ClientConfig{Registry: reg, Now: net.Now, Logger: log})
	servers := []*replication.Server{a}
	step := func() {
		for _, s := range servers {
			s.Receive()
			s.Send()
		}
		net.Advance(time.Second / 30)
		client.Receive()
		if n, ok := client.Draining(); ok && n.Address != "" && client.Stats.Resumes == 0 {
			conn, _ := net.Dial(n.Address, sim.Link{}) // (follow the match)
			_ = client.Resume(conn)
		}
		client.Send()
	}
	for range 5 {
		step()
	}

	// Right after a Send: the checkpoint, restored as server B elsewhere.
	cp, _ := a.Checkpoint(nil, nil)
	worldB := ecs.NewWorld()
	b, _, _ := replication.Restore(&worldB, net.Listen("b"), replication.ServerConfig{Registry: reg, Now: net.Now, Logger: log}, cp)
	servers = append(servers, b)
	a.DrainTo("b", "moving", time.Time{})
	for range 5 {
		step()
	}

	id, _ := a.NetID(ball) // (the same net id names B's ball)
	e, _ := b.Resolve(id)
	mirror, _ := client.Entity(id)
	transformsB, mirrors := generic.NewMap[components.Transform](&worldB), generic.NewMap[components.Transform](&clientWorld)
	fmt.Println("client", client.ID(), client.State(), "resumed on B:", b.Stats.Resumed)
	fmt.Println("B's ball x:", transformsB.Get(e).Pos.X, "mirror x:", mirrors.Get(mirror).Pos.X)
	// Output:
	// client 1 ready resumed on B: 1
	// B's ball x: 7 mirror x: 7
}
