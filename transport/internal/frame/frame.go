// Package frame is the length-prefixed framing of reliable messages on a byte stream.
package frame

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

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

// Read reads one frame from r. It checks the announced length against max before
// allocating anything. At a frame boundary, the end of the stream returns io.EOF; errors
// of r are returned unchanged; format violations are *Error. Allocates the payload only.
func Read(r *bufio.Reader, max int) ([]byte, error) {
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
	if n > uint64(max) {
		return nil, &Error{transport.CodeMessageTooLarge, fmt.Sprintf("message of %d bytes exceeds the maximum of %d bytes", n, max)}
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || (err == io.EOF && n > 0) {
			return nil, &Error{transport.CodeProtocolError, "stream ended inside a message"}
		}
		return nil, err
	}
	return b, nil
}
