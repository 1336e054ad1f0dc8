package wire

import (
	"encoding/binary"
	"fmt"
)

// A client datagram (client → server, unreliable) is its kind, the count
// of reliable messages the client took if the kind flags it
// (FlagTaken: the server lets go of what it kept of them to resume the
// seat), the client's snapshot [Ack] (9 bytes while no datagram is
// missing), then the input section, if the game sends input (package
// input's layout):
//
//	0x02 | [taken u32 LE] | ack | input section

// FlagTaken on KindClientDatagram says the count of reliable messages
// taken follows the kind.
const FlagTaken byte = 0x40

// AppendClientHeader starts a client datagram: its kind and the ack.
func AppendClientHeader(b []byte, a *Ack) []byte {
	b = append(b, KindClientDatagram)
	return a.Append(b)
}

// AppendClientHeaderTaken starts a client datagram that says how many
// reliable messages the client took.
func AppendClientHeaderTaken(b []byte, a *Ack, taken uint32) []byte {
	b = append(b, KindClientDatagram|FlagTaken)
	b = binary.LittleEndian.AppendUint32(b, taken)
	return a.Append(b)
}

// ClientHeaderLen returns the length of a client datagram's header.
func ClientHeaderLen(a *Ack) int { return 1 + a.Len() }

// ParseClientHeader splits a client datagram into its ack and the input
// section that follows.
func ParseClientHeader(b []byte) (Ack, []byte, error) {
	var a Ack
	rest, err := ParseClientHeaderInto(&a, b)
	return a, rest, err
}

// ParseClientHeaderInto is [ParseClientHeader] into *a (which it
// overwrites, also on error): a peer parses ack after ack into one.
func ParseClientHeaderInto(a *Ack, b []byte) ([]byte, error) {
	rest, _, _, err := ParseClientHeaderTaken(a, b)
	return rest, err
}

// ParseClientHeaderTaken is [ParseClientHeaderInto] that also returns the
// count of reliable messages taken, if the datagram carries it (has).
func ParseClientHeaderTaken(a *Ack, b []byte) (rest []byte, taken uint32, has bool, err error) {
	if len(b) < 1 || b[0]&^(FlagClientMessages|FlagTaken) != KindClientDatagram { // (a message section was taken off: SplitSection)
		*a = Ack{}
		return nil, 0, false, fmt.Errorf("%w: client datagram of %d bytes", ErrMalformed, len(b))
	}
	h := 1
	if has = b[0]&FlagTaken != 0; has {
		if len(b) < 5 {
			*a = Ack{}
			return nil, 0, false, fmt.Errorf("%w: client datagram of %d bytes flags a count", ErrMalformed, len(b))
		}
		taken, h = binary.LittleEndian.Uint32(b[1:]), 5
	}
	n, err := ParseAckInto(a, b[h:])
	if err != nil {
		return nil, 0, false, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return b[h+n:], taken, has, nil
}
