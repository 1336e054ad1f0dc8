package replication

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/bits"
	"time"
	"unicode/utf8"

	"github.com/archenet/archenet/replication/bitio"
	"github.com/archenet/archenet/replication/internal/snapshot"
	"github.com/archenet/archenet/replication/schema"
	"github.com/archenet/archenet/transport"
)

// ProtocolVersion is the replication wire version checked at connect.
// 4: a Reject for a protocol hash mismatch carries the server's component
// list (transport.Reject.Protocol). 6: an input section carries each
// frame's view lag (package input's wire layout), for lag compensation, and
// the server tells a client of its predicted spawns that ended before they
// were sent (message kind 0x12).
// 7: the Hello may name a match (transport.Hello.Match, for a host of
// many matches) and the server may send a drain notice (message kind 0x13:
// Server.Drain, Client.Draining).
const ProtocolVersion uint16 = 7

// Message and datagram kinds (first byte). Handshake messages (package
// transport) use 0x01–0x03.
const (
	kindClientDatagram byte = 0x02 // client → server: ack (+ input section)
	kindSpawns         byte = 0x10 // server → client, reliable: spawn/despawn batch
	kindReady          byte = 0x11 // server → client, reliable: initial world sent
	kindSpawnsEnded    byte = 0x12 // server → client, reliable: predicted spawns that ended unsent
	kindDrain          byte = 0x13 // server → client, reliable: drain notice
)

// ErrMalformed wraps decode errors of replication messages.
var ErrMalformed = errors.New("replication: malformed message")

// ErrDictionary is a client's error when the server compresses snapshots
// with a zstd dictionary other than the client's
// (ClientConfig.CompressionDictionary).
var ErrDictionary = errors.New("replication: compression dictionary mismatch")

// welcomeInfo is the Welcome payload: what a client needs to know about the
// server's replication.
type welcomeInfo struct {
	TickRate   uint16 // net ticks per second
	Depth      uint8  // snapshot ring depth
	Tick       uint32 // server net tick at welcome
	NetDivisor uint16 // simulation ticks per net tick
	// Compression: snapshot datagrams may be zstd-compressed, with the
	// dictionary whose dictionaryHash is Dictionary (0: none).
	Compression bool
	Dictionary  uint64
}

// welcomeVersion is the Welcome payload layout version.
const welcomeVersion = 3

// welcomeLen is the Welcome payload's length:
//
//	version u8 | tick rate u16 | depth u8 | tick u32 | net divisor u16 |
//	flags u8 (bit 0: compression) | dictionary hash u64   (little-endian)
const welcomeLen = 19

func (w welcomeInfo) append(b []byte) []byte {
	b = append(b, welcomeVersion)
	b = binary.LittleEndian.AppendUint16(b, w.TickRate)
	b = append(b, w.Depth)
	b = binary.LittleEndian.AppendUint32(b, w.Tick)
	b = binary.LittleEndian.AppendUint16(b, w.NetDivisor)
	var flags byte
	if w.Compression {
		flags |= 1
	}
	b = append(b, flags)
	return binary.LittleEndian.AppendUint64(b, w.Dictionary)
}

func parseWelcomeInfo(b []byte) (welcomeInfo, error) {
	if len(b) != welcomeLen || b[0] != welcomeVersion {
		return welcomeInfo{}, fmt.Errorf("%w: welcome payload of %d bytes", ErrMalformed, len(b))
	}
	w := welcomeInfo{TickRate: binary.LittleEndian.Uint16(b[1:]), Depth: b[3], Tick: binary.LittleEndian.Uint32(b[4:]),
		NetDivisor: binary.LittleEndian.Uint16(b[8:]), Compression: b[10]&1 != 0, Dictionary: binary.LittleEndian.Uint64(b[11:])}
	if w.TickRate == 0 || w.Depth < 2 || w.Depth > 128 || w.NetDivisor == 0 {
		return w, fmt.Errorf("%w: welcome tick rate %d depth %d net divisor %d", ErrMalformed, w.TickRate, w.Depth, w.NetDivisor)
	}
	if b[10]&^1 != 0 || (!w.Compression && w.Dictionary != 0) {
		return w, fmt.Errorf("%w: welcome flags %#x dictionary %#x", ErrMalformed, b[10], w.Dictionary)
	}
	return w, nil
}

// dictionaryHash names a compression dictionary in the Welcome (0: none).
func dictionaryHash(dict []byte) uint64 {
	if dict == nil {
		return 0
	}
	h := fnv.New64a()
	h.Write(dict)
	return h.Sum64() | 1
}

// appendClientHeader starts a client datagram: its kind and the snapshot
// ack (snapshot.Ack's encoding: 9 bytes while no datagram is missing).
func appendClientHeader(b []byte, a *snapshot.Ack) []byte {
	b = append(b, kindClientDatagram)
	return a.Append(b)
}

// parseClientHeader splits a client datagram into its ack and the input
// section that follows.
func parseClientHeader(b []byte) (snapshot.Ack, []byte, error) {
	var a snapshot.Ack
	rest, err := parseClientHeaderInto(&a, b)
	return a, rest, err
}

// parseClientHeaderInto is parseClientHeader into *a.
func parseClientHeaderInto(a *snapshot.Ack, b []byte) ([]byte, error) {
	if len(b) < 1 || b[0] != kindClientDatagram {
		*a = snapshot.Ack{}
		return nil, fmt.Errorf("%w: client datagram of %d bytes", ErrMalformed, len(b))
	}
	n, err := snapshot.ParseAckInto(a, b[1:])
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return b[1+n:], nil
}

// spawnEntry is one entity of a spawn batch: a spawn (or a component set
// change: same slot and generation, new set) with its full state, or a
// despawn.
type spawnEntry struct {
	Despawn bool
	Slot    uint32
	Meta    snapshot.Meta
	Lanes   []uint64 // all components of Meta.Set, registry id order
	// HasKey and Key: the entity is the recipient's predicted spawn with
	// this key (Server.PredictedSpawn); only sent to the owner.
	HasKey bool
	Key    uint32
}

// spawnWriter builds a spawn batch message:
//
//	kind 0x10 | tick u32 LE | bit stream: count exp-Golomb(0), then per entry
//	despawn bit, slot 24 bits, gen exp-Golomb(0), and for spawns owner
//	exp-Golomb(0), set (registry-size bits), when the receiving client owns
//	the entity a key bit and, if set, its predicted-spawn key (32 bits), and
//	each component's full encoding (owner-only fields when the receiving
//	client owns the entity).
type spawnWriter struct {
	w     bitio.Writer
	body  bitio.Writer
	count int
}

func (s *spawnWriter) reset() {
	s.body.Reset(s.body.Bytes())
	s.count = 0
}

func (s *spawnWriter) add(plans []*schema.Plan, e spawnEntry, owner bool) {
	s.count++
	s.body.WriteBool(e.Despawn)
	s.body.WriteBits(uint64(e.Slot), 24)
	s.body.WriteExpGolomb(uint64(e.Meta.Gen&(1<<31-1)), 0)
	if e.Despawn {
		return
	}
	s.body.WriteExpGolomb(uint64(e.Meta.Owner), 0)
	s.body.WriteBits(e.Meta.Set, uint(len(plans)))
	if owner {
		s.body.WriteBool(e.HasKey)
		if e.HasKey {
			s.body.WriteBits(uint64(e.Key), 32)
		}
	}
	off := 0
	for set := e.Meta.Set; set != 0; set &= set - 1 {
		p := plans[bits.TrailingZeros64(set)]
		n := p.NumLanes()
		p.Write(&s.body, e.Lanes[off:off+n], owner)
		off += n
	}
}

// bytes returns the message for tick (nil if empty).
func (s *spawnWriter) bytes(tick uint32, dst []byte) []byte {
	if s.count == 0 {
		return nil
	}
	body := s.body.Bytes()
	s.w.Reset(dst)
	s.w.WriteBits(uint64(kindSpawns), 8)
	s.w.WriteBits(uint64(tick), 32) // = little-endian u32 at byte 1
	s.w.WriteExpGolomb(uint64(s.count), 0)
	nbits := s.body.BitLen()
	s.w.AppendBits(body, nbits)
	return s.w.Bytes()
}

// parseSpawns decodes a spawn batch, calling fn per entry (lanes are only
// valid during the call). me is the receiving client's owner id.
func parseSpawns(b []byte, plans []*schema.Plan, me uint8, maxLanes int, fn func(tick uint32, e spawnEntry)) error {
	if len(b) < 5 || b[0] != kindSpawns {
		return fmt.Errorf("%w: spawn batch of %d bytes", ErrMalformed, len(b))
	}
	tick := binary.LittleEndian.Uint32(b[1:])
	r := bitio.NewReader(b[5:])
	count := r.ReadExpGolomb(0)
	if r.Err() != nil || count > uint64(r.BitsLeft()) {
		return fmt.Errorf("%w: spawn count", ErrMalformed)
	}
	lanes := make([]uint64, 0, 64)
	for i := uint64(0); i < count; i++ {
		var e spawnEntry
		e.Despawn = r.ReadBool()
		e.Slot = uint32(r.ReadBits(24))
		g := r.ReadExpGolomb(0)
		if g > 1<<31-1 {
			return fmt.Errorf("%w: generation", ErrMalformed)
		}
		e.Meta.Gen = uint32(g)
		if !e.Despawn {
			o := r.ReadExpGolomb(0)
			if o > 255 {
				return fmt.Errorf("%w: owner %d", ErrMalformed, o)
			}
			e.Meta.Owner = uint8(o)
			e.Meta.Set = r.ReadBits(uint(len(plans)))
			if r.Err() == nil && e.Meta.Set == 0 {
				return fmt.Errorf("%w: spawn with no components", ErrMalformed)
			}
			owner := me != 0 && e.Meta.Owner == me
			if owner && r.ReadBool() {
				e.HasKey, e.Key = true, uint32(r.ReadBits(32))
			}
			lanes = lanes[:0]
			for set := e.Meta.Set; set != 0; set &= set - 1 {
				p := plans[bits.TrailingZeros64(set)]
				start := len(lanes)
				if start+p.NumLanes() > maxLanes {
					return fmt.Errorf("%w: entity too large", ErrMalformed)
				}
				for j := 0; j < p.NumLanes(); j++ {
					lanes = append(lanes, 0)
				}
				if err := p.Read(r, lanes[start:], owner); err != nil {
					return fmt.Errorf("%w: %v", ErrMalformed, err)
				}
			}
			e.Lanes = lanes
		}
		if err := r.Err(); err != nil {
			return fmt.Errorf("%w: %v", ErrMalformed, err)
		}
		fn(tick, e)
	}
	return nil
}

// maxEndedKeys bounds the keys of one spawns-ended message (a client holds
// at most ServerConfig.MaxPredictedSpawns keyed entities, ≤ 1024 in
// practice; more is malformed).
const maxEndedKeys = 4096

// appendSpawnsEnded appends the message telling a client that the server
// removed the entities it keyed with keys (Server.PredictedSpawn) before
// they were ever sent:
//
//	kind 0x12 | count uvarint (1..maxEndedKeys) | count × key u32 LE
func appendSpawnsEnded(b []byte, keys []uint32) []byte {
	b = append(b, kindSpawnsEnded)
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		b = binary.LittleEndian.AppendUint32(b, k)
	}
	return b
}

// parseSpawnsEnded decodes a spawns-ended message, calling fn per key.
func parseSpawnsEnded(b []byte, fn func(key uint32)) error {
	if len(b) < 2 || b[0] != kindSpawnsEnded {
		return fmt.Errorf("%w: spawns-ended message of %d bytes", ErrMalformed, len(b))
	}
	n, used := minimalUvarint(b[1:])
	if used <= 0 || n == 0 || n > maxEndedKeys || uint64(len(b)-1-used) != 4*n {
		return fmt.Errorf("%w: spawns-ended message: %d keys in %d bytes", ErrMalformed, n, len(b))
	}
	for rest := b[1+used:]; len(rest) >= 4; rest = rest[4:] {
		fn(binary.LittleEndian.Uint32(rest))
	}
	return nil
}

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

func appendReady(b []byte, tick uint32) []byte {
	b = append(b, kindReady)
	return binary.LittleEndian.AppendUint32(b, tick)
}

// DrainNotice is what a draining server told its client (Client.Draining):
// why, and when it ends the match at the latest.
type DrainNotice struct {
	// Reason is the server's, e.g. "maintenance" (at most
	// transport.MaxReasonLen bytes).
	Reason string
	// Deadline is when the server ends the match at the latest, on the
	// client's clock (the time the notice arrived plus what the server said
	// was left); the zero time if the server named no deadline.
	Deadline time.Time
	// Left is what the server said was left when it sent the notice (0: no
	// deadline).
	Left time.Duration
}

// appendDrain appends a drain notice:
//
//	0x13 | milliseconds left u32 (0: no deadline) | reason length uvarint | reason
//
// (little-endian; the reason at most transport.MaxReasonLen bytes of UTF-8).
func appendDrain(b []byte, left time.Duration, reason string) []byte {
	b = append(b, kindDrain)
	ms := uint32(min(max(left.Milliseconds(), 0), math.MaxUint32))
	if left > 0 && ms == 0 {
		ms = 1
	}
	b = binary.LittleEndian.AppendUint32(b, ms)
	reason = transport.TruncateReason(reason, transport.MaxReasonLen)
	b = binary.AppendUvarint(b, uint64(len(reason)))
	return append(b, reason...)
}

// parseDrain decodes a drain notice (Deadline is left zero: the caller
// knows when it arrived).
func parseDrain(b []byte) (DrainNotice, error) {
	if len(b) < 6 || b[0] != kindDrain {
		return DrainNotice{}, fmt.Errorf("%w: drain notice of %d bytes", ErrMalformed, len(b))
	}
	ms := binary.LittleEndian.Uint32(b[1:])
	n, k := minimalUvarint(b[5:])
	if k <= 0 || n > transport.MaxReasonLen || uint64(len(b)-5-k) != n {
		return DrainNotice{}, fmt.Errorf("%w: drain notice reason of %d bytes in %d", ErrMalformed, n, len(b))
	}
	reason := b[5+k:]
	if !utf8.Valid(reason) {
		return DrainNotice{}, fmt.Errorf("%w: drain notice reason is not UTF-8", ErrMalformed)
	}
	return DrainNotice{Reason: string(reason), Left: time.Duration(ms) * time.Millisecond}, nil
}
