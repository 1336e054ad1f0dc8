package wire

import (
	"encoding/binary"
	"fmt"
)

// The ready message tells a client that its initial world has been sent
// (reliable, after the first spawn batch):
//
//	0x11 | tick u32 LE

// ReadyLen is the ready message's length.
const ReadyLen = 5

// AppendReady appends the ready message of tick.
func AppendReady(b []byte, tick uint32) []byte {
	b = append(b, KindReady)
	return binary.LittleEndian.AppendUint32(b, tick)
}

// ParseReady decodes a ready message and returns its tick.
func ParseReady(b []byte) (uint32, error) {
	if len(b) != ReadyLen || b[0] != KindReady {
		return 0, fmt.Errorf("%w: ready message of %d bytes", ErrMalformed, len(b))
	}
	return binary.LittleEndian.Uint32(b[1:]), nil
}
