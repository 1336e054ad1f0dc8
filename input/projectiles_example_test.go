package input_test

import (
	"fmt"
	"time"

	arche "github.com/mlange-42/arche/ecs"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/ecs"
	"github.com/archenet/archenet/input"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/replication/schema"
	"github.com/archenet/archenet/transport/sim"
)

// Archer shoots arrows; Bow is its input; an Arrow flies without input.
type Archer struct {
	Shots uint8 `net:"range=0:255"`
}

type Bow struct {
	Loose bool
}

type Arrow struct {
	X  float64 `net:"range=-1000:1000,step=0.001"`
	VX float64 `net:"range=-100:100,step=0.001"`
}

func draw(a *Archer, in *Bow, _ float64) {
	if in.Loose {
		a.Shots++
	}
}

func fly(_ arche.Entity, a *Arrow, dt float64) { a.X += a.VX * dt }

// A client looses an arrow: it flies on its screen the tick it is loosed
// (a predicted spawn, moved on the player's timeline by Projectiles), the
// server's spawn of it, keyed by that tick, adopts it, and from then on it
// is drawn from the server's states, moved on to the predicted tick.
func ExampleNewProjectiles() {
	reg := schema.NewRegistry()
	schema.MustRegister[Archer](reg)
	schema.MustRegister[Arrow](reg)
	schema.MustRegister[components.Predicted](reg)
	network := sim.NewNetwork(1, time.Unix(0, 0))

	// Server: arrows fly; a loosed arrow is keyed by its input tick.
	sw := arche.NewWorld()
	idArrow, idOwner := arche.ComponentID[Arrow](&sw), arche.ComponentID[components.Owner](&sw)
	var sched *ecs.Scheduler
	var loosed []uint32 // input ticks that loosed an arrow (OnStep runs in a query: spawn after it)
	auth, _ := input.NewAuthority(&sw, input.AuthorityConfig[Archer, Bow]{Registry: reg, Step: draw,
		OnStep: func(_ arche.Entity, before, after *Archer, _ *Bow) {
			if after.Shots != before.Shots {
				loosed = append(loosed, uint32(sched.Info().Tick))
			}
		}})
	cfg := replication.ServerConfig{Registry: reg, NetRate: 30, NetDivisor: 2, Now: network.Now, Logger: quiet,
		Tick: func() uint32 { return sched.Info().NetTick }}
	_ = auth.Configure(&cfg)
	srv, _ := replication.NewServer(&sw, network.Listen("server"), cfg)
	sched, _ = ecs.New(&sw, ecs.Config{TickRate: 60, NetDivisor: 2})
	sched.AddNetSystem(srv.ReceiveSystem())
	sched.AddSystem(ecs.Func(func(w *arche.World) {
		q := w.Query(arche.All(idArrow))
		for q.Next() {
			fly(q.Entity(), (*Arrow)(q.Get(idArrow)), 1.0/60)
		}
	}))
	sched.AddSystem(auth.System())
	sched.AddSystem(ecs.Func(func(w *arche.World) {
		for _, tick := range loosed {
			a := w.NewEntity(arche.ComponentID[components.Replicated](w), idArrow, idOwner)
			*(*Arrow)(w.Get(a, idArrow)) = Arrow{VX: 30}
			(*components.Owner)(w.Get(a, idOwner)).Client = 1
			_ = srv.PredictedSpawn(a, tick)
		}
		loosed = loosed[:0]
	}))
	sched.AddSystem(auth.RoundSystem())
	sched.AddNetSystem(srv.SendSystem())
	me := sw.NewEntity(arche.ComponentID[components.Replicated](&sw), arche.ComponentID[Archer](&sw),
		idOwner, arche.ComponentID[components.Predicted](&sw))
	(*components.Owner)(sw.Get(me, idOwner)).Client = 1

	// Client: the archer looses one arrow; Projectiles flies it.
	link := sim.Conditions{Latency: 25 * time.Millisecond}
	conn, _ := network.Dial("server", sim.Link{Up: link, Down: link})
	cw := arche.NewWorld()
	cl, _ := replication.NewClient(&cw, conn, replication.ClientConfig{Registry: reg, Now: network.Now, Logger: quiet})
	var arrows *input.Projectiles[Arrow]
	loose := uint32(0)
	player, _ := input.NewPlayer(cl, input.PlayerConfig[Archer, Bow]{Step: draw, Now: network.Now,
		Sample: func(tick uint32, a *Archer) Bow {
			if loose == 0 {
				loose = tick + 30
			}
			return Bow{Loose: tick == loose}
		},
		OnPredict: func(tick uint32, before, after *Archer, _ *Bow) {
			if after.Shots != before.Shots {
				_, _ = arrows.Spawn(tick, Arrow{VX: 30})
			}
		}})
	arrows, _ = input.NewProjectiles(player, fly)

	for range 120 { // two seconds at 60 Hz
		sched.Step()
		network.Advance(time.Second / 60)
		cl.Receive()
		_ = player.Update()
		arrows.Update()
	}
	st := arrows.Stats()
	fmt.Printf("arrows: %d spawned, %d adopted, largest correction %d steps\n", st.Spawned, st.Adopted, st.MaxCorrection)
	// Output:
	// arrows: 1 spawned, 1 adopted, largest correction 0 steps
}
