// Package frame is the format of the transports' message stream: the client's preamble
// and the length-prefixed framing of reliable messages.
package frame

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/archenet/archenet/transport"
)

// Wire format: each message is one frame,
//
//	frame = length (unsigned LEB128 varint, at most 10 bytes) | payload (length bytes)
//
// A length above the receiver's maximum is a transport.CodeMessageTooLarge violation; a
// malformed length or the stream ending inside a frame is a transport.CodeProtocolError
// violation.

// Error is a violation of the frame format by the peer, with the close code it calls for.
type Error struct {
	Code   transport.CloseCode
	Reason string
}

func (e *Error) Error() string { return e.Reason }

// Append appends the frame carrying payload to b.
func Append(b, payload []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(payload)))
	return append(b, payload...)
}

// chunk is how much of a frame's payload Read allocates ahead of the bytes that have
// arrived: memory follows what the peer actually sent, not what it announced.
const chunk = 16 << 10

// Read reads one frame from r. It checks the announced length against limit before
// allocating anything, and then allocates as the payload arrives, in chunks of at most
// 16 KiB (the buffer at most doubles per chunk), so a peer that announces a large
// message and sends little holds little memory. At a frame boundary, the end of the
// stream returns io.EOF; errors of r are returned unchanged; format violations are
// *Error. Allocates the payload only.
func Read(r *bufio.Reader, limit int) ([]byte, error) {
	var n uint64
	var shift uint
	for i := 0; ; i++ {
		c, err := r.ReadByte()
		if err != nil {
			if err == io.EOF && i > 0 {
				return nil, &Error{transport.CodeProtocolError, "stream ended inside a length prefix"}
			}
			return nil, err
		}
		if i == binary.MaxVarintLen64-1 && c > 1 {
			return nil, &Error{transport.CodeProtocolError, "malformed length prefix: overflows 64 bits"}
		}
		n |= uint64(c&0x7f) << shift
		if c < 0x80 {
			break
		}
		shift += 7
	}
	if n > uint64(limit) {
		return nil, &Error{transport.CodeMessageTooLarge, fmt.Sprintf("message of %d bytes exceeds the maximum of %d bytes", n, limit)}
	}
	size := int(n)
	b := make([]byte, 0, min(size, chunk))
	for len(b) < size {
		k := min(size-len(b), max(chunk, len(b)))
		b = slices.Grow(b, k)
		m, err := io.ReadFull(r, b[len(b):len(b)+k])
		b = b[:len(b)+m]
		if err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) || err == io.EOF {
				return nil, &Error{transport.CodeProtocolError, "stream ended inside a message"}
			}
			return nil, err
		}
	}
	return b, nil
}
