package bitio

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBitOrderExactBytes(t *testing.T) {
	var w Writer
	w.WriteBits(1, 1)      // bit 0 of byte 0
	w.WriteBits(0b10, 2)   // bits 1..2
	w.WriteBits(0x1f, 5)   // bits 3..7
	w.WriteBits(0xabc, 12) // byte 1 = 0xbc, low nibble of byte 2 = 0xa
	w.WriteBool(true)
	require.Equal(t, []byte{0b11111101, 0xbc, 0x1a}, w.Bytes())
	require.Equal(t, 24, w.BitLen())
}

func TestUvarintExactBytes(t *testing.T) {
	var w Writer
	w.WriteUvarint(1)
	w.WriteUvarint(300)
	require.Equal(t, []byte{0x01, 0xac, 0x02}, w.Bytes())
	w.Reset(nil)
	w.WriteExpGolomb(0, 0) // "1"
	w.WriteExpGolomb(3, 0) // x=4 -> "00" "1" then "00" (x below its leading one)
	require.Equal(t, 6, w.BitLen())
	require.Equal(t, []byte{0b001001}, w.Bytes())
	w.Reset(nil)
	w.WriteExpGolomb(4, 0) // x=5 -> "00" "1" then 01 LSB first: bits 0,0,1,1,0
	require.Equal(t, []byte{0b01100}, w.Bytes())
}

type op struct {
	kind int
	v    uint64
	n    uint
}

func randOps(rng *rand.Rand, count int) []op {
	ops := make([]op, count)
	for i := range ops {
		o := op{kind: rng.IntN(6)}
		switch o.kind {
		case 0:
			o.n = uint(rng.IntN(65))
			o.v = rng.Uint64()
			if o.n < 64 {
				o.v &= 1<<o.n - 1
			}
		case 1:
			o.v = rng.Uint64() >> rng.IntN(64)
		case 2:
			o.v = uint64(rng.Int64() >> rng.IntN(64))
		case 3:
			o.v = rng.Uint64() >> (2 + rng.IntN(62))
			o.n = uint(rng.IntN(8))
		case 4:
			o.v = uint64(rng.IntN(2))
		case 5:
			o.n = 17
			o.v = uint64(int64(rng.IntN(1<<16)) - 1<<15)
		}
		ops[i] = o
	}
	return ops
}

func writeOps(w *Writer, ops []op) {
	for _, o := range ops {
		switch o.kind {
		case 0:
			w.WriteBits(o.v, o.n)
		case 1:
			w.WriteUvarint(o.v)
		case 2:
			w.WriteVarint(int64(o.v))
		case 3:
			w.WriteExpGolomb(o.v, o.n)
		case 4:
			w.WriteBool(o.v == 1)
		case 5:
			w.WriteBits(ZigZag(int64(o.v)), o.n)
		}
	}
}

func readOp(r *Reader, o op) uint64 {
	switch o.kind {
	case 0:
		return r.ReadBits(o.n)
	case 1:
		return r.ReadUvarint()
	case 2:
		return uint64(r.ReadVarint())
	case 3:
		return r.ReadExpGolomb(o.n)
	case 4:
		if r.ReadBool() {
			return 1
		}
		return 0
	default:
		return uint64(UnZigZag(r.ReadBits(o.n)))
	}
}

func TestRoundTripRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var w Writer
	for iter := 0; iter < 2000; iter++ {
		ops := randOps(rng, 1+rng.IntN(40))
		w.Reset(w.buf)
		writeOps(&w, ops)
		bitLen := w.BitLen()
		b := w.Bytes()
		require.Equal(t, (bitLen+7)/8, len(b))
		r := NewReader(b)
		for i, o := range ops {
			got := readOp(r, o)
			require.NoError(t, r.Err(), "op %d", i)
			require.Equal(t, o.v, got, "iter %d op %d kind %d", iter, i, o.kind)
		}
		require.Equal(t, bitLen, r.BitPos())
		require.Less(t, r.BitsLeft(), 8)
	}
}

// Every truncated prefix of a stream must fail with ErrShortBuffer and never
// return a value that was not written.
func TestTruncatedPrefixesFail(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var w Writer
	for iter := 0; iter < 200; iter++ {
		ops := randOps(rng, 1+rng.IntN(20))
		w.Reset(nil)
		writeOps(&w, ops)
		w.WriteBits(1, 1) // a final set bit so the last op cannot end in padding
		full := w.Bytes()
		for cut := 0; cut < len(full); cut++ {
			r := NewReader(full[:cut])
			for _, o := range ops {
				readOp(r, o)
			}
			r.ReadBits(1)
			require.Error(t, r.Err(), "iter %d cut %d of %d", iter, cut, len(full))
		}
	}
}

func TestReaderStickyZero(t *testing.T) {
	r := NewReader([]byte{0xff})
	require.Equal(t, uint64(0x7f), r.ReadBits(7))
	require.Equal(t, uint64(0), r.ReadBits(2)) // only 1 bit left
	require.ErrorIs(t, r.Err(), ErrShortBuffer)
	require.Equal(t, uint64(0), r.ReadBits(1)) // sticky: no garbage after failure
	require.False(t, r.ReadBool())
	require.Equal(t, 0, r.BitsLeft())
	r.Reset([]byte{1})
	require.NoError(t, r.Err())
	require.Equal(t, uint64(0), r.ReadBits(65))
	require.ErrorIs(t, r.Err(), ErrShortBuffer)
}

func TestUvarintOverflow(t *testing.T) {
	r := NewReader([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02})
	r.ReadUvarint()
	require.ErrorIs(t, r.Err(), ErrOverflow)
	r.Reset([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	require.Equal(t, uint64(math.MaxUint64), r.ReadUvarint())
	require.NoError(t, r.Err())
	r.Reset(make([]byte, 20)) // 160 zero bits: an exp-Golomb prefix that never ends
	r.ReadExpGolomb(0)
	require.ErrorIs(t, r.Err(), ErrOverflow)
}

func TestZigZag(t *testing.T) {
	for _, c := range []struct {
		v int64
		u uint64
	}{{0, 0}, {-1, 1}, {1, 2}, {-2, 3}, {math.MaxInt64, math.MaxUint64 - 1}, {math.MinInt64, math.MaxUint64}} {
		require.Equal(t, c.u, ZigZag(c.v))
		require.Equal(t, c.v, UnZigZag(c.u))
	}
}

func TestAppendBitsAndAlign(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for iter := 0; iter < 300; iter++ {
		var a, b, want Writer
		opsA := randOps(rng, rng.IntN(10))
		opsB := randOps(rng, rng.IntN(30))
		writeOps(&a, opsA)
		writeOps(&want, opsA)
		writeOps(&b, opsB)
		writeOps(&want, opsB)
		n := b.BitLen()
		a.AppendBits(b.Bytes(), n)
		require.Equal(t, want.BitLen(), a.BitLen())
		require.Equal(t, want.Bytes(), a.Bytes())
	}
	var w Writer
	w.WriteBits(1, 3)
	w.Align()
	w.WriteBits(0xbbaa, 16)
	require.Equal(t, []byte{1, 0xaa, 0xbb}, w.Bytes())
	r := NewReader(w.Bytes())
	require.Equal(t, uint64(1), r.ReadBits(3))
	r.Align()
	require.Equal(t, uint64(0xbbaa), r.ReadBits(16))
}

func TestWriterReuseAllocs(t *testing.T) {
	buf := make([]byte, 0, 256)
	var w Writer
	allocs := testing.AllocsPerRun(100, func() {
		w.Reset(buf)
		for i := 0; i < 50; i++ {
			w.WriteBits(uint64(i), 20)
			w.WriteUvarint(uint64(i) * 1000)
		}
		buf = w.Bytes()
	})
	require.Zero(t, allocs)
}

// WriteBits ignores the bits of v above n at every alignment, including a
// whole word, and refuses widths over 64.
func TestWriteBitsIgnoresHighBits(t *testing.T) {
	for align := uint(0); align < 64; align++ {
		for _, n := range []uint{0, 1, 7, 33, 63, 64} {
			var w Writer
			w.WriteBits(0, align)
			w.WriteBits(math.MaxUint64, n)
			w.WriteBits(0, 5)
			r := NewReader(w.Bytes())
			require.Equal(t, uint64(0), r.ReadBits(align))
			want := uint64(math.MaxUint64)
			if n < 64 {
				want = 1<<n - 1
			}
			require.Equal(t, want, r.ReadBits(n), "align %d n %d", align, n)
			require.Equal(t, uint64(0), r.ReadBits(5), "align %d n %d", align, n)
			require.NoError(t, r.Err())
		}
	}
	require.Panics(t, func() { new(Writer).WriteBits(1, 65) })
}

// Rice codes round-trip at every order, take RiceLen bits, and a truncated
// code fails.
func TestRiceRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for range 20000 {
		k := uint(rng.IntN(30))
		var v uint64
		switch rng.IntN(3) {
		case 0:
			v = rng.Uint64N(4 << k)
		case 1:
			v = rng.Uint64N(1 << 62)
		default:
			v = rng.Uint64N(1 << uint(rng.IntN(63)))
		}
		var w Writer
		w.WriteBits(0, uint(rng.IntN(8)))
		start := w.BitLen()
		w.WriteRice(v, k)
		if got := w.BitLen() - start; got != RiceLen(v, k) {
			t.Fatalf("RiceLen(%d, %d) = %d, wrote %d", v, k, RiceLen(v, k), got)
		}
		end := w.BitLen()
		code := append([]byte(nil), w.Bytes()...)
		for pad := range 2 {
			b := code
			if pad == 1 {
				b = append(append([]byte(nil), code...), make([]byte, 9)...)
			}
			r := NewReader(b)
			r.ReadBits(uint(start))
			if got := r.ReadRice(k); got != v || r.Err() != nil || r.BitPos() != end {
				t.Fatalf("ReadRice(%d) = %d (%v) at %d, want %d at %d", k, got, r.Err(), r.BitPos(), v, end)
			}
		}
		r := NewReader(code[:(end-1)/8])
		r.ReadBits(uint(min(start, r.BitsLeft())))
		if r.ReadRice(k); r.Err() == nil && end-start > 8 {
			t.Fatalf("truncated Rice code of %d at order %d read without error", v, k)
		}
	}
}

// ExpGolombCode is exactly what WriteExpGolomb writes, as one field, with
// the length egLen-style arithmetic gives.
func TestExpGolombCodeMatchesWriter(t *testing.T) {
	for k := uint(0); k <= 7; k++ {
		for _, v := range []uint64{0, 1, 2, 3, 6, 7, 100, 1<<20 - 1, 1<<24 - 1, 1<<30 - 1} {
			var a, b Writer
			a.WriteExpGolomb(v, k)
			code, n := ExpGolombCode(v, k)
			b.WriteBits(code, n)
			if a.BitLen() != int(n) || !bytes.Equal(a.Bytes(), b.Bytes()) {
				t.Fatalf("v=%d k=%d: writer %d bits %x, code %d bits %x", v, k, a.BitLen(), a.Bytes(), n, b.Bytes())
			}
		}
	}
	if _, n := ExpGolombCode(1<<40, 0); n < 64 {
		t.Fatalf("a 2^40 code in %d bits", n)
	}
}

// RiceCode's short codes, put with PutBits, are what WriteRice writes; it
// refuses exactly the codes that take the escape.
func TestRiceCodeMatchesWriter(t *testing.T) {
	for k := uint(0); k <= 29; k++ {
		for _, v := range []uint64{0, 1, 2, 1 << k, 2<<k + 1<<k - 1, 3 << k, 3<<k + 1, 1<<61 + 5} {
			var a, b Writer
			a.WriteBits(5, 3)
			b.WriteBits(5, 3)
			a.WriteRice(v, k)
			code, n, ok := RiceCode(v, k)
			if ok != (v>>k < riceLimit) {
				t.Fatalf("RiceCode(%d, %d) ok = %v", v, k, ok)
			}
			if !ok {
				continue
			}
			b.PutBits(code, n)
			if a.BitLen() != b.BitLen() || int(n) != RiceLen(v, k) || !bytes.Equal(a.Bytes(), b.Bytes()) {
				t.Fatalf("v=%d k=%d: writer %d bits %x, code %d bits %x", v, k, a.BitLen(), a.Bytes(), n, b.Bytes())
			}
		}
	}
}

// Truncate drops exactly the bits after its position, within the pending
// word, in flushed words and after Bytes; writing on gives the stream of a
// writer that never wrote them.
func TestTruncate(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	for range 2000 {
		var w, want Writer
		n := rng.IntN(300)
		for w.BitLen() < n {
			k := uint(1 + rng.IntN(64))
			v := rng.Uint64()
			w.WriteBits(v, k)
			want.WriteBits(v, k)
		}
		keep := rng.IntN(w.BitLen() + 1)
		if rng.IntN(3) == 0 {
			w.Bytes() // flushed: the pending bits went to the buffer
			keep = min(keep, w.BitLen())
		}
		w.Truncate(keep)
		require.Equal(t, keep, w.BitLen())
		ref := NewReader(want.Bytes())
		var ok Writer
		for left := keep; left > 0; {
			k := min(left, 64)
			ok.WriteBits(ref.ReadBits(uint(k)), uint(k))
			left -= k
		}
		tail := rng.Uint64()
		w.WriteBits(tail, 37)
		ok.WriteBits(tail, 37)
		require.Equal(t, ok.Bytes(), w.Bytes())
	}
	var w Writer
	w.WriteBits(1, 3)
	require.Panics(t, func() { w.Truncate(4) })
}

// TestTail: the bits since a byte-aligned position come back as written,
// wherever they lie (bytes flushed, the accumulator, or both), and more
// than 56 are refused.
func TestTail(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for range 3000 {
		var w Writer
		for w.BitLen() < rng.IntN(200) {
			k := uint(1 + rng.IntN(64))
			w.WriteBits(rng.Uint64(), k)
		}
		w.Align()
		start := w.BitLen()
		var fields []uint64
		var widths []uint
		for w.BitLen()-start < rng.IntN(70) {
			k := uint(1 + rng.IntN(20))
			v := rng.Uint64() & (1<<k - 1)
			w.WriteBits(v, k)
			fields, widths = append(fields, v), append(widths, k)
		}
		n := w.BitLen() - start
		got, ok := w.Tail(start)
		if n > 56 {
			require.False(t, ok, "%d bits", n)
			continue
		}
		require.True(t, ok)
		var want uint64
		shift := uint(0)
		for i, v := range fields {
			want |= v << shift
			shift += widths[i]
		}
		require.Equal(t, want, got, "%d bits from %d", n, start)
	}
	var w Writer
	w.WriteBits(1, 3)
	_, ok := w.Tail(1)
	require.False(t, ok, "an unaligned start")
}

// ExpGolombLen is the length WriteExpGolomb writes, and ExpGolombCode's n.
func TestExpGolombLen(t *testing.T) {
	for k := uint(0); k <= 7; k++ {
		for _, v := range []uint64{0, 1, 2, 3, 6, 7, 100, 1 << 20, 1<<31 - 1, 1 << 40} {
			var w Writer
			w.WriteExpGolomb(v, k)
			_, n := ExpGolombCode(v, k)
			if got := ExpGolombLen(v, k); got != w.BitLen() || got != int(n) {
				t.Fatalf("ExpGolombLen(%d, %d) = %d, written %d, code %d", v, k, got, w.BitLen(), n)
			}
		}
	}
}
