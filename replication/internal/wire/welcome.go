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
	// Resumable: the server keeps the client's seat when its connection is
	// lost; Secret is the seat's resume secret (single use) and Match the
	// match to name in the resume's Hello (on a host; empty: none).
	Resumable bool
	Secret    [SecretLen]byte
	Match     string
	// Resumed: this Welcome continues a seat (a Hello with a ticket);
	// ClientTaken counts the client's reliable messages the server took
	// (the client sends again those after it). Reset: the seat continues,
	// its replication starts over (the client drops its mirrors).
	Resumed, Reset bool
	ClientTaken    uint32
}

// welcomeVersion is the payload layout version.
const welcomeVersion = 4

// WelcomeLen is the payload's length without a seat:
//
//	version u8 | tick rate u16 | depth u8 | tick u32 | net divisor u16 |
//	flags u8 (bit 0: compression, 1: resumable, 2: resumed, 3: reset) |
//	dictionary hash u64 | [secret [16] | match length u8 | match] |
//	[client taken u32]   (little-endian; the seat's fields if resumable,
//	the count if resumed)
const WelcomeLen = 19

// Welcome flags.
const (
	welcomeCompression = 1 << iota
	welcomeResumable
	welcomeResumed
	welcomeReset
)

// Append appends the payload.
func (w *Welcome) Append(b []byte) []byte {
	b = append(b, welcomeVersion)
	b = binary.LittleEndian.AppendUint16(b, w.TickRate)
	b = append(b, w.Depth)
	b = binary.LittleEndian.AppendUint32(b, w.Tick)
	b = binary.LittleEndian.AppendUint16(b, w.NetDivisor)
	var flags byte
	for _, f := range [...]struct {
		on   bool
		flag byte
	}{{w.Compression, welcomeCompression}, {w.Resumable, welcomeResumable}, {w.Resumed, welcomeResumed}, {w.Reset, welcomeReset}} {
		if f.on {
			flags |= f.flag
		}
	}
	b = append(b, flags)
	b = binary.LittleEndian.AppendUint64(b, w.Dictionary)
	if w.Resumable {
		b = append(b, w.Secret[:]...)
		b = append(b, byte(len(w.Match)))
		b = append(b, w.Match...)
	}
	if w.Resumed {
		b = binary.LittleEndian.AppendUint32(b, w.ClientTaken)
	}
	return b
}

// Len returns the payload's length.
func (w *Welcome) Len() int {
	n := WelcomeLen
	if w.Resumable {
		n += SecretLen + 1 + len(w.Match)
	}
	if w.Resumed {
		n += 4
	}
	return n
}

// maxWelcomeMatch bounds Welcome.Match (transport.MaxMatchLen).
const maxWelcomeMatch = 64

// ParseWelcome decodes a payload, refusing other versions and values a
// server never sends (a depth outside 2..128, a zero rate or divisor,
// unknown flags, a resumed or reset Welcome without a seat, a match over 64
// bytes).
func ParseWelcome(b []byte) (Welcome, error) {
	if len(b) < WelcomeLen || b[0] != welcomeVersion {
		return Welcome{}, fmt.Errorf("%w: welcome payload of %d bytes", ErrMalformed, len(b))
	}
	f := b[10]
	w := Welcome{TickRate: binary.LittleEndian.Uint16(b[1:]), Depth: b[3], Tick: binary.LittleEndian.Uint32(b[4:]),
		NetDivisor: binary.LittleEndian.Uint16(b[8:]), Compression: f&welcomeCompression != 0, Dictionary: binary.LittleEndian.Uint64(b[11:]),
		Resumable: f&welcomeResumable != 0, Resumed: f&welcomeResumed != 0, Reset: f&welcomeReset != 0}
	if w.TickRate == 0 || w.Depth < 2 || w.Depth > 128 || w.NetDivisor == 0 {
		return w, fmt.Errorf("%w: welcome tick rate %d depth %d net divisor %d", ErrMalformed, w.TickRate, w.Depth, w.NetDivisor)
	}
	if f&^(welcomeCompression|welcomeResumable|welcomeResumed|welcomeReset) != 0 || (!w.Compression && w.Dictionary != 0) ||
		(w.Resumed || w.Reset) && !w.Resumable || w.Reset && !w.Resumed {
		return w, fmt.Errorf("%w: welcome flags %#x dictionary %#x", ErrMalformed, f, w.Dictionary)
	}
	rest := b[WelcomeLen:]
	if w.Resumable {
		if len(rest) < SecretLen+1 || int(rest[SecretLen]) > maxWelcomeMatch || len(rest) < SecretLen+1+int(rest[SecretLen]) {
			return w, fmt.Errorf("%w: welcome payload of %d bytes with a seat", ErrMalformed, len(b))
		}
		copy(w.Secret[:], rest)
		n := int(rest[SecretLen])
		w.Match = string(rest[SecretLen+1 : SecretLen+1+n])
		rest = rest[SecretLen+1+n:]
	}
	if w.Resumed {
		if len(rest) < 4 {
			return w, fmt.Errorf("%w: resumed welcome payload of %d bytes", ErrMalformed, len(b))
		}
		w.ClientTaken = binary.LittleEndian.Uint32(rest)
		rest = rest[4:]
	}
	if len(rest) != 0 {
		return w, fmt.Errorf("%w: welcome payload of %d bytes (%d trailing)", ErrMalformed, len(b), len(rest))
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
