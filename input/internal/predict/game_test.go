package predict

import (
	"math"
)

// fpsInput is the typical shooter input of the benchmarks and tests (the
// game of package input's end-to-end test): held movement keys, mouse
// deltas, mouse buttons.
type fpsInput struct {
	Keys    uint16  `net:"range=0:65535"`
	DX      float32 `net:"range=-512:512,step=0.25"`
	DY      float32 `net:"range=-512:512,step=0.25"`
	Buttons uint8   `net:"range=0:7"`
}

const (
	keyFwd = 1 << iota
	keyBack
	keyLeft
	keyRight
	keySprint
)

// player is the predicted state: position, velocity, yaw and pitch.
type player struct {
	X     float32 `net:"range=-4000:4000,step=0.001"`
	Y     float32 `net:"range=-4000:4000,step=0.001"`
	VX    float32 `net:"range=-64:64,step=0.001"`
	VY    float32 `net:"range=-64:64,step=0.001"`
	Yaw   float32 `net:"angle,bits=16"`
	Pitch float32 `net:"range=-1.5:1.5,bits=12"`
	Local int     `net:"-"` // client-only bookkeeping, never compared
}

// stepPlayer is the deterministic game step both ends run.
func stepPlayer(s *player, in *fpsInput, dt float64) {
	s.Yaw += in.DX * 0.002
	s.Pitch = float32(math.Max(-1.5, math.Min(1.5, float64(s.Pitch+in.DY*0.002))))
	var fx, fy float64
	if in.Keys&keyFwd != 0 {
		fx++
	}
	if in.Keys&keyBack != 0 {
		fx--
	}
	if in.Keys&keyLeft != 0 {
		fy++
	}
	if in.Keys&keyRight != 0 {
		fy--
	}
	speed := 6.0
	if in.Keys&keySprint != 0 {
		speed = 10
	}
	sin, cos := math.Sincos(float64(s.Yaw))
	wx := (fx*cos - fy*sin) * speed
	wy := (fx*sin + fy*cos) * speed
	a := math.Min(1, 10*dt)
	s.VX += float32((wx - float64(s.VX)) * a)
	s.VY += float32((wy - float64(s.VY)) * a)
	s.X += s.VX * float32(dt)
	s.Y += s.VY * float32(dt)
}
