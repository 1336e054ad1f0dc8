// Package palette holds the colours arenaview draws with. The entity fills
// are flat colours used by nothing else, so a screenshot test can find each
// kind of entity by its colour (package acceptance does).
package palette

import "image/color"

// Entity fills.
var (
	Own     = color.RGBA{0x3c, 0xe0, 0x5a, 0xff} // the own avatar (predicted)
	Remote  = color.RGBA{0x4a, 0x8c, 0xff, 0xff} // other players' avatars (interpolated)
	NPC     = color.RGBA{0xff, 0x8c, 0x28, 0xff} // NPCs (interpolated)
	OwnShot = color.RGBA{0xff, 0xf0, 0x3c, 0xff} // own projectiles (predicted)
	Shot    = color.RGBA{0xff, 0x46, 0x82, 0xff} // everybody else's projectiles (interpolated)
	// Debug outlines the newest server state of every mirror (its
	// Transform) in the debug view.
	Debug = color.RGBA{0xe0, 0x40, 0xe0, 0xff}
)

// Scenery, marks and the overlay.
var (
	Background = color.RGBA{0x16, 0x18, 0x1d, 0xff}
	Floor      = color.RGBA{0x24, 0x28, 0x30, 0xff}
	Grid       = color.RGBA{0x30, 0x35, 0x3f, 0xff}
	Wall       = color.RGBA{0x6a, 0x72, 0x80, 0xff}
	Heading    = color.RGBA{0x10, 0x12, 0x16, 0xff} // the facing mark on a body
	Aim        = color.RGBA{0x3c, 0xe0, 0x5a, 0x50} // the line to the mouse pointer
	Flash      = color.RGBA{0xff, 0xff, 0xff, 0xff} // hits
	OverlayBg  = color.RGBA{0x00, 0x00, 0x00, 0xb0}
)
