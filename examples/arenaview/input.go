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
	fixedYaw   float64 // the script's aim, when useYaw
	useYaw     bool
	yaw        float64 // the last aim sent
}

// control is the player's BotOptions.Control: the held keys and fire button,
// aimed from the predicted avatar toward the pointer.
func (c *controls) control(_ uint32, s *game.Avatar) game.ShooterInput {
	switch {
	case c.useYaw:
		c.yaw = c.fixedYaw
	case c.aimSet:
		// Keep the last aim when the pointer is on the avatar.
		if dx, dz := c.aimX-s.X, c.aimZ-s.Z; dx*dx+dz*dz > 0.05 {
			c.yaw = math.Atan2(dz, dx)
		}
	}
	return game.ShooterInput{Keys: c.keys, Yaw: math.Remainder(c.yaw, 2*math.Pi), Fire: c.fire}
}

// readDevices sets the controls from the keyboard and mouse; pointer is the
// world position under the cursor.
func (c *controls) readDevices(pointerX, pointerZ float64) {
	pressed := func(keys ...ebiten.Key) bool {
		for _, k := range keys {
			if ebiten.IsKeyPressed(k) {
				return true
			}
		}
		return false
	}
	c.keys = 0
	if pressed(ebiten.KeyW, ebiten.KeyArrowUp) {
		c.keys |= game.KeyForward
	}
	if pressed(ebiten.KeyS, ebiten.KeyArrowDown) {
		c.keys |= game.KeyBack
	}
	if pressed(ebiten.KeyA, ebiten.KeyArrowLeft) {
		c.keys |= game.KeyLeft
	}
	if pressed(ebiten.KeyD, ebiten.KeyArrowRight) {
		c.keys |= game.KeyRight
	}
	c.fire = pressed(ebiten.KeySpace) || ebiten.IsMouseButtonPressed(ebiten.MouseButtonLeft)
	c.aimX, c.aimZ, c.aimSet = pointerX, pointerZ, true
	c.useYaw = false
}

// Script legs: each holds KeyForward with a fixed world-space aim, firing
// two thirds of the time. The first leg heads east (+x, right on screen)
// for scriptLeg frames.
const scriptLeg = 200

var scriptAims = [...]float64{0, math.Pi / 2, math.Pi, -math.Pi / 2} // east, north, west, south

// readScript sets the controls for frame f (counted from the first frame
// that draws the own avatar) of the fixed input script.
func (c *controls) readScript(f int) {
	leg := (f / scriptLeg) % len(scriptAims)
	c.keys = game.KeyForward
	c.fixedYaw, c.useYaw = scriptAims[leg], true
	c.fire = f%60 < 40
}

// toggles reports the overlay and debug toggle keys pressed this frame.
func toggles() (overlay, debug, quit bool) {
	overlay = inpututil.IsKeyJustPressed(ebiten.KeyF1) || inpututil.IsKeyJustPressed(ebiten.KeyTab)
	debug = inpututil.IsKeyJustPressed(ebiten.KeyF2)
	quit = inpututil.IsKeyJustPressed(ebiten.KeyEscape)
	return overlay, debug, quit
}
