package wire

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"
	"unicode/utf8"

	"github.com/archenet/archenet/transport"
)

// Drain is a drain notice: what a draining server tells its clients.
type Drain struct {
	// Left is what is left until the server ends the match at the latest
	// (0: no deadline; sent in whole milliseconds, at least 1).
	Left time.Duration
	// Reason is the server's (at most transport.MaxReasonLen bytes of
	// UTF-8).
	Reason string
	// Address, if not empty, is where the match goes on (a checkpoint
	// restored there): the clients resume their seats at it (at most
	// MaxAddressLen bytes of UTF-8).
	Address string
}

// MaxAddressLen bounds Drain.Address.
const MaxAddressLen = 256

// AppendDrain appends a drain notice:
//
//	0x13 | milliseconds left u32 (0: no deadline) | reason length uvarint | reason |
//	[address length uvarint (1..256) | address]
//
// (little-endian; the reason is cut to transport.MaxReasonLen bytes; the
// address is there only if not empty, and must fit MaxAddressLen).
func AppendDrain(b []byte, d Drain) []byte {
	b = append(b, KindDrain)
	b = binary.LittleEndian.AppendUint32(b, drainMillis(d.Left))
	reason := transport.TruncateReason(d.Reason, transport.MaxReasonLen)
	b = binary.AppendUvarint(b, uint64(len(reason)))
	b = append(b, reason...)
	if d.Address != "" {
		b = binary.AppendUvarint(b, uint64(len(d.Address)))
		b = append(b, d.Address...)
	}
	return b
}

// DrainLen returns the length of d's notice.
func DrainLen(d Drain) int {
	n := len(transport.TruncateReason(d.Reason, transport.MaxReasonLen))
	n = 5 + uvarintLen(uint64(n)) + n
	if d.Address != "" {
		n += uvarintLen(uint64(len(d.Address))) + len(d.Address)
	}
	return n
}

func drainMillis(left time.Duration) uint32 {
	ms := uint32(min(max(left.Milliseconds(), 0), math.MaxUint32))
	if left > 0 && ms == 0 {
		ms = 1
	}
	return ms
}

// ParseDrain decodes a drain notice.
func ParseDrain(b []byte) (Drain, error) {
	if len(b) < 6 || b[0] != KindDrain {
		return Drain{}, fmt.Errorf("%w: drain notice of %d bytes", ErrMalformed, len(b))
	}
	ms := binary.LittleEndian.Uint32(b[1:])
	n, k := minimalUvarint(b[5:])
	if k <= 0 || n > transport.MaxReasonLen || uint64(len(b)-5-k) < n {
		return Drain{}, fmt.Errorf("%w: drain notice reason of %d bytes in %d", ErrMalformed, n, len(b))
	}
	reason, rest := b[5+k:5+k+int(n)], b[5+k+int(n):]
	if !utf8.Valid(reason) {
		return Drain{}, fmt.Errorf("%w: drain notice reason is not UTF-8", ErrMalformed)
	}
	d := Drain{Reason: string(reason), Left: time.Duration(ms) * time.Millisecond}
	if len(rest) > 0 {
		n, k := minimalUvarint(rest)
		if k <= 0 || n == 0 || n > MaxAddressLen || uint64(len(rest)-k) != n || !utf8.Valid(rest[k:]) {
			return Drain{}, fmt.Errorf("%w: drain notice address of %d bytes in %d", ErrMalformed, n, len(rest))
		}
		d.Address = string(rest[k:])
	}
	return d, nil
}
