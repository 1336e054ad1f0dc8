package inputlog

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/input/internal/frames"
)

// shooterInput is a typical first-person shooter input frame (package
// frames' test input).
type shooterInput struct {
	Keys    uint16  `net:"range=0:65535"`            // movement and action keys
	DX      float32 `net:"range=-512:512,step=0.25"` // mouse delta
	DY      float32 `net:"range=-512:512,step=0.25"` // mouse delta
	Buttons uint8   `net:"range=0:7"`                // mouse buttons
	Weapon  uint8   `net:"range=0:9"`                // selected slot
	Crouch  bool    // toggled
	Aim     float32 `net:"angle,bits=12"` // absolute aim yaw
	Seq     int32   // varint: exercises full-group coding
	Note    string  `net:"-"`
}

func newShooterCodec(t testing.TB, cfg frames.Config) *frames.Codec[shooterInput] {
	t.Helper()
	c, err := frames.New[shooterInput](cfg)
	require.NoError(t, err)
	return c
}
