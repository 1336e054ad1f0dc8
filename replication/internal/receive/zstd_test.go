package receive

import (
	"testing"

	"github.com/archenet/archenet/replication/internal/codec"
	"github.com/archenet/archenet/replication/internal/wire"
	"github.com/archenet/archenet/replication/schema"
	"github.com/stretchr/testify/require"
)

// A receiver refuses compressed datagrams until EnableZstd, then corrupt
// bodies and bombs.
func TestZstdHostile(t *testing.T) {
	reg := schema.NewRegistry()
	schema.MustRegister[fuzzShip](reg)
	rcv := NewReceiver(reg, 0, 0)
	_, err := rcv.Decode([]byte{wire.KindSnapshot | wire.FlagCompressed, 0x28, 0xb5, 0x2f, 0xfd})
	require.ErrorIs(t, err, codec.ErrNoDecompressor)
	require.NoError(t, rcv.EnableZstd(nil))
	_, err = rcv.Decode([]byte{wire.KindSnapshot | wire.FlagCompressed, 0x28, 0xb5, 0x2f, 0xfd, 0, 0, 0})
	require.ErrorIs(t, err, wire.ErrCorrupt)
	// A frame that inflates past codec.MaxBody is refused.
	comp, err := codec.NewCompressor(nil)
	require.NoError(t, err)
	bomb := comp.Compress(make([]byte, 4*codec.MaxBody))
	require.NotNil(t, bomb)
	_, err = rcv.Decode(append([]byte{wire.KindSnapshot | wire.FlagCompressed}, bomb...))
	require.Error(t, err)
}
