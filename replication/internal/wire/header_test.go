package wire

import (
	"math/rand/v2"
	"testing"

	"github.com/archenet/archenet/replication/bitio"
	"github.com/stretchr/testify/require"
)

func randomHeader(rng *rand.Rand) Header {
	h := Header{Tick: 1 + rng.Uint32N(1<<31), Parts: 1 + rng.IntN(MaxParts), GapOrder: uint8(rng.IntN(8)), Count: rng.IntN(3000)}
	h.Part = rng.IntN(h.Parts)
	if rng.IntN(4) != 0 {
		h.Baseline = 1 + rng.Uint32N(min(h.Tick-1, 127)+1)
		if h.Baseline >= h.Tick {
			h.Baseline = 0
		}
	}
	if h.Baseline != 0 && uint64(h.Baseline)+2 < uint64(h.Tick) && rng.IntN(2) == 0 {
		h.Predict = true
		h.PredictGap = rng.Uint32N(min(h.Tick-h.Baseline-1, 100))
		h.Quad = uint64(h.Baseline)+2*(uint64(h.PredictGap)+1) < uint64(h.Tick) && rng.IntN(2) == 0
	}
	h.Coding = DefaultCoding
	if h.Baseline != 0 {
		if h.CodingInherited = rng.IntN(2) == 0; h.CodingInherited {
			h.Coding = Coding{} // not on the wire
		} else {
			h.Coding = randomCoding(rng)
		}
	}
	if rng.IntN(3) != 0 {
		h.HasInputAck = true
		if h.Baseline != 0 && rng.IntN(2) == 0 {
			h.InputAckRelative = true
			h.InputAck = uint32(int32(rng.IntN(2*MaxInputLead+1) - MaxInputLead))
		} else {
			h.InputAck = rng.Uint32()
		}
		if rng.IntN(2) == 0 {
			h.HasInputFeedback = true
			h.InputLead = int64(rng.IntN(2*MaxInputLead+1) - MaxInputLead)
			h.InputDepth = int64(rng.IntN(2*MaxInputDepth+1) - MaxInputDepth)
		}
	}
	return h
}

func randomCoding(rng *rand.Rand) Coding {
	var c Coding
	for cl := range NumClasses {
		c.Off[cl] = int8(MinCodeOff + rng.IntN(MaxCodeOff-MinCodeOff+1))
		c.Cap[cl] = uint8(rng.IntN(MaxCodeCap + 1))
		c.Plain[cl] = uint8(rng.IntN(MaxCodeCap + 1))
	}
	return c
}

// Every valid header round-trips, takes exactly BitLen bits (at most
// MaxHeaderBits), and every truncation of it fails.
func TestHeaderRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 5000 {
		h := randomHeader(rng)
		require.NoError(t, h.Check(), "%+v", h)
		var w bitio.Writer
		h.AppendBits(&w)
		require.Equal(t, h.BitLen(), w.BitLen())
		require.LessOrEqual(t, h.BitLen(), MaxHeaderBits)
		// Records follow the header: leave room so Count is plausible.
		for range (h.Count*2 + 7) / 8 {
			w.WriteBits(0, 8)
		}
		b := w.Bytes()
		var r bitio.Reader
		r.Reset(b)
		got, err := ReadHeader(&r)
		require.NoError(t, err, "%+v", h)
		require.Equal(t, h, got)
		require.Equal(t, h.BitLen(), r.BitPos())
		for cut := 0; cut < (h.BitLen()+7)/8-1; cut++ {
			r.Reset(b[:cut])
			_, err := ReadHeader(&r)
			require.Error(t, err, "header cut to %d bytes", cut)
		}
	}
}

// ParseHeader reads the header of a whole datagram (kind byte first) and
// refuses other kinds, compressed datagrams and truncated headers.
func TestParseHeader(t *testing.T) {
	h := Header{Tick: 77, Part: 1, Parts: 3, Baseline: 2, Count: 5, GapOrder: 1, Coding: DefaultCoding}
	require.NoError(t, h.Check())
	var w bitio.Writer
	h.AppendBits(&w)
	for range 2 {
		w.WriteBits(0, 8)
	}
	b := append([]byte{KindSnapshot}, w.Bytes()...)
	got, err := ParseHeader(b)
	require.NoError(t, err)
	require.Equal(t, h, got)
	_, err = ParseHeader(append([]byte{0x02}, b[1:]...))
	require.ErrorIs(t, err, ErrNotSnapshot)
	_, err = ParseHeader(nil)
	require.ErrorIs(t, err, ErrNotSnapshot)
	_, err = ParseHeader(append([]byte{KindSnapshot | FlagCompressed}, b[1:]...))
	require.ErrorIs(t, err, ErrCompressed)
	_, err = ParseHeader(b[:3])
	require.Error(t, err)
}

func TestHeaderCheck(t *testing.T) {
	ok := Header{Tick: 10, Parts: 1}
	require.NoError(t, ok.Check())
	for name, h := range map[string]Header{
		"tick 0":                  {Parts: 1},
		"no parts":                {Tick: 10},
		"part beyond parts":       {Tick: 10, Part: 2, Parts: 2},
		"too many parts":          {Tick: 10, Parts: MaxParts + 1},
		"baseline before tick 1":  {Tick: 10, Parts: 1, Baseline: 10},
		"prediction without base": {Tick: 10, Parts: 1, Predict: true},
		"prediction view too old": {Tick: 10, Parts: 1, Baseline: 4, Predict: true, PredictGap: 5},
		"relative ack, no base":   {Tick: 10, Parts: 1, HasInputAck: true, InputAckRelative: true},
		"ack step too large":      {Tick: 10, Parts: 1, Baseline: 1, HasInputAck: true, InputAckRelative: true, InputAck: MaxInputLead + 1},
		"lead too large":          {Tick: 10, Parts: 1, HasInputAck: true, HasInputFeedback: true, InputLead: MaxInputLead + 1},
		"depth too small":         {Tick: 10, Parts: 1, HasInputAck: true, HasInputFeedback: true, InputDepth: -MaxInputDepth - 1},
	} {
		require.ErrorIs(t, h.Check(), ErrCorrupt, name)
	}
}

// FuzzHeader: any bytes either fail to parse, or parse to a header that is
// valid, re-encodes to the bits it was read from, and says how long it is.
func FuzzHeader(f *testing.F) {
	rng := rand.New(rand.NewPCG(1, 1))
	for range 20 {
		h := randomHeader(rng)
		h.Count = 0
		var w bitio.Writer
		h.AppendBits(&w)
		f.Add(w.Bytes())
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var r bitio.Reader
		r.Reset(b)
		h, err := ReadHeader(&r)
		if err != nil {
			return
		}
		if err := h.Check(); err != nil {
			t.Fatalf("parsed an invalid header: %v", err)
		}
		if r.BitPos() != h.BitLen() {
			t.Fatalf("read %d bits, BitLen says %d", r.BitPos(), h.BitLen())
		}
		var w bitio.Writer
		h.AppendBits(&w)
		again := w.Bytes()
		var r2 bitio.Reader
		r2.Reset(append(again, make([]byte, len(b))...))
		h2, err := ReadHeader(&r2)
		if err != nil || h2 != h {
			t.Fatalf("re-encoded header reads back as %+v (%v), want %+v", h2, err, h)
		}
	})
}
