package debugview_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/mlange-42/arche/ecs"
	"github.com/mlange-42/arche/generic"

	"github.com/archenet/archenet/components"
	aecs "github.com/archenet/archenet/ecs"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/replication/debugview"
	"github.com/archenet/archenet/replication/schema"
	"github.com/archenet/archenet/transport/sim"
)

// A recorder samples the server on its own goroutine (here: the loop that
// calls Send); the handler, served from any goroutine, reads only the
// recorder's history. A real server adds rec.System() after its SendSystem
// and serves the handler with http.ListenAndServe.
func Example() {
	reg := schema.NewRegistry()
	schema.MustRegister[components.Transform](reg)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	net := sim.NewNetwork(1, time.Unix(0, 0))
	world := ecs.NewWorld()
	server, _ := replication.NewServer(&world, net.Listen("game"), replication.ServerConfig{Registry: reg, Now: net.Now, Logger: log})
	spawner := generic.NewMap2[components.Replicated, components.Transform](&world)
	ball := spawner.New()
	clientWorld := ecs.NewWorld()
	conn, _ := net.Dial("game", sim.Link{})
	client, _ := replication.NewClient(&clientWorld, conn, replication.ClientConfig{Registry: reg, Now: net.Now, Logger: log})

	rec := debugview.NewRecorder(server, debugview.Options{Interval: time.Second, Now: net.Now})
	transforms := generic.NewMap[components.Transform](&world)
	for tick := 0; tick < 3*30; tick++ { // 3 s at 30 Hz
		server.Receive()
		transforms.Get(ball).Pos.X += 0.1
		server.Send()
		rec.Sample() // after Send, on the same goroutine
		net.Advance(time.Second / 30)
		client.Receive()
		client.Send()
	}

	rr := httptest.NewRecorder()
	debugview.Handler(rec).ServeHTTP(rr, httptest.NewRequest("GET", "/stats", nil))
	var st debugview.Stats
	_ = json.Unmarshal(rr.Body.Bytes(), &st)
	last := st.Samples[len(st.Samples)-1]
	fmt.Println("samples:", len(st.Samples), "components:", st.Components)
	fmt.Printf("clients: %d, deltas per tick: %.0f, Transform bytes > 0: %v\n",
		len(last.Clients), last.Deltas, last.ComponentBytes[0] > 0)
	// Output:
	// samples: 2 components: [Transform]
	// clients: 1, deltas per tick: 1, Transform bytes > 0: true
}

// The wiring of a server run by an archenet scheduler (compiled, not run:
// it serves until the process ends): the recorder samples after each Send,
// and the page is served on loopback only (it has no authentication).
func ExampleRecorder_System() {
	reg := schema.NewRegistry()
	schema.MustRegister[components.Transform](reg)
	world := ecs.NewWorld()
	srv, _ := replication.NewServer(&world, nil, replication.ServerConfig{Registry: reg})
	sched, _ := aecs.New(&world, aecs.Config{TickRate: 30})
	sched.AddNetSystem(srv.ReceiveSystem())
	rec := debugview.NewRecorder(srv, debugview.Options{})
	sched.AddNetSystem(srv.SendSystem())
	sched.AddNetSystem(rec.System())
	go http.ListenAndServe("localhost:8080", debugview.Handler(rec))
	_ = sched.Run(context.Background(), aecs.RealClock{})
}
