// Command webgame is the smallest complete browser game on archenet: dots
// bounce around a field on the server, every page that opens it mirrors
// them (over WebTransport, or the WebSocket fallback), and a click on the
// page asks the server for a new dot there.
//
//	go run ./examples/webgame    # then open the printed address in Chromium
package main

import (
	"github.com/archenet/archenet/replication/schema"
)

// Field size, in pixels.
const W, H = 640, 480

// Dot is the replicated state of a bouncing dot.
type Dot struct {
	X      float64 `net:"range=-16:656,step=0.25"`
	Y      float64 `net:"range=-16:496,step=0.25"`
	VX, VY float64 `net:"-"` // server only
}

// Click is a player's request for a dot at X, Y (page → server).
type Click struct {
	X, Y float64 `net:"range=0:640,step=1"`
}

// Registry is the same on both sides.
func Registry() *schema.Registry {
	reg := schema.NewRegistry()
	schema.MustRegister[Dot](reg)
	schema.MustRegisterMessage[Click](reg)
	return reg
}
