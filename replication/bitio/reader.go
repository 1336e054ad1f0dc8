package bitio

import (
	"encoding/binary"
	"errors"
	"math/bits"
)

// ErrShortBuffer is the sticky error of a [Reader] that was asked for more
// bits than its buffer holds.
var ErrShortBuffer = errors.New("bitio: read past end of buffer")

// ErrOverflow is the sticky error of a [Reader] that decoded a
// variable-length integer too long for 64 bits.
var ErrOverflow = errors.New("bitio: variable-length integer overflows 64 bits")

// Reader reads the bit streams [Writer] produces (same bit order). It fails
// closed: once a read would pass the end of the buffer, or a variable-length
// code is malformed, the reader records a sticky error, and that read and all
// later ones return zero values. Check [Reader.Err] once after a group of
// reads. A Reader never panics on any input.
type Reader struct {
	buf []byte
	pos uint // bit position
	max uint // len(buf)*8
	err error
}

// NewReader returns a reader over buf.
func NewReader(buf []byte) *Reader {
	r := &Reader{}
	r.Reset(buf)
	return r
}

// Reset starts reading buf from its first bit and clears the error.
func (r *Reader) Reset(buf []byte) {
	r.buf = buf
	r.pos = 0
	r.max = uint(len(buf)) * 8
	r.err = nil
}

// Err returns the sticky error, or nil.
func (r *Reader) Err() error { return r.err }

// SetErr records err as the sticky error if none is set yet, so callers
// can fail a stream for semantic reasons (a value out of range) the same way
// as for truncation.
func (r *Reader) SetErr(err error) {
	if err != nil {
		r.fail(err)
	}
}

// BitPos returns the number of bits consumed.
func (r *Reader) BitPos() int { return int(r.pos) }

// BitsLeft returns the number of unread bits.
func (r *Reader) BitsLeft() int {
	if r.err != nil {
		return 0
	}
	return int(r.max - r.pos)
}

func (r *Reader) fail(err error) uint64 {
	if r.err == nil {
		r.err = err
	}
	r.pos = r.max
	return 0
}

// ReadBits reads an n-bit field (n ≤ 64). A request for n > 64 bits is an
// error, like a read past the end.
func (r *Reader) ReadBits(n uint) uint64 {
	// Small enough to inline: a field of up to 57 bits whose 8-byte window
	// lies in the buffer (then it also ends in the buffer: pos+n ≤ 8i+64).
	// After an error pos == max, so the window never fits and readBits
	// fails every later read.
	if i := r.pos >> 3; n <= 57 && uint64(i)+8 <= uint64(len(r.buf)) {
		v := binary.LittleEndian.Uint64(r.buf[i:]) >> (r.pos & 7)
		r.pos += n
		return v & (1<<n - 1)
	}
	return r.readBits(n)
}

// readBits is ReadBits for wide fields, the last bytes of the buffer and
// failures.
func (r *Reader) readBits(n uint) uint64 {
	if n > r.max-r.pos || n > 64 {
		return r.fail(ErrShortBuffer)
	}
	i := r.pos >> 3
	sh := r.pos & 7
	var v uint64
	if int(i)+8 <= len(r.buf) {
		v = binary.LittleEndian.Uint64(r.buf[i:]) >> sh
		if sh+n > 64 { // the field spills into a ninth byte
			v |= uint64(r.buf[i+8]) << ((64 - sh) & 63)
		}
	} else {
		v = r.tail(i) >> sh // sh+n ≤ 64 here: the field ends in the buffer
	}
	r.pos += n
	return v & (1<<n - 1) // n = 64: 1<<64 is 0 in Go, and 0−1 is all ones
}

// tail returns the bytes from i on (fewer than 8) as a little-endian word.
func (r *Reader) tail(i uint) uint64 {
	b := r.buf
	if len(b) >= 8 { // the last word of the buffer, shifted down to byte i
		return binary.LittleEndian.Uint64(b[len(b)-8:]) >> ((8 * (i - uint(len(b)-8))) & 63)
	}
	var v uint64
	for k := uint(0); i+k < uint(len(b)); k++ {
		v |= uint64(b[i+k]) << ((8 * k) & 63)
	}
	return v
}

// Peek57 returns the next 57 bits without consuming them (bit 0 is the next
// bit), for decoders that take several short fields from one load. ok is
// false, and the caller reads field by field, when fewer than 8 bytes are
// left from the current byte or after an error.
func (r *Reader) Peek57() (bits uint64, ok bool) {
	if i := r.pos >> 3; uint64(i)+8 <= uint64(len(r.buf)) {
		return binary.LittleEndian.Uint64(r.buf[i:]) >> (r.pos & 7) & (1<<57 - 1), true
	}
	return 0, false
}

// Skip consumes n bits, typically fields decoded from [Reader.Peek57].
// Skipping past the end is a short read.
func (r *Reader) Skip(n uint) {
	if n > r.max-r.pos {
		r.fail(ErrShortBuffer)
		return
	}
	r.pos += n
}

// ReadBool reads one bit.
func (r *Reader) ReadBool() bool { return r.ReadBits(1) == 1 }

// ReadUvarint reads a value written by [Writer.WriteUvarint]. At most 10
// groups are read; a longer or overflowing code is [ErrOverflow].
func (r *Reader) ReadUvarint() uint64 {
	var v uint64
	for i := uint(0); i < 10; i++ {
		g := r.ReadBits(8)
		if r.err != nil {
			return 0
		}
		if i == 9 && g > 1 {
			return r.fail(ErrOverflow)
		}
		v |= (g & 0x7f) << (7 * i)
		if g < 0x80 {
			return v
		}
	}
	return r.fail(ErrOverflow)
}

// ReadVarint reads a value written by [Writer.WriteVarint].
func (r *Reader) ReadVarint() int64 { return UnZigZag(r.ReadUvarint()) }

// ReadExpGolomb reads a value written by [Writer.WriteExpGolomb] with the
// same k. At most 62−k leading zero bits are accepted (the writer's range), so
// the loop is bounded; more is [ErrOverflow].
func (r *Reader) ReadExpGolomb(k uint) uint64 {
	// Fast path: the whole code lies in the next 8 bytes of the buffer
	// (at least 57 bits from pos): find the one bit, take the bits after it.
	if i := r.pos >> 3; uint64(i)+8 <= uint64(len(r.buf)) && k <= 30 {
		win := binary.LittleEndian.Uint64(r.buf[i:]) >> (r.pos & 7)
		z := uint(bits.TrailingZeros64(win)) // 64 when win is 0
		if l := 2*z + k + 1; l <= 57 {
			x := 1<<(z+k) | win>>(z+1)&(1<<(z+k)-1)
			r.pos += l
			return x - 1<<k
		}
	}
	return r.readExpGolomb(k)
}

// readExpGolomb is ReadExpGolomb for long codes, the last bytes of the
// buffer and failures.
func (r *Reader) readExpGolomb(k uint) uint64 {
	if r.err != nil {
		return 0
	}
	if k > 30 {
		return r.fail(ErrOverflow)
	}
	z := uint(0)
	for {
		avail := r.max - r.pos
		if avail == 0 {
			return r.fail(ErrShortBuffer)
		}
		take := min(avail, 32)
		save := r.pos
		chunk := r.ReadBits(take)
		if chunk != 0 {
			tz := uint(bits.TrailingZeros64(chunk))
			z += tz
			r.pos = save + tz + 1 // past the one bit
			break
		}
		z += take
		if z+k > 62 {
			return r.fail(ErrOverflow)
		}
	}
	if z+k > 62 {
		return r.fail(ErrOverflow)
	}
	l := z + k + 1
	x := 1<<(l-1) | r.ReadBits(l-1)
	if r.err != nil {
		return 0
	}
	return x - 1<<k
}

// ReadRice reads a value written by [Writer.WriteRice] at order k. An
// order above 29 or an escape beyond 2^62 is [ErrOverflow].
func (r *Reader) ReadRice(k uint) uint64 {
	// Fast path: a short code in the next 8 bytes of the buffer.
	if i := r.pos >> 3; uint64(i)+8 <= uint64(len(r.buf)) && k <= 29 {
		win := binary.LittleEndian.Uint64(r.buf[i:]) >> (r.pos & 7)
		if q := uint(bits.TrailingZeros64(win)); q < riceLimit {
			r.pos += q + 1 + k
			return uint64(q)<<k | win>>(q+1)&(1<<k-1)
		}
	}
	return r.readRice(k)
}

// readRice is ReadRice for escapes, the last bytes of the buffer and
// failures.
func (r *Reader) readRice(k uint) uint64 {
	if r.err != nil {
		return 0
	}
	if k > 29 {
		return r.fail(ErrOverflow)
	}
	for q := uint64(0); q < riceLimit; q++ {
		b := r.ReadBits(1)
		if r.err != nil {
			return 0
		}
		if b == 1 {
			lo := r.ReadBits(k)
			if r.err != nil {
				return 0
			}
			return q<<k | lo
		}
	}
	e := r.ReadExpGolomb(k + 1)
	if r.err != nil {
		return 0
	}
	if e >= 1<<62 {
		return r.fail(ErrOverflow)
	}
	return e + riceLimit<<k
}

// Align skips to the next byte boundary.
func (r *Reader) Align() {
	if rem := r.pos % 8; rem != 0 {
		r.ReadBits(8 - rem)
	}
}
