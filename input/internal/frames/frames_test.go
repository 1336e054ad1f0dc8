package frames

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/input/internal/inputerr"
	"github.com/archenet/archenet/replication/bitio"
	"github.com/archenet/archenet/replication/schema"
)

// shooterInput is a typical first-person shooter input frame.
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

func newShooterCodec(t testing.TB, cfg Config) *Codec[shooterInput] {
	t.Helper()
	c, err := New[shooterInput](cfg)
	require.NoError(t, err)
	return c
}

// mapBaselines is a Baselines for tests.
type mapBaselines map[uint32][]uint64

func (m mapBaselines) Baseline(t uint32) ([]uint64, bool) { l, ok := m[t]; return l, ok }

func randomInput(rng *rand.Rand, prev shooterInput) shooterInput {
	in := prev
	if rng.IntN(4) == 0 {
		in.Keys ^= 1 << rng.IntN(16)
	}
	in.DX = prev.DX + float32(rng.NormFloat64()*3)
	in.DY = float32(rng.NormFloat64() * 2)
	if rng.IntN(8) == 0 {
		in.Buttons = uint8(rng.IntN(8))
	}
	if rng.IntN(30) == 0 {
		in.Weapon = uint8(rng.IntN(10))
	}
	if rng.IntN(20) == 0 {
		in.Crouch = !in.Crouch
	}
	in.Aim += float32(rng.NormFloat64() * 0.05)
	if rng.IntN(10) == 0 {
		in.Seq = int32(rng.IntN(1000)) - 500
	}
	if rng.IntN(50) == 0 {
		in.DX = float32(rng.Float64()*2000 - 1000) // far out of range: clamps
	}
	return in
}

func TestFramesRoundTrip(t *testing.T) {
	c := newShooterCodec(t, Config{Redundancy: 6})
	nl := c.NumLanes()
	rng := rand.New(rand.NewPCG(7, 8))
	var in shooterInput
	var frames []uint64
	for tick := 0; tick < 400; tick++ {
		in = randomInput(rng, in)
		lanes := make([]uint64, nl)
		c.Quantize(&in, lanes)
		frames = append(frames, lanes...)
	}
	var w bitio.Writer
	var dst Section
	for trial := 0; trial < 500; trial++ {
		n := 1 + rng.IntN(6)
		start := 70 + rng.IntN(300)
		first := uint32(65530 + start) // crosses the 16-bit wrap
		sec := frames[start*nl : (start+n)*nl]
		var base []uint64
		var baseTick uint32
		bases := mapBaselines{}
		if rng.IntN(3) > 0 {
			back := rng.IntN(40) - 6
			b := start - back
			base = frames[b*nl : (b+1)*nl]
			baseTick = first - uint32(back)
			bases[baseTick] = base
		}
		w.Reset(nil)
		c.AppendFrames(&w, first, sec, nil, baseTick, base)
		w.WriteBits(0x5a, 8) // a trailer the section must leave alone
		r := bitio.NewReader(w.Bytes())
		ref := first + uint32(rng.IntN(200)) - 100
		require.NoError(t, c.ReadFrames(r, ref, bases, &dst))
		require.Equal(t, first, dst.First)
		require.Equal(t, n, dst.Count)
		for i := 0; i < n; i++ {
			require.Equal(t, sec[i*nl:(i+1)*nl], dst.Lanes(i), "frame %d", i)
		}
		require.Equal(t, uint64(0x5a), r.ReadBits(8))
		require.NoError(t, r.Err())
	}
}

func TestFramesExactBytes(t *testing.T) {
	c := newShooterCodec(t, Config{})
	lanes := make([]uint64, c.NumLanes())
	var zero shooterInput
	c.Quantize(&zero, lanes)
	var w bitio.Writer
	c.AppendFrames(&w, 0x1234, lanes, nil, 0, nil)
	// first=0x1234 (16) | count−1=0 (5) | based=0 (1) | views=0 (1) | mask=0 (8 groups) = 31 bits.
	require.Equal(t, 31, w.BitLen())
	require.Equal(t, []byte{0x34, 0x12, 0, 0}, w.Bytes())

	// Keys=5 changed only: mask bit 0, then flag 1 + 16 absolute bits
	// (a residual of 5 from 0 costs more than... no: zigzag 10−1=9 at k=2 is
	// 5 bits, cheaper than 16), so flag 0 + EG2(9).
	in := shooterInput{Keys: 5}
	c.Quantize(&in, lanes)
	w.Reset(nil)
	c.AppendFrames(&w, 1, lanes, nil, 0, nil)
	require.Equal(t, 31+1+egLen(9, 2), w.BitLen())

	// With view lags: 10 bits for the first frame, exp-Golomb deltas after.
	two := append(append([]uint64(nil), lanes...), lanes...)
	w.Reset(nil)
	c.AppendFrames(&w, 1, two, []uint16{40, 41}, 0, nil)
	// (frame 1 equals frame 0: a new mask, of no group)
	require.Equal(t, 31+10+egLen(bitio.ZigZag(1), 0)+1+egLen(9, 2)+1+int(c.ng), w.BitLen())
	var dst Section
	require.NoError(t, c.ReadFrames(bitio.NewReader(w.Bytes()), 1, nil, &dst))
	for i, want := range []uint16{40, 41} {
		v, ok := dst.View(i)
		require.True(t, ok)
		require.Equal(t, want, v)
	}
	// Lags past MaxViewLag are written as it.
	w.Reset(nil)
	c.AppendFrames(&w, 1, lanes, []uint16{5000}, 0, nil)
	require.NoError(t, c.ReadFrames(bitio.NewReader(w.Bytes()), 1, nil, &dst))
	v, _ := dst.View(0)
	require.Equal(t, uint16(MaxViewLag), v)
}

func TestFramesTruncated(t *testing.T) {
	c := newShooterCodec(t, Config{})
	nl := c.NumLanes()
	rng := rand.New(rand.NewPCG(1, 1))
	var in shooterInput
	frames := make([]uint64, 4*nl)
	for i := 0; i < 4; i++ {
		in = randomInput(rng, in)
		c.Quantize(&in, frames[i*nl:])
	}
	var w bitio.Writer
	c.AppendFrames(&w, 100, frames, nil, 0, nil)
	full := w.Bytes()
	var dst Section
	require.NoError(t, c.ReadFrames(bitio.NewReader(full), 100, nil, &dst))
	for n := 0; n < len(full); n++ {
		err := c.ReadFrames(bitio.NewReader(full[:n]), 100, nil, &dst)
		require.ErrorIs(t, err, inputerr.ErrMalformed, "prefix %d of %d", n, len(full))
		require.ErrorIs(t, err, bitio.ErrShortBuffer)
	}
}

func TestFramesHostile(t *testing.T) {
	c := newShooterCodec(t, Config{Redundancy: 4})
	var dst Section
	t.Run("count above redundancy", func(t *testing.T) {
		var w bitio.Writer
		w.WriteBits(10, TickBits)
		w.WriteBits(31, countBits) // 32 frames
		w.WriteBits(0, 1)
		w.WriteBits(0, 64)
		err := c.ReadFrames(bitio.NewReader(w.Bytes()), 10, nil, &dst)
		require.ErrorIs(t, err, inputerr.ErrMalformed)
		require.Equal(t, 4*c.NumLanes(), cap(dst.lanes), "sized by the codec, not the count")
	})
	t.Run("out of range code", func(t *testing.T) {
		var w bitio.Writer
		w.WriteBits(10, TickBits)
		w.WriteBits(0, countBits)
		w.WriteBits(0, 1)
		w.WriteBits(0, 1)
		w.WriteBits(1<<3, c.ng) // Buttons group
		w.WriteBits(7, 3)       // valid (absolute-only lane of 3 bits)
		require.NoError(t, c.ReadFrames(bitio.NewReader(w.Bytes()), 10, nil, &dst))
		w.Reset(nil)
		w.WriteBits(10, TickBits)
		w.WriteBits(0, countBits)
		w.WriteBits(0, 1)
		w.WriteBits(0, 1)
		w.WriteBits(1<<4, c.ng) // Weapon: 0..9 in 4 bits
		w.WriteBits(15, 4)
		err := c.ReadFrames(bitio.NewReader(w.Bytes()), 10, nil, &dst)
		require.ErrorIs(t, err, inputerr.ErrMalformed)
		require.ErrorIs(t, err, schema.ErrCorrupt)
	})
	t.Run("residual leaves range", func(t *testing.T) {
		var w bitio.Writer
		w.WriteBits(10, TickBits)
		w.WriteBits(0, countBits)
		w.WriteBits(0, 1)
		w.WriteBits(0, 1)
		w.WriteBits(1<<1, c.ng) // DX, residual from the zero input's code 2048
		w.WriteBits(0, 1)
		w.WriteExpGolomb(2*5000-1, initialOrder) // +5000 steps
		err := c.ReadFrames(bitio.NewReader(w.Bytes()), 10, nil, &dst)
		require.ErrorIs(t, err, schema.ErrCorrupt)
	})
	t.Run("unknown baseline", func(t *testing.T) {
		nl := c.NumLanes()
		lanes := make([]uint64, nl)
		var w bitio.Writer
		c.AppendFrames(&w, 10, lanes, nil, 5, make([]uint64, nl))
		err := c.ReadFrames(bitio.NewReader(w.Bytes()), 10, mapBaselines{}, &dst)
		require.ErrorIs(t, err, ErrNoBaseline)
		err = c.ReadFrames(bitio.NewReader(w.Bytes()), 10, nil, &dst)
		require.ErrorIs(t, err, ErrNoBaseline)
	})
	t.Run("baseline outside window", func(t *testing.T) {
		var w bitio.Writer
		w.WriteBits(10, TickBits)
		w.WriteBits(0, countBits)
		w.WriteBits(1, 1)
		w.WriteExpGolomb(bitio.ZigZag(40), 0)
		err := c.ReadFrames(bitio.NewReader(w.Bytes()), 10, mapBaselines{}, &dst)
		require.ErrorIs(t, err, inputerr.ErrMalformed)
	})
	t.Run("mask per frame", func(t *testing.T) {
		type small struct {
			A uint8 `net:"range=0:3"`
		}
		cs, err := New[small](Config{})
		require.NoError(t, err)
		var w bitio.Writer
		w.WriteBits(10, TickBits)
		w.WriteBits(1, countBits)
		w.WriteBits(0, 1)
		w.WriteBits(0, 1) // no views
		w.WriteBits(0, 1) // frame 0: mask 0
		w.WriteBits(0, 1) // frame 1: new mask
		w.WriteBits(1, 1)
		w.WriteBits(3, 2)
		require.NoError(t, cs.ReadFrames(bitio.NewReader(w.Bytes()), 10, nil, &dst))
		require.Equal(t, uint64(3), dst.Lanes(1)[0])
	})
	t.Run("view lag leaves range", func(t *testing.T) {
		for _, d := range []int64{+1, -21} {
			var w bitio.Writer
			w.WriteBits(10, TickBits)
			w.WriteBits(1, countBits)
			w.WriteBits(0, 1)
			w.WriteBits(1, 1)
			w.WriteBits(map[int64]uint64{+1: MaxViewLag, -21: 20}[d], viewBits)
			w.WriteExpGolomb(bitio.ZigZag(d), 0)
			w.WriteBits(0, 64)
			err := c.ReadFrames(bitio.NewReader(w.Bytes()), 10, nil, &dst)
			require.ErrorIs(t, err, inputerr.ErrMalformed)
			require.ErrorContains(t, err, "view lag of frame 1 out of 0..1023")
		}
	})
	t.Run("garbage", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(3, 4))
		buf := make([]byte, 64)
		ok := 0
		for i := 0; i < 20000; i++ {
			n := rng.IntN(len(buf))
			for j := range buf[:n] {
				buf[j] = byte(rng.Uint32())
			}
			err := c.ReadFrames(bitio.NewReader(buf[:n]), 1000, mapBaselines{}, &dst)
			if err == nil {
				ok++
				require.LessOrEqual(t, dst.Count, 4)
			} else {
				require.True(t, errors.Is(err, inputerr.ErrMalformed) || errors.Is(err, ErrNoBaseline), "%v", err)
			}
		}
		t.Logf("%d of 20000 random sections decoded", ok)
	})
}

func TestCodecConfig(t *testing.T) {
	_, err := New[shooterInput](Config{Redundancy: 33})
	require.ErrorIs(t, err, inputerr.ErrInvalidConfig)
	_, err = New[shooterInput](Config{BaselineWindow: -1})
	require.ErrorIs(t, err, inputerr.ErrInvalidConfig)
	type bad struct{ X float32 }
	_, err = New[bad](Config{})
	require.Error(t, err)
	type none struct {
		X float32 `net:"-"`
	}
	_, err = New[none](Config{})
	require.Error(t, err)

	reg := schema.NewRegistry()
	c1, err := New[shooterInput](Config{Registry: reg})
	require.NoError(t, err)
	c2, err := New[shooterInput](Config{Registry: reg})
	require.NoError(t, err)
	require.Same(t, c1.Plan(), c2.Plan(), "an already registered input type reuses its plan")
}

func TestCodecClampsAndRounds(t *testing.T) {
	c := newShooterCodec(t, Config{})
	lanes := make([]uint64, c.NumLanes())
	in := shooterInput{DX: 10000, DY: -10000, Aim: 7, Note: "kept"}
	c.Round(&in, lanes)
	require.Equal(t, float32(512), in.DX)
	require.Equal(t, float32(-512), in.DY)
	require.Equal(t, "kept", in.Note)
	in.DX = 1.13
	c.Round(&in, lanes)
	require.Equal(t, float32(1.25), in.DX)
}
