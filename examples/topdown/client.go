package main

import (
	"math"
	"math/rand/v2"
	"reflect"

	arche "github.com/mlange-42/arche/ecs"

	"github.com/archenet/archenet/ecs"
	"github.com/archenet/archenet/input"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/transport"
)

// Client is one player's game: its own world mirrors the server's; its body
// is predicted, everything else interpolated in place.
type Client struct {
	World  *arche.World
	Sched  *ecs.Scheduler // 120 Hz frames
	Net    *replication.Client
	Player *input.Player[Body, Move]
}

// NewClient joins the server at the other end of conn; sample is the
// player's input (keys, or a bot).
func NewClient(conn transport.Conn, sample func(tick uint32, b *Body) Move) (*Client, error) {
	w := arche.NewWorld()
	c := &Client{World: &w}
	var err error
	c.Net, err = replication.NewClient(&w, conn, replication.ClientConfig{Registry: Registry(),
		InterpolatedComponents: []reflect.Type{reflect.TypeFor[Body]()}})
	if err != nil {
		return nil, err
	}
	if c.Player, err = input.NewPlayer(c.Net, input.PlayerConfig[Body, Move]{Step: Step, Sample: sample}); err != nil {
		return nil, err
	}
	if c.Sched, err = ecs.New(&w, ecs.Config{TickRate: 120}); err != nil {
		return nil, err
	}
	c.Sched.AddSystem(c.Net.ReceiveSystem())
	c.Sched.AddSystem(c.Player.System()) // predicts and sends
	c.Sched.AddSystem(c.Net.InterpolationSystem())
	return c, nil
}

// Bot returns a wandering player's input: its aim drifts, it turns back
// toward the centre near the edge, and fires now and then.
func Bot(seed uint64) func(uint32, *Body) Move {
	rng, m := rand.New(rand.NewPCG(seed, 3)), Move{Forward: 1}
	return func(_ uint32, b *Body) Move {
		m.Aim = math.Remainder(m.Aim+(rng.Float64()*2-1)*0.1, 2*math.Pi)
		if b.X*b.X > 0.8*Half*Half || b.Z*b.Z > 0.8*Half*Half {
			m.Aim = math.Atan2(-b.Z, -b.X) // circle back
		}
		m.Fire = rng.IntN(60) == 0
		return m
	}
}
