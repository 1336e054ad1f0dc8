package wire

import (
	"encoding/binary"
	"fmt"
)

// SecretLen is the length of a seat's resume secret.
const SecretLen = 16

// Ticket is what a client coming back to its seat puts in its Hello
// (transport.Hello.Resume): the seat, its secret (the Welcome's, single
// use), and how far it got.
type Ticket struct {
	Client uint8
	Secret [SecretLen]byte
	// Fresh: the client holds nothing of the seat's replication (a
	// reloaded page): the server starts the seat's replication over.
	Fresh bool
	// Taken counts the reliable messages the client took since the seat's
	// replication began (meaningless with Fresh): the server sends again
	// those after it.
	Taken uint32
}

// ticketVersion is the ticket's layout version.
const ticketVersion = 1

// TicketLen is a ticket's length:
//
//	version u8 | flags u8 (bit 0: fresh) | client u8 | secret [16] | taken u32 LE
const TicketLen = 3 + SecretLen + 4

// Append appends the ticket.
func (t *Ticket) Append(b []byte) []byte {
	var flags byte
	if t.Fresh {
		flags = 1
	}
	b = append(b, ticketVersion, flags, t.Client)
	b = append(b, t.Secret[:]...)
	return binary.LittleEndian.AppendUint32(b, t.Taken)
}

// ParseTicket decodes a ticket, refusing other lengths and versions,
// unknown flags, client 0 and a fresh ticket that counts messages.
func ParseTicket(b []byte) (Ticket, error) {
	var t Ticket
	if len(b) != TicketLen || b[0] != ticketVersion {
		return t, fmt.Errorf("%w: resume ticket of %d bytes", ErrMalformed, len(b))
	}
	if b[1]&^1 != 0 || b[2] == 0 || b[2] == 255 {
		return t, fmt.Errorf("%w: resume ticket flags %#x client %d", ErrMalformed, b[1], b[2])
	}
	t.Fresh, t.Client = b[1]&1 != 0, b[2]
	copy(t.Secret[:], b[3:])
	t.Taken = binary.LittleEndian.Uint32(b[3+SecretLen:])
	if t.Fresh && t.Taken != 0 {
		return t, fmt.Errorf("%w: fresh resume ticket counts %d messages", ErrMalformed, t.Taken)
	}
	return t, nil
}
