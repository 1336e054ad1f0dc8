package websocket

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/archenet/archenet/transport"
)

// MaxDatagramPayload is the largest datagram a connection sends or accepts: the
// same as the other transports', so that a replication server builds the
// same datagrams for every client.
const MaxDatagramPayload = 1200

// DefaultPath is the URL path Listen serves sessions at when Config.Path is
// empty.
const DefaultPath = "/archenet.ws"

// Kinds of WebSocket messages (the first byte).
const (
	kindMessage  byte = 0x01
	kindDatagram byte = 0x02
	kindClose    byte = 0x03
)

// closeStatusBase is added to a transport.CloseCode in a WebSocket close
// status (4000–4999 are the application's): how a peer that closes with a
// status rather than a close message is read.
const closeStatusBase = 4000

// errTooLarge reports a payload over its bound.
var errTooLarge = errors.New("too large")

// readLimited reads r to its end, failing with errTooLarge past limit bytes.
// Memory follows the bytes that arrived, in chunks of at most 16 KiB (the
// buffer at most doubles per chunk), not what a length promised.
func readLimited(r io.Reader, limit int) ([]byte, error) {
	const chunk = 16 << 10
	b := make([]byte, 0, min(limit+1, 512))
	for {
		if len(b) == cap(b) {
			b = slices.Grow(b, min(max(chunk, len(b)), limit+1-len(b)))
		}
		n, err := r.Read(b[len(b):min(cap(b), limit+1)])
		b = b[:len(b)+n]
		if len(b) > limit {
			return nil, errTooLarge
		}
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// appendClose appends a close message's payload (after its kind byte).
func appendClose(b []byte, code transport.CloseCode, reason string) []byte {
	b = append(b, kindClose)
	b = binary.BigEndian.AppendUint16(b, uint16(code))
	return append(b, transport.TruncateReason(reason, transport.MaxReasonLen)...)
}

// parseClose parses a close message's payload (after its kind byte).
func parseClose(b []byte) (transport.CloseCode, string, error) {
	if len(b) < 2 || len(b)-2 > transport.MaxReasonLen {
		return 0, "", fmt.Errorf("close message of %d bytes", len(b))
	}
	return transport.CloseCode(binary.BigEndian.Uint16(b)), string(b[2:]), nil
}
