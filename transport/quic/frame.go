//go:build archenet_quic

package quic

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/archenet/archenet/transport"
)

// Message stream wire format. The client opens one bidirectional QUIC stream and writes
// the preamble byte first; after that, both directions carry frames:
//
//	frame = length (unsigned LEB128 varint, at most 10 bytes) | payload (length bytes)
//
// A length above the receiver's MaxMessageSize closes the connection with
// transport.CodeMessageTooLarge; a malformed length, a wrong preamble or the stream
// ending closes it with transport.CodeProtocolError.
const streamPreamble = 0xA1

// frameError is a violation of the stream format by the peer.
type frameError struct {
	code   transport.CloseCode
	reason string
}

func (e *frameError) Error() string { return e.reason }

// appendFrame appends the frame carrying payload to b.
func appendFrame(b, payload []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(payload)))
	return append(b, payload...)
}

// readFrame reads one frame from r. It checks the announced length against max before
// allocating. At a frame boundary, the end of the stream returns io.EOF; errors of r
// are returned unchanged; format violations are *frameError.
func readFrame(r *bufio.Reader, max int) ([]byte, error) {
	var n uint64
	var shift uint
	for i := 0; ; i++ {
		c, err := r.ReadByte()
		if err != nil {
			if err == io.EOF && i > 0 {
				return nil, &frameError{transport.CodeProtocolError, "stream ended inside a length prefix"}
			}
			return nil, err
		}
		if i == binary.MaxVarintLen64-1 && c > 1 {
			return nil, &frameError{transport.CodeProtocolError, "malformed length prefix: overflows 64 bits"}
		}
		n |= uint64(c&0x7f) << shift
		if c < 0x80 {
			break
		}
		shift += 7
	}
	if n > uint64(max) {
		return nil, &frameError{transport.CodeMessageTooLarge, fmt.Sprintf("message of %d bytes exceeds the maximum of %d bytes", n, max)}
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || (err == io.EOF && n > 0) {
			return nil, &frameError{transport.CodeProtocolError, "stream ended inside a message"}
		}
		return nil, err
	}
	return b, nil
}
