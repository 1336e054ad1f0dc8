package bitio

import (
	"encoding/binary"
	"math/bits"
)

// Writer appends bit fields to a byte slice. The zero value is ready to use;
// [Writer.Reset] reuses a buffer so that steady-state encoding allocates
// nothing.
//
// Bit order: the stream is a little-endian bit string. The first bit written
// is bit 0 (the least significant bit) of byte 0; an n-bit field is written
// least significant bit first. Equivalently, the stream is the concatenation
// of all fields as one little-endian integer. Whole 64-bit words are emitted
// with explicit little-endian byte order, so the bytes are identical on every
// platform.
type Writer struct {
	buf []byte
	acc uint64 // pending bits; bit 0 is the next stream bit
	n   uint   // number of pending bits in acc, 0..63
}

// NewWriter returns a writer that appends to buf[:0].
func NewWriter(buf []byte) *Writer {
	return &Writer{buf: buf[:0]}
}

// Reset discards written bits and reuses buf[:0] as the output buffer.
func (w *Writer) Reset(buf []byte) {
	w.buf = buf[:0]
	w.acc = 0
	w.n = 0
}

// BitLen returns the number of bits written so far.
func (w *Writer) BitLen() int { return len(w.buf)*8 + int(w.n) }

// Len returns the number of bytes [Writer.Bytes] would return now.
func (w *Writer) Len() int { return len(w.buf) + int(w.n+7)/8 }

// WriteBits writes the low n bits of v (n ≤ 64; higher bits of v are
// ignored). Cost: O(1), allocation-free once the buffer has grown.
// Panics if n > 64.
func (w *Writer) WriteBits(v uint64, n uint) {
	if n > 64 {
		panic("bitio: WriteBits width > 64")
	}
	if n < 64 {
		w.PutBits(v&(1<<n-1), n)
		return
	}
	w.acc |= v << (w.n & 63)
	w.n += 64
	w.spill(v, 64)
}

// PutBits writes the n bits of v: [Writer.WriteBits] without its checks,
// for hot loops (it inlines). It requires n < 64 and v < 2^n; anything else
// corrupts the stream.
func (w *Writer) PutBits(v uint64, n uint) {
	// w.n < 64 always, so the shift is in range; the &63 tells the
	// compiler, which then skips Go's oversized-shift rule.
	w.acc |= v << (w.n & 63)
	if w.n += n; w.n >= 64 {
		w.spill(v, n)
	}
}

// spill emits the full word in acc after the n bits of v were or-ed into it
// (w.n counts them: at least 64 now), and keeps the bits of v that did not
// fit. It is kept out of line so that PutBits, which calls it once every 64
// bits, inlines.
//
//go:noinline
func (w *Writer) spill(v uint64, n uint) {
	if l := len(w.buf); l+8 <= cap(w.buf) {
		// Reslicing in place stores no pointer: no GC write barrier.
		w.buf = w.buf[:l+8]
		binary.LittleEndian.PutUint64(w.buf[l:], w.acc)
	} else {
		w.buf = binary.LittleEndian.AppendUint64(w.buf, w.acc)
	}
	// The bits of v that did not fit: v >> (64 − old), where old = w.n − n
	// was the fill before v; 0 when old is 0 (two shifts, each below 64).
	old := w.n - n
	w.acc = v >> 1 >> ((63 - old) & 63)
	w.n -= 64
}

// WriteBool writes one bit: 1 for true.
func (w *Writer) WriteBool(b bool) {
	var v uint64
	if b {
		v = 1
	}
	w.WriteBits(v, 1)
}

// WriteUvarint writes v in groups of 7 bits, least significant group first,
// each followed by a continuation bit (1 = more groups follow). Values below
// 128 take 8 bits; the largest take 80 bits.
func (w *Writer) WriteUvarint(v uint64) {
	for v >= 0x80 {
		w.WriteBits(v&0x7f|0x80, 8)
		v >>= 7
	}
	w.WriteBits(v, 8)
}

// WriteVarint writes the zigzag encoding of v with [Writer.WriteUvarint].
func (w *Writer) WriteVarint(v int64) { w.WriteUvarint(ZigZag(v)) }

// WriteExpGolomb writes v with an order-k exponential-Golomb code laid out
// least significant bit first: for x = v + 2^k with bit length L, the code
// is L−k−1 zero bits, a one bit, then the L−1 bits of x below its leading
// one, least significant first. Small values are cheap: with k = 0, 0 takes
// 1 bit, 1–2 take 3 bits, 3–6 take 5 bits. Panics if v ≥ 2^62 or k > 30
// (callers pick k from trusted configuration).
func (w *Writer) WriteExpGolomb(v uint64, k uint) {
	if v >= 1<<62 || k > 30 {
		panic("bitio: WriteExpGolomb out of range")
	}
	if code, n := ExpGolombCode(v, k); n < 64 {
		w.PutBits(code, n)
		return
	}
	x := v + 1<<k
	l := uint(bits.Len64(x))
	w.WriteBits(0, l-k-1)
	w.WriteBits(1, 1)
	w.WriteBits(x&^(1<<(l-1)), l-1)
}

// ExpGolombLen returns the length in bits of v's exp-Golomb code of order k
// ([Writer.WriteExpGolomb]), for v < 2^62: what a size estimate needs
// without writing.
func ExpGolombLen(v uint64, k uint) int {
	l := bits.Len64(v + 1<<k)
	return 2*(l-1-int(k)) + 1 + int(k)
}

// ExpGolombCode returns the bits [Writer.WriteExpGolomb] writes for v at
// order k (v < 2^62, k ≤ 30), as one field of n bits, least significant
// first; the field holds them only when n < 64 (v below about 2^31), which
// callers that write it with one [Writer.WriteBits] must check or know.
func ExpGolombCode(v uint64, k uint) (code uint64, n uint) {
	x := v + 1<<k
	l := uint(bits.Len64(x))
	z := l - k - 1 // zero prefix
	n = 2*z + 1 + k
	if n >= 64 {
		return 0, n
	}
	// n < 64: z < 32 and l ≤ 63, so the shifts are in range (the &63 tells
	// the compiler, which then skips Go's oversized-shift rule).
	return 1<<(z&63) | (x&^(1<<((l-1)&63)))<<((z+1)&63), n
}

// Tail returns the bits written since bit position start, a multiple of
// 8, as one field (least significant first), when there are at most 56 of
// them; ok is false otherwise.
func (w *Writer) Tail(start int) (v uint64, ok bool) {
	n := w.BitLen() - start
	if start < 0 || start%8 != 0 || n < 0 || n > 56 {
		return 0, false
	}
	if done := len(w.buf) * 8; start >= done {
		// All in the accumulator (which holds no bits beyond w.n < 64).
		return w.acc >> (uint(start-done) & 63) & (1<<uint(n) - 1), true
	}
	k := uint(0)
	for _, b := range w.buf[start/8:] {
		v |= uint64(b) << k
		k += 8
	}
	// k ≤ n ≤ 56: the shift is in range.
	v |= w.acc << (k & 63)
	return v & (1<<uint(n) - 1), true
}

// Truncate drops every bit written after the first n (n ≤ BitLen()): the
// writer continues at bit n.
func (w *Writer) Truncate(n int) {
	if n < 0 || n > w.BitLen() {
		panic("bitio: Truncate beyond the written bits")
	}
	if full := len(w.buf) * 8; n >= full {
		w.n = uint(n - full)
		w.acc &= 1<<w.n - 1
		return
	}
	keep, r := n/8, uint(n%8)
	w.acc, w.n = 0, r
	if r != 0 {
		w.acc = uint64(w.buf[keep]) & (1<<r - 1)
	}
	w.buf = w.buf[:keep]
}

// Align pads with zero bits up to the next byte boundary.
func (w *Writer) Align() {
	if r := w.n % 8; r != 0 {
		w.WriteBits(0, 8-r)
	}
}

// AppendBits appends the first nbits bits of src (a stream produced by
// another Writer) at the current bit position. Cost: O(nbits/64), one
// 64-bit write per word.
func (w *Writer) AppendBits(src []byte, nbits int) {
	for nbits >= 64 {
		x := binary.LittleEndian.Uint64(src)
		w.PutBits(x&(1<<32-1), 32) // (PutBits inlines; WriteBits of 64 bits does not)
		w.PutBits(x>>32, 32)
		src = src[8:]
		nbits -= 64
	}
	if nbits <= 0 {
		return
	}
	var v uint64
	if len(src) >= 8 {
		v = binary.LittleEndian.Uint64(src)
	} else {
		for i := 0; i < len(src) && i*8 < nbits; i++ {
			v |= uint64(src[i]) << (8 * i)
		}
	}
	w.PutBits(v&(1<<uint(nbits)-1), uint(nbits))
}

// Bytes flushes pending bits (padding the last byte with zeros) and returns
// the encoded stream. The writer stays usable: later writes continue at the
// next byte boundary. The returned slice aliases the writer's buffer until
// the next Reset.
func (w *Writer) Bytes() []byte {
	for w.n > 0 {
		w.buf = append(w.buf, byte(w.acc))
		w.acc >>= 8
		if w.n < 8 {
			w.n = 0
		} else {
			w.n -= 8
		}
	}
	w.acc = 0
	return w.buf
}

// ZigZag maps signed to unsigned integers so that values of small magnitude
// get small codes: 0→0, −1→1, 1→2, −2→3, …
func ZigZag(v int64) uint64 { return uint64(v<<1) ^ uint64(v>>63) }

// UnZigZag inverts [ZigZag].
func UnZigZag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

// riceLimit is the longest unary quotient of a Rice code ([Writer.WriteRice]);
// larger values take the escape.
const riceLimit = 3

// WriteRice writes v as a Golomb–Rice code of order k whose unary quotient
// is limited: for q = v>>k below 3, q zero bits, a one bit and
// the k low bits of v; otherwise three zero bits, then the order-(k+1)
// exp-Golomb code of v − 3·2^k. Residuals near their typical size
// take fewer bits than with exp-Golomb; the tail grows as exp-Golomb.
// It panics unless v < 2^62 and k ≤ 29.
func (w *Writer) WriteRice(v uint64, k uint) {
	if v >= 1<<62 || k > 29 {
		panic("bitio: WriteRice out of range")
	}
	if code, n, ok := RiceCode(v, k); ok {
		w.PutBits(code, n)
		return
	}
	w.WriteBits(0, riceLimit)
	w.WriteExpGolomb(v-riceLimit<<k, k+1)
}

// RiceCode returns [Writer.WriteRice]'s code of v at order k ≤ 29 and its
// length when its quotient is below 3 (ok; else the code takes
// the escape, which WriteRice writes), for [Writer.PutBits] in hot loops.
func RiceCode(v uint64, k uint) (code uint64, n uint, ok bool) {
	k &= 63
	if q := v >> k; q < riceLimit {
		return (v&(1<<k-1))<<(q+1) | 1<<q, uint(q) + 1 + k, true
	}
	return 0, 0, false
}

// RiceLen returns the length in bits of [Writer.WriteRice]'s code of v at
// order k.
func RiceLen(v uint64, k uint) int {
	if q := v >> k; q < riceLimit {
		return int(q) + 1 + int(k)
	}
	x := v - riceLimit<<k + 1<<(k+1)
	return riceLimit + 2*bits.Len64(x) - int(k) - 2
}
