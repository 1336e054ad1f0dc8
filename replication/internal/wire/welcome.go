package wire

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
)

// Welcome is the replication payload of the handshake's Welcome
// (transport.Welcome.Payload): what a client needs to know about the
// server's replication.
type Welcome struct {
	TickRate   uint16 // net ticks per second
	Depth      uint8  // snapshot ring depth
	Tick       uint32 // server net tick at welcome
	NetDivisor uint16 // simulation ticks per net tick
	// Compression: snapshot datagrams may be zstd-compressed, with the
	// dictionary whose DictionaryHash is Dictionary (0: none).
	Compression bool
	Dictionary  uint64
}

// welcomeVersion is the payload layout version.
const welcomeVersion = 3

// WelcomeLen is the payload's length:
//
//	version u8 | tick rate u16 | depth u8 | tick u32 | net divisor u16 |
//	flags u8 (bit 0: compression) | dictionary hash u64   (little-endian)
const WelcomeLen = 19

// Append appends the payload.
func (w *Welcome) Append(b []byte) []byte {
	b = append(b, welcomeVersion)
	b = binary.LittleEndian.AppendUint16(b, w.TickRate)
	b = append(b, w.Depth)
	b = binary.LittleEndian.AppendUint32(b, w.Tick)
	b = binary.LittleEndian.AppendUint16(b, w.NetDivisor)
	var flags byte
	if w.Compression {
		flags |= 1
	}
	b = append(b, flags)
	return binary.LittleEndian.AppendUint64(b, w.Dictionary)
}

// Len returns the payload's length, WelcomeLen.
func (w *Welcome) Len() int { return WelcomeLen }

// ParseWelcome decodes a payload, refusing other versions and values a
// server never sends (a depth outside 2..128, a zero rate or divisor,
// unknown flags).
func ParseWelcome(b []byte) (Welcome, error) {
	if len(b) != WelcomeLen || b[0] != welcomeVersion {
		return Welcome{}, fmt.Errorf("%w: welcome payload of %d bytes", ErrMalformed, len(b))
	}
	w := Welcome{TickRate: binary.LittleEndian.Uint16(b[1:]), Depth: b[3], Tick: binary.LittleEndian.Uint32(b[4:]),
		NetDivisor: binary.LittleEndian.Uint16(b[8:]), Compression: b[10]&1 != 0, Dictionary: binary.LittleEndian.Uint64(b[11:])}
	if w.TickRate == 0 || w.Depth < 2 || w.Depth > 128 || w.NetDivisor == 0 {
		return w, fmt.Errorf("%w: welcome tick rate %d depth %d net divisor %d", ErrMalformed, w.TickRate, w.Depth, w.NetDivisor)
	}
	if b[10]&^1 != 0 || (!w.Compression && w.Dictionary != 0) {
		return w, fmt.Errorf("%w: welcome flags %#x dictionary %#x", ErrMalformed, b[10], w.Dictionary)
	}
	return w, nil
}

// DictionaryHash names a compression dictionary in the Welcome (0: none).
func DictionaryHash(dict []byte) uint64 {
	if dict == nil {
		return 0
	}
	h := fnv.New64a()
	h.Write(dict)
	return h.Sum64() | 1
}
