package wire

import (
	"encoding/binary"
	"fmt"
	"math/bits"

	"github.com/archenet/archenet/replication/bitio"
)

// AckWindow is how many ticks one Ack covers: the newest and the 32 before it.
const AckWindow = 33

// Ack is a client's acknowledgement: which datagrams of which ticks it holds.
// It is final for every tick it names: the receiver seals those views when it
// makes the Ack (package receive), so a part arriving later is shown but never
// merged, and the server's model of each acked view (package baseline) is
// exact.
type Ack struct {
	// Newest is the newest tick with at least one part decoded (0: none yet).
	Newest uint32
	// Mask bit i says tick Newest−1−i has at least one part decoded too.
	Mask uint32
	// Partial bit i says tick Newest−i (bit 0: Newest; bit i ≥ 1: the tick of
	// Mask bit i−1) lacks some of its parts; Parts[i] then says which it holds.
	Partial uint64
	// Parts and PartCount mean something only at Partial's bits (elsewhere
	// they may hold an earlier Ack's).
	Parts [AckWindow]uint64
	// PartCount[i] is the number of parts of a partial tick (1..MaxParts).
	PartCount [AckWindow]uint8
}

// Holds reports which parts of tick the Ack says the client holds: all is
// true when it holds every part; otherwise parts is the mask of those it
// holds (zero if the Ack does not name the tick).
func (a *Ack) Holds(tick uint32) (parts uint64, all bool) {
	if a.Newest == 0 || int32(a.Newest-tick) < 0 {
		return 0, false
	}
	i := a.Newest - tick
	if i >= AckWindow || (i > 0 && a.Mask>>(i-1)&1 == 0) {
		return 0, false
	}
	if a.Partial>>i&1 == 0 {
		return ^uint64(0), true
	}
	return a.Parts[i], false
}

// ackFixedLen is the byte-aligned part of an Ack: Newest and Mask.
const ackFixedLen = 8

// MaxAckLen bounds the encoded length of an Ack.
const MaxAckLen = ackFixedLen + (1+AckWindow*(1+6+MaxParts)+7)/8

// Append appends the encoding of a:
//
//	newest u32 LE | mask u32 LE | bits, LSB-first, padded to a byte:
//	partial-any 1; if 1, for each tick the Ack names (newest, then Mask's bits
//	from bit 0): partial 1; if 1: parts − 1 (6 bits), then that many bits of
//	the parts held.
//
// A fully received window costs one byte after the fixed eight.
func (a *Ack) Append(b []byte) []byte {
	b = binary.LittleEndian.AppendUint32(b, a.Newest)
	b = binary.LittleEndian.AppendUint32(b, a.Mask)
	named := uint64(1) | uint64(a.Mask)<<1
	if a.Newest == 0 || a.Partial&named == 0 {
		return append(b, 0)
	}
	var buf [MaxAckLen]byte
	var w bitio.Writer
	w.Reset(buf[:0])
	w.WriteBits(1, 1)
	for n := named; n != 0; n &= n - 1 {
		i := bits.TrailingZeros64(n)
		if a.Partial>>i&1 == 0 {
			w.WriteBits(0, 1)
			continue
		}
		w.WriteBits(1, 1)
		cnt := max(1, min(MaxParts, int(a.PartCount[i])))
		w.WriteBits(uint64(cnt-1), 6)
		for p := 0; p < cnt; p++ {
			w.WriteBits(a.Parts[i]>>p&1, 1)
		}
	}
	return append(b, w.Bytes()...)
}

// Len returns the length of a's encoding (what Append appends).
func (a *Ack) Len() int {
	named := uint64(1) | uint64(a.Mask)<<1
	if a.Newest == 0 || a.Partial&named == 0 {
		return ackFixedLen + 1
	}
	n := 1
	for m := named; m != 0; m &= m - 1 {
		n++
		if i := bits.TrailingZeros64(m); a.Partial>>i&1 != 0 {
			n += 6 + max(1, min(MaxParts, int(a.PartCount[i])))
		}
	}
	return ackFixedLen + (n+7)/8
}

// ParseAck decodes an Ack from the start of b and returns it with the number
// of bytes it took. It never panics; every loop is bounded by the window.
func ParseAck(b []byte) (Ack, int, error) {
	var a Ack
	n, err := ParseAckInto(&a, b)
	return a, n, err
}

// ParseAckInto is [ParseAck] into *a (which it overwrites, also on error),
// without copying the Ack. It clears only Newest, Mask and Partial: Parts
// and PartCount are read where Partial has a bit, which it writes, so
// parsing into a reused Ack touches only the lines it needs (an Ack is 300
// bytes; a client's usual ack, nothing partial, one of them).
func ParseAckInto(a *Ack, b []byte) (int, error) {
	a.Newest, a.Mask, a.Partial = 0, 0, 0
	if len(b) < ackFixedLen+1 {
		return 0, fmt.Errorf("%w: ack of %d bytes", ErrCorrupt, len(b))
	}
	a.Newest = binary.LittleEndian.Uint32(b)
	a.Mask = binary.LittleEndian.Uint32(b[4:])
	var r bitio.Reader
	r.Reset(b[ackFixedLen:])
	if r.ReadBits(1) == 1 {
		for n := uint64(1) | uint64(a.Mask)<<1; n != 0; n &= n - 1 {
			i := bits.TrailingZeros64(n)
			if r.ReadBits(1) == 0 {
				continue
			}
			cnt := int(r.ReadBits(6)) + 1
			var m uint64
			for p := 0; p < cnt; p++ {
				m |= r.ReadBits(1) << p
			}
			a.Partial |= 1 << i
			a.Parts[i], a.PartCount[i] = m, uint8(cnt)
		}
	}
	if err := r.Err(); err != nil {
		a.Newest, a.Mask, a.Partial = 0, 0, 0
		return 0, fmt.Errorf("%w: ack: %v", ErrCorrupt, err)
	}
	return ackFixedLen + (r.BitPos()+7)/8, nil
}
