// Command topdown is a minimal 2D top-down game on archenet, written with
// the public API only: players steer bodies on the x/z plane (predicted on
// their own client, interpolated in place on the others), coins spawn and
// are picked up on the server, and players tag each other with hitscan
// shots judged against what the shooter saw (lag compensation). Each client
// receives what is within 20 m of its body (interest on the game's own
// component).
//
//	go run ./examples/topdown -bots 4 -duration 10s
package main

import (
	"math"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/schema"
)

// Rates shared by server and clients: 60 Hz simulation, 30 Hz snapshots.
const (
	SimRate, NetDivisor = 60, 2
	Half                = 30.0 // the field is [−Half, Half]² metres
	Radius              = 20.0 // interest: what a client receives around its body
)

// Pos is where a Body is, for interest management.
func Pos(b *Body) components.Vec3 { return components.Vec3{X: b.X, Z: b.Z} }

// Body is the replicated 2D state of players and coins.
type Body struct {
	X     float64 `net:"range=-32:32,step=0.001"`
	Z     float64 `net:"range=-32:32,step=0.001"`
	Yaw   float64 `net:"angle,bits=12"`
	Score uint16  `net:"range=0:4095,owner"` // only its owner sees it
}

// Coin marks a pickup.
type Coin struct{}

// Move is one tick of a player's input: the aim, walking along it, firing.
type Move struct {
	Forward int8    `net:"range=-1:1"`
	Aim     float64 `net:"angle,bits=12"`
	Fire    bool
}

// Tagged tells the players that see a body it was tagged, and by whom: an
// entity-scoped event (server → client).
type Tagged struct {
	Target, By components.Ref
}

// Greet is a player's wave to another body it sees (client → server); the
// server counts it only if the body is still there.
type Greet struct {
	To components.Ref
}

// Registry returns the replicated components and the messages, the same on
// both sides.
func Registry() *schema.Registry {
	reg := schema.NewRegistry()
	schema.MustRegister[Body](reg)
	schema.MustRegister[Coin](reg)
	schema.MustRegister[components.Predicted](reg)
	schema.MustRegisterMessage[Tagged](reg)
	schema.MustRegisterMessage[Greet](reg)
	return reg
}

// Step moves a player: face the aim, walk at 5 m/s, stop at the edge.
// The server's input.Authority and the owner's input.Player both run it.
func Step(b *Body, in *Move, dt float64) {
	b.Yaw = in.Aim
	sin, cos := math.Sincos(b.Yaw)
	b.X = math.Max(-Half, math.Min(Half, b.X+float64(in.Forward)*5*cos*dt))
	b.Z = math.Max(-Half, math.Min(Half, b.Z+float64(in.Forward)*5*sin*dt))
}
