package codec

import (
	"testing"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/bitio"
	"github.com/archenet/archenet/replication/internal/entity"
	"github.com/archenet/archenet/replication/internal/wire"
	"github.com/archenet/archenet/replication/schema"
	"github.com/stretchr/testify/require"
)

type hp struct {
	HP   int16  `net:"range=0:100"`
	Ammo uint16 `net:"range=0:500,owner"`
}

// A full record reads back as written (owner-only fields only for the
// owner), and every truncation of it fails.
func TestFullRecordRoundTrip(t *testing.T) {
	reg := schema.NewRegistry()
	schema.MustRegister[components.Transform](reg)
	schema.MustRegister[hp](reg)
	plans := reg.Plans()
	lanes := make([]uint64, plans[0].NumLanes()+plans[1].NumLanes())
	tr := components.Transform{Pos: components.Vec3{X: 1, Y: -2, Z: 3}, Rot: components.QuatIdentity()}
	schema.QuantizeValue(plans[0], &tr, lanes)
	h := hp{HP: 42, Ammo: 7}
	schema.QuantizeValue(plans[1], &h, lanes[plans[0].NumLanes():])
	m := entity.Meta{Gen: 9, Owner: 2, Set: 3}
	for _, me := range []uint8{2, 3} {
		var w bitio.Writer
		WriteFull(&w, plans, m, lanes, me == 2)
		b := w.Bytes()
		var r bitio.Reader
		r.Reset(b)
		got, back, err := ReadFull(&r, plans, me, nil)
		require.NoError(t, err)
		require.Equal(t, m, got)
		want := append([]uint64(nil), lanes...)
		if me != 2 {
			want[len(want)-1] = 0 // the owner-only Ammo is not sent
		}
		require.Equal(t, want, back)
		for cut := range len(b) - 1 {
			r.Reset(b[:cut])
			_, _, err := ReadFull(&r, plans, me, nil)
			require.Error(t, err, "cut to %d bytes", cut)
		}
	}
	// An entity without components is corrupt.
	var w bitio.Writer
	w.WriteExpGolomb(1, 0)
	w.WriteExpGolomb(0, 0)
	w.WriteBits(0, 2)
	var r bitio.Reader
	r.Reset(w.Bytes())
	_, _, err := ReadFull(&r, plans, 0, nil)
	require.ErrorIs(t, err, wire.ErrCorrupt)
}

func TestMaskRun(t *testing.T) {
	run := NewMaskRun()
	require.False(t, run.Repeats(0, 0), "nothing to repeat at the start")
	run.Note(0b101, 3)
	require.True(t, run.Repeats(0b101, 3))
	require.False(t, run.Repeats(0b101, 4))
	require.False(t, run.Repeats(0b100, 3))
	run.Note(1, 65) // too long to repeat
	require.False(t, run.Repeats(1, 65))
	require.False(t, run.Repeats(0b101, 3))
}

func TestStepCtx(t *testing.T) {
	for _, c := range []struct {
		step int64
		want int
	}{{0, 0}, {1, 1}, {-1, 1}, {2, 2}, {-3, 2}, {1 << 20, wire.MaxCodeCtx}, {-(1 << 40), wire.MaxCodeCtx}} {
		require.Equal(t, c.want, StepCtx(c.step), "step %d", c.step)
	}
}

// The zstd pair round-trips, keeps only wins, refuses compressed bodies
// until enabled, and refuses a body that inflates past MaxBody.
func TestZstd(t *testing.T) {
	comp, err := NewCompressor(nil)
	require.NoError(t, err)
	body := make([]byte, 1000)
	z := append([]byte(nil), comp.Compress(body)...) // (valid until the next call)
	require.NotNil(t, z)
	require.Less(t, len(z), len(body))
	require.Nil(t, comp.Compress([]byte{1, 2, 3}), "a body zstd does not shrink is kept raw")
	require.Equal(t, 2, comp.Tried)
	require.Equal(t, 1, comp.Won)

	var d Decompressor
	_, err = d.Decompress(z)
	require.ErrorIs(t, err, ErrNoDecompressor)
	require.NoError(t, d.Enable(nil))
	out, err := d.Decompress(z)
	require.NoError(t, err)
	require.Equal(t, body, out)
	_, err = d.Decompress([]byte{0x28, 0xb5, 0x2f, 0xfd, 0, 0, 0})
	require.ErrorIs(t, err, wire.ErrCorrupt)
	bomb := comp.Compress(make([]byte, 4*MaxBody))
	require.NotNil(t, bomb)
	_, err = d.Decompress(bomb)
	require.Error(t, err)
}
