package main

import (
	"math"

	"github.com/hajimehoshi/ebiten/v2"
	"github.com/hajimehoshi/ebiten/v2/inpututil"

	"github.com/archenet/archenet/examples/arena/game"
)

// controls is the person's input as of the last Update: held movement keys,
// the fire button and the world point under the mouse pointer. The player's
// client samples it once per input tick (control) during Bot.Frame.
type controls struct {
	keys       uint8
	fire       bool
	aimX, aimZ float64 // world point to turn toward
	aimSet     bool
	yaw        float64 // the last aim sent
}

// control is the player's BotOptions.Control: the held keys and fire button,
// aimed from the predicted avatar toward the pointer.
func (c *controls) control(_ uint32, s *game.Avatar) game.ShooterInput {
	// Keep the last aim when the pointer is on the avatar.
	if dx, dz := c.aimX-s.X, c.aimZ-s.Z; c.aimSet && dx*dx+dz*dz > 0.05 {
		c.yaw = math.Atan2(dz, dx)
	}
	return game.ShooterInput{Keys: c.keys, Yaw: math.Remainder(c.yaw, 2*math.Pi), Fire: c.fire}
}

// set sets the controls: keys held, fire button, and the world point under
// the pointer.
func (c *controls) set(keys uint8, fire bool, aimX, aimZ float64) {
	c.keys, c.fire = keys, fire
	c.aimX, c.aimZ, c.aimSet = aimX, aimZ, true
}

// keyboard returns the movement keys and fire button held.
func keyboard() (keys uint8, fire bool) {
	pressed := func(keys ...ebiten.Key) bool {
		for _, k := range keys {
			if ebiten.IsKeyPressed(k) {
				return true
			}
		}
		return false
	}
	if pressed(ebiten.KeyW, ebiten.KeyArrowUp) {
		keys |= game.KeyForward
	}
	if pressed(ebiten.KeyS, ebiten.KeyArrowDown) {
		keys |= game.KeyBack
	}
	if pressed(ebiten.KeyA, ebiten.KeyArrowLeft) {
		keys |= game.KeyLeft
	}
	if pressed(ebiten.KeyD, ebiten.KeyArrowRight) {
		keys |= game.KeyRight
	}
	fire = pressed(ebiten.KeySpace) || ebiten.IsMouseButtonPressed(ebiten.MouseButtonLeft)
	return keys, fire
}

// The input script: legs of scriptLeg frames, each holding KeyForward
// (toward the pointer) with the pointer 200 px from the own avatar in one
// screen direction — right, up, left, down — and firing two thirds of the
// time. It goes through the same pointer-to-world aim as the mouse.
const scriptLeg = 200

var scriptPointer = [...][2]float32{{200, 0}, {0, -200}, {-200, 0}, {0, 200}}

// script returns the keys, fire button and pointer offset from the own
// avatar on screen of frame f (counted from the first frame that draws
// the own avatar).
func script(f int) (keys uint8, fire bool, dx, dy float32) {
	p := scriptPointer[(f/scriptLeg)%len(scriptPointer)]
	return game.KeyForward, f%60 < 40, p[0], p[1]
}

// scriptReach is how far (px on screen) the script walks the own avatar in
// one leg: at 60 frames a second it walks about 140 px in a leg and never
// gets there; on a busy machine each frame covers more simulated time, and
// without the bound the avatar would leave the screen.
const scriptReach = 160

// scripted is the input script's state: the leg under way and where the
// own avatar was drawn when it began.
type scripted struct {
	leg    int
	x0, y0 float32
}

// next returns frame f's input (script) for the own avatar drawn at (x, y),
// without KeyForward once the avatar has gone scriptReach px along the
// leg's direction.
func (s *scripted) next(f int, x, y float32) (keys uint8, fire bool, dx, dy float32) {
	keys, fire, dx, dy = script(f)
	if leg := f / scriptLeg; leg != s.leg {
		s.leg, s.x0, s.y0 = leg, x, y
	}
	if ((x-s.x0)*dx+(y-s.y0)*dy)/float32(math.Hypot(float64(dx), float64(dy))) >= scriptReach {
		keys = 0
	}
	return keys, fire, dx, dy
}

// toggles reports the overlay and debug toggle keys pressed this frame.
func toggles() (overlay, debug, quit bool) {
	overlay = inpututil.IsKeyJustPressed(ebiten.KeyF1) || inpututil.IsKeyJustPressed(ebiten.KeyTab)
	debug = inpututil.IsKeyJustPressed(ebiten.KeyF2)
	quit = inpututil.IsKeyJustPressed(ebiten.KeyEscape)
	return overlay, debug, quit
}
