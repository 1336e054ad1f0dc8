package wire

import (
	"encoding/binary"
	"fmt"
	"math/bits"

	"github.com/archenet/archenet/replication/bitio"
	"github.com/archenet/archenet/replication/schema"
)

// MaxBatchMessages bounds the game messages of one batch (a message type
// may encode to no bits, so the batch's length does not bound its count).
const MaxBatchMessages = 1024

// A batch of game messages (schema.RegisterMessage) of one tick goes as one
// reliable message:
//
//	kind  1 byte: KindMessages (server → client) or KindClientMessages
//	tick  uvarint: the server tick the messages belong to
//	count uvarint (1..MaxBatchMessages)
//	body  bits, LSB-first: count × { id: IDBits(types) bits | the message's
//	      full encoding (schema.Plan.Write) }, zero-padded to a byte; nothing after

// IDBits is the width of a message id among n message types (0 for one).
func IDBits(n int) uint {
	if n <= 1 {
		return 0
	}
	return uint(bits.Len(uint(n - 1)))
}

// MessageBody encodes one message — its id and its full encoding — for a
// batch: the bits a MessageWriter copies per receiver.
func MessageBody(w *bitio.Writer, p *schema.Plan, idBits uint, lanes []uint64) {
	w.WriteBits(uint64(p.ID), idBits)
	p.Write(w, lanes, true)
}

// MessageWriter builds a message batch from encoded bodies.
type MessageWriter struct {
	w bitio.Writer
	n int
}

// Reset empties the batch.
func (m *MessageWriter) Reset() {
	m.w.Reset(m.w.Bytes()[:0])
	m.n = 0
}

// Add appends one body of nbits bits (MessageBody).
func (m *MessageWriter) Add(body []byte, nbits int) {
	m.w.AppendBits(body, nbits)
	m.n++
}

// Bytes is the length of the body so far.
func (m *MessageWriter) Bytes() int { return m.w.Len() }

// Len is the number of messages added.
func (m *MessageWriter) Len() int { return m.n }

// Body returns the batch's body (aliasing the writer until Reset).
func (m *MessageWriter) Body() []byte { return m.w.Bytes() }

// Append appends the batch as a message of kind for tick to dst.
func (m *MessageWriter) Append(dst []byte, kind byte, tick uint32) []byte {
	return append(AppendMessagesHeader(dst, kind, tick, m.n), m.w.Bytes()...)
}

// AppendMessagesHeader appends the header of a batch of n messages.
func AppendMessagesHeader(dst []byte, kind byte, tick uint32, n int) []byte {
	dst = append(dst, kind)
	dst = binary.AppendUvarint(dst, uint64(tick))
	return binary.AppendUvarint(dst, uint64(n))
}

// ParseMessages decodes a message batch of kind against the registry's
// message types. It checks the whole batch before it calls fn once per
// message, in order, with the message's plan and lanes (scratch, reused:
// at least the largest plan's lane count, or it is grown once); an error of
// fn stops it and is returned. The batch's tick and count are returned
// (with a nil fn, it only checks the batch).
func ParseMessages(b []byte, kind byte, plans []*schema.Plan, scratch []uint64, fn func(tick uint32, p *schema.Plan, lanes []uint64) error) (uint32, int, error) {
	if len(plans) == 0 {
		return 0, 0, fmt.Errorf("%w: message batch of %d bytes, but no message types are registered", ErrMalformed, len(b))
	}
	if len(b) < 3 || b[0] != kind {
		return 0, 0, fmt.Errorf("%w: message batch of %d bytes", ErrMalformed, len(b))
	}
	tick, k := minimalUvarint(b[1:])
	if k <= 0 || tick > 0xffffffff {
		return 0, 0, fmt.Errorf("%w: message batch tick", ErrMalformed)
	}
	b = b[1+k:]
	n, k := minimalUvarint(b)
	if k <= 0 || n == 0 || n > MaxBatchMessages {
		return 0, 0, fmt.Errorf("%w: message batch of %d messages (1..%d)", ErrMalformed, n, MaxBatchMessages)
	}
	body := b[k:]
	if need := MaxMessageLanes(plans); len(scratch) < need {
		scratch = make([]uint64, need) // (bounded by the registry, not by the input)
	}
	for pass := range 2 {
		if pass == 1 && fn == nil {
			break
		}
		r := bitio.NewReader(body)
		idBits := IDBits(len(plans))
		for i := range int(n) {
			id := r.ReadBits(idBits)
			if r.Err() != nil {
				return 0, 0, fmt.Errorf("%w: message %d of %d: %v", ErrMalformed, i, n, r.Err())
			}
			if id >= uint64(len(plans)) {
				return 0, 0, fmt.Errorf("%w: message %d of %d: type %d of %d", ErrMalformed, i, n, id, len(plans))
			}
			p := plans[id]
			if err := p.Read(r, scratch, true); err != nil {
				return 0, 0, fmt.Errorf("%w: message %d of %d (%s): %v", ErrMalformed, i, n, p.Name, err)
			}
			if pass == 1 {
				if err := fn(uint32(tick), p, scratch[:p.NumLanes()]); err != nil {
					return 0, 0, err
				}
			}
		}
		if left := r.BitsLeft(); left >= 8 || (left > 0 && r.ReadBits(uint(left)) != 0) {
			return 0, 0, fmt.Errorf("%w: %d bits after the message batch", ErrMalformed, left)
		}
	}
	return uint32(tick), int(n), nil
}

// MaxMessageLanes is the most lanes of a message type of plans (the scratch
// ParseMessages needs).
func MaxMessageLanes(plans []*schema.Plan) int {
	need := 0
	for _, p := range plans {
		need = max(need, p.NumLanes())
	}
	return need
}

// Unreliable game messages ride at the end of a tick's datagrams, in a
// message section the kind byte flags (FlagMessages on a snapshot
// datagram, FlagClientMessages on a client datagram):
//
//	datagram  kind|flag … (the datagram as without the section) … section | L
//	L         1 byte: the section's length (1..MaxSectionLen)
//	section   bits, LSB-first: [client → server: seq 16] | count − 1 EG(0) |
//	          count × { id | the message's full encoding }, zero-padded to a byte
//
// A server message belongs to the snapshot's tick; a client's to the newest
// server tick its ack names. seq numbers a client's sections (mod 2^16) so
// that the server takes each once and none older than the newest it took.
const (
	FlagMessages       byte = 0x40 // on KindSnapshot
	FlagClientMessages byte = 0x80 // on KindClientDatagram
	MaxSectionLen           = 255
)

// SectionWriter builds a message section from encoded bodies.
type SectionWriter struct {
	bodies bitio.Writer
	out    bitio.Writer
	n      int
}

// Reset empties the section.
func (s *SectionWriter) Reset() {
	s.bodies.Reset(s.bodies.Bytes()[:0])
	s.n = 0
}

// Len is the number of messages added.
func (s *SectionWriter) Len() int { return s.n }

// Fits reports whether a body of nbits more keeps the section within
// MaxSectionLen (with seq: a client's section).
func (s *SectionWriter) Fits(nbits int, seq bool) bool {
	bits := s.bodies.BitLen() + nbits + int(bitio.ExpGolombLen(uint64(s.n), 0))
	if seq {
		bits += 16
	}
	return (bits+7)/8 <= MaxSectionLen
}

// Add appends one body of nbits bits (MessageBody).
func (s *SectionWriter) Add(body []byte, nbits int) {
	s.bodies.AppendBits(body, nbits)
	s.n++
}

// Append appends the section and its length byte to dst (nothing without
// messages); with hasSeq it starts with seq.
func (s *SectionWriter) Append(dst []byte, hasSeq bool, seq uint16) []byte {
	if s.n == 0 {
		return dst
	}
	nbits := s.bodies.BitLen()
	w := &s.out
	w.Reset(w.Bytes()[:0])
	if hasSeq {
		w.WriteBits(uint64(seq), 16)
	}
	w.WriteExpGolomb(uint64(s.n-1), 0)
	w.AppendBits(s.bodies.Bytes(), nbits)
	b := w.Bytes()
	dst = append(dst, b...)
	return append(dst, byte(len(b)))
}

// SplitSection splits a datagram flagged with flag into the datagram
// without its section and the section; unflagged, it returns d and nil.
func SplitSection(d []byte, flag byte) (body, section []byte, err error) {
	if len(d) == 0 || d[0]&flag == 0 {
		return d, nil, nil
	}
	if len(d) < 3 {
		return nil, nil, fmt.Errorf("%w: datagram of %d bytes flags a message section", ErrMalformed, len(d))
	}
	l := int(d[len(d)-1])
	if l == 0 || l > len(d)-2 {
		return nil, nil, fmt.Errorf("%w: message section of %d bytes in a datagram of %d", ErrMalformed, l, len(d))
	}
	return d[:len(d)-1-l], d[len(d)-1-l : len(d)-1], nil
}

// ParseSection decodes a message section (with hasSeq: a client's) like
// ParseMessages: checked whole before fn runs per message. It returns the
// seq (0 without) and the count.
func ParseSection(sec []byte, hasSeq bool, plans []*schema.Plan, scratch []uint64, fn func(p *schema.Plan, lanes []uint64) error) (uint16, int, error) {
	if len(plans) == 0 {
		return 0, 0, fmt.Errorf("%w: message section of %d bytes, but no message types are registered", ErrMalformed, len(sec))
	}
	if need := MaxMessageLanes(plans); len(scratch) < need {
		scratch = make([]uint64, need) // (bounded by the registry)
	}
	var seq uint16
	n := 0
	for pass := range 2 {
		if pass == 1 && fn == nil {
			break
		}
		r := bitio.NewReader(sec)
		if hasSeq {
			seq = uint16(r.ReadBits(16))
		}
		c := r.ReadExpGolomb(0)
		if r.Err() != nil || c >= MaxBatchMessages {
			return 0, 0, fmt.Errorf("%w: message section count %d", ErrMalformed, c+1)
		}
		n = int(c) + 1
		idBits := IDBits(len(plans))
		for i := range n {
			id := r.ReadBits(idBits)
			if r.Err() != nil || id >= uint64(len(plans)) {
				return 0, 0, fmt.Errorf("%w: section message %d of %d: type %d of %d", ErrMalformed, i, n, id, len(plans))
			}
			p := plans[id]
			if err := p.Read(r, scratch, true); err != nil {
				return 0, 0, fmt.Errorf("%w: section message %d of %d (%s): %v", ErrMalformed, i, n, p.Name, err)
			}
			if pass == 1 {
				if err := fn(p, scratch[:p.NumLanes()]); err != nil {
					return 0, 0, err
				}
			}
		}
		if left := r.BitsLeft(); left >= 8 || (left > 0 && r.ReadBits(uint(left)) != 0) {
			return 0, 0, fmt.Errorf("%w: %d bits after the message section", ErrMalformed, left)
		}
	}
	return seq, n, nil
}
