package host_test

import (
	"fmt"
	"time"

	"github.com/mlange-42/arche/ecs"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/replication/host"
	"github.com/archenet/archenet/replication/schema"
	"github.com/archenet/archenet/transport/sim"
)

// duel is a match's game: a world with one replicated entity, its server,
// one tick per frame.
type duel struct {
	world *ecs.World
	srv   *replication.Server
}

func (d *duel) Frame(time.Time) {
	d.srv.Receive()
	// ... the game's systems ...
	d.srv.Send()
}
func (d *duel) Replication() *replication.Server { return d.srv }
func (d *duel) Close()                           {}

// Two matches behind one listener; a client names the match it joins. (On
// a real server: quic.Listen, and no Manual: each match runs on its own
// goroutine at its FrameRate.)
func ExampleHost_Open() {
	reg := schema.NewRegistry()
	schema.MustRegister[components.Transform](reg)
	start := func(x float64) func(m *host.Match) (host.Game, error) {
		return func(m *host.Match) (host.Game, error) {
			w := ecs.NewWorld()
			cfg := replication.ServerConfig{Registry: reg}
			m.Configure(&cfg) // one worker per match, the host's clock and logger
			srv, err := replication.NewServer(&w, m.Listener(), cfg)
			if err != nil {
				return nil, err
			}
			e := w.NewEntity(ecs.ComponentID[components.Replicated](&w), ecs.ComponentID[components.Transform](&w))
			(*components.Transform)(w.Get(e, ecs.ComponentID[components.Transform](&w))).Pos.X = x
			return &duel{world: &w, srv: srv}, nil
		}
	}

	network := sim.NewNetwork(1, time.Unix(0, 0))
	h, err := host.New(network.Listen("game:7777"), host.Config{Manual: true, Now: network.Now})
	if err != nil {
		panic(err)
	}
	defer h.Close()
	for i, name := range []string{"duel-1", "duel-2"} {
		if _, err := h.Open(name, host.MatchConfig{Start: start(float64(i + 1)), FrameRate: 30}); err != nil {
			panic(err)
		}
	}

	conn, _ := network.Dial("game:7777", sim.Link{})
	cw := ecs.NewWorld()
	client, _ := replication.NewClient(&cw, conn, replication.ClientConfig{Registry: reg, Match: "duel-2", Now: network.Now})
	for range 10 {
		h.Step()
		network.Advance(time.Second / 30)
		client.Receive()
		client.Send()
	}
	q := cw.Query(ecs.All(ecs.ComponentID[components.Transform](&cw)))
	for q.Next() {
		fmt.Println("mirrors x =", (*components.Transform)(q.Get(ecs.ComponentID[components.Transform](&cw))).Pos.X)
	}
	fmt.Println("clients:", h.Stats().Clients)
	// Output:
	// mirrors x = 2
	// clients: 1
}
