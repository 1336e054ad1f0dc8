package input_test

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	arche "github.com/mlange-42/arche/ecs"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/ecs"
	"github.com/archenet/archenet/input"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/replication/schema"
	"github.com/archenet/archenet/transport/sim"
)

// Walker is a predicted entity's state.
type Walker struct {
	X float64 `net:"range=-100:100,step=0.001"`
}

// Stick is its input.
type Stick struct {
	Right int8 `net:"range=-1:1"`
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func walk(s *Walker, in *Stick, dt float64) { s.X += float64(in.Right) * 3 * dt }

// A server with an Authority and a client with a Player, over a simulated
// 50 ms link: the client predicts its walker ahead of the server, and the
// server's state, when it arrives, matches the prediction for its tick.
func ExampleNewPlayer() {
	reg := schema.NewRegistry()
	schema.MustRegister[Walker](reg)
	schema.MustRegister[components.Predicted](reg)
	network := sim.NewNetwork(1, time.Unix(0, 0))

	// Server: the authority steps every Walker with an Owner by its input.
	sw := arche.NewWorld()
	auth, _ := input.NewAuthority(&sw, input.AuthorityConfig[Walker, Stick]{Registry: reg, Step: walk})
	var sched *ecs.Scheduler
	cfg := replication.ServerConfig{Registry: reg, NetRate: 30, NetDivisor: 2, Now: network.Now, Logger: quiet,
		Tick: func() uint32 { return sched.Info().NetTick }}
	_ = auth.Configure(&cfg)
	srv, _ := replication.NewServer(&sw, network.Listen("server"), cfg)
	sched, _ = ecs.New(&sw, ecs.Config{TickRate: 60, NetDivisor: 2})
	sched.AddNetSystem(srv.ReceiveSystem())
	sched.AddSystem(auth.System())
	sched.AddSystem(auth.RoundSystem())
	sched.AddNetSystem(srv.SendSystem())
	e := sw.NewEntity(arche.ComponentID[components.Replicated](&sw), arche.ComponentID[Walker](&sw),
		arche.ComponentID[components.Owner](&sw), arche.ComponentID[components.Predicted](&sw))
	(*components.Owner)(sw.Get(e, arche.ComponentID[components.Owner](&sw))).Client = 1

	// Client: the player holds "right" and predicts.
	link := sim.Conditions{Latency: 25 * time.Millisecond}
	conn, _ := network.Dial("server", sim.Link{Up: link, Down: link})
	cw := arche.NewWorld()
	cl, _ := replication.NewClient(&cw, conn, replication.ClientConfig{Registry: reg, Now: network.Now, Logger: quiet})
	player, _ := input.NewPlayer(cl, input.PlayerConfig[Walker, Stick]{
		Step: walk, Now: network.Now,
		Sample: func(uint32, *Walker) Stick { return Stick{Right: 1} },
	})

	for range 120 { // two seconds at 60 Hz
		sched.Step()
		network.Advance(time.Second / 60)
		cl.Receive()
		_ = player.Update()
	}
	st := player.Stats()
	server := (*Walker)(sw.Get(e, arche.ComponentID[Walker](&sw))).X
	fmt.Printf("server x %.2f m, predicted x %.2f m (ahead by the round trip)\n", server, player.State().X)
	fmt.Printf("reconciliations: %d matched, %d corrected\n", st.Matches, st.Corrections)
	// Output:
	// server x 5.45 m, predicted x 5.75 m (ahead by the round trip)
	// reconciliations: 54 matched, 0 corrected
}
