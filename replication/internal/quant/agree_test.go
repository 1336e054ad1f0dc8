package quant_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/interp"
	"github.com/archenet/archenet/replication/internal/quant"
)

// Every angle a replicated field decodes to is its own wrap (interp.WrapAngle),
// so interpolation never sees a jump of 2π between equal angles.
func TestDecodedAnglesAreWrapped(t *testing.T) {
	a, err := quant.NewAngle(9)
	require.NoError(t, err)
	for q := range uint64(512) {
		v := a.Dequantize(q)
		require.Equal(t, v, interp.WrapAngle(v), "code %d", q)
	}
}
