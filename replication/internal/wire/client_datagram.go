package wire

import "fmt"

// A client datagram (client → server, unreliable) is its kind, the
// client's snapshot [Ack] (9 bytes while no datagram is missing), then the
// input section, if the game sends input (package input's layout):
//
//	0x02 | ack | input section

// AppendClientHeader starts a client datagram: its kind and the ack.
func AppendClientHeader(b []byte, a *Ack) []byte {
	b = append(b, KindClientDatagram)
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
	if len(b) < 1 || b[0]&^FlagClientMessages != KindClientDatagram { // (a message section was taken off: SplitSection)
		*a = Ack{}
		return nil, fmt.Errorf("%w: client datagram of %d bytes", ErrMalformed, len(b))
	}
	n, err := ParseAckInto(a, b[1:])
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return b[1+n:], nil
}
