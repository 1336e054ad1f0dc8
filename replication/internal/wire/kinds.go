package wire

import (
	"encoding/binary"
	"errors"
)

// ProtocolVersion is the replication wire version checked at connect (the
// history of its numbers is replication.ProtocolVersion's).
const ProtocolVersion uint16 = 10

// Message and datagram kinds (first byte). Handshake messages (package
// transport) use 0x01–0x03.
const (
	// KindSnapshot starts a snapshot datagram (server → client); bit 7 of
	// the byte, FlagCompressed, flags a zstd-compressed body.
	KindSnapshot   byte = 0x01
	FlagCompressed byte = 0x80

	KindClientDatagram byte = 0x02 // client → server: ack (+ input section)
	KindSpawns         byte = 0x10 // server → client, reliable: spawn/despawn batch
	KindReady          byte = 0x11 // server → client, reliable: initial world sent
	KindSpawnsEnded    byte = 0x12 // server → client, reliable: predicted spawns that ended unsent
	KindDrain          byte = 0x13 // server → client, reliable: drain notice
	KindMessages       byte = 0x14 // server → client, reliable: game messages (gamemsg.go)
	KindClientMessages byte = 0x15 // client → server, reliable: game messages
)

// ErrCorrupt is wrapped by the errors of snapshot datagrams and acks that
// decode to impossible content.
var ErrCorrupt = errors.New("snapshot: corrupt datagram")

// ErrMalformed wraps decode errors of replication messages (it is
// replication.ErrMalformed).
var ErrMalformed = errors.New("replication: malformed message")

// minimalUvarint is binary.Uvarint refusing overlong encodings (k ≤ 0 for
// them as for other errors): a message has one encoding, so what parses
// re-encodes to the same bytes.
func minimalUvarint(b []byte) (uint64, int) {
	n, k := binary.Uvarint(b)
	if k > 1 && b[k-1] == 0 { // a final group of zeros adds nothing
		return 0, 0
	}
	return n, k
}

// uvarintLen is the length of v's uvarint encoding.
func uvarintLen(v uint64) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}
