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
