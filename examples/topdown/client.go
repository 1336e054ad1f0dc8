package main

import (
	"math"
	"math/rand/v2"
	"reflect"

	arche "github.com/mlange-42/arche/ecs"

	"github.com/archenet/archenet/components"
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
	// Tagged is every tag the server told this client of.
	Tagged []Tagged
	greet  *replication.ClientEndpoint[Greet]
	frame  int
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
	tags, err := replication.ClientMessages[Tagged](c.Net)
	if err != nil {
		return nil, err
	}
	tags.Handle(func(m replication.Message[Tagged]) { c.Tagged = append(c.Tagged, m.Value) })
	if c.greet, err = replication.ClientMessages[Greet](c.Net); err != nil {
		return nil, err
	}
	c.Sched.AddSystem(c.Net.ReceiveSystem())
	c.Sched.AddSystem(c.Player.System()) // predicts and sends
	c.Sched.AddSystem(c.Net.InterpolationSystem())
	c.Sched.AddSystem(ecs.Func(c.greetOthers))
	return c, nil
}

// greetOthers waves at another player in view every two seconds (the
// server may have removed it by the time the greeting arrives: then the
// server refuses the greeting).
func (c *Client) greetOthers(w *arche.World) {
	if c.frame++; c.frame%240 != 0 {
		return
	}
	idNet := arche.ComponentID[components.NetID](w)
	f := arche.All(arche.ComponentID[Body](w), idNet).Without(arche.ComponentID[Coin](w))
	var to arche.Entity
	for q := w.Query(&f); q.Next(); {
		if to.IsZero() && (*components.NetID)(q.Get(idNet)).Owner() != c.Net.ID() {
			to = q.Entity() // (another player's body, not its own)
		}
	}
	if !to.IsZero() {
		_ = c.greet.Send(Greet{To: components.RefTo(to)}, replication.Reliable)
	}
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
