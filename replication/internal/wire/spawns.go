package wire

import (
	"encoding/binary"
	"fmt"
	"math/bits"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/bitio"
	"github.com/archenet/archenet/replication/internal/entity"
	"github.com/archenet/archenet/replication/schema"
)

// SpawnEntry is one entity of a spawn batch: a spawn (or a component set
// change: same slot and generation, new set) with its full state, or a
// despawn.
type SpawnEntry struct {
	Despawn bool
	Slot    uint32
	Meta    entity.Meta
	Lanes   []uint64 // all components of Meta.Set, registry id order
	// HasKey and Key: the entity is the recipient's predicted spawn with
	// this key (Server.PredictedSpawn); only sent to the owner.
	HasKey bool
	Key    uint32
	// Target is the target of the entity's relation component (when Set
	// holds one: schema.Plan.IsRelation); HasTarget false: none.
	Target    components.NetID
	HasTarget bool
}

// SpawnWriter builds a spawn batch message (reliable, server → client):
//
//	0x10 | tick u32 LE | bit stream: count exp-Golomb(0), then per entry
//	despawn bit, slot 24 bits, gen exp-Golomb(0), and for spawns owner
//	exp-Golomb(0), set (registry-size bits), when the receiving client owns
//	the entity a key bit and, if set, its predicted-spawn key (32 bits), and
//	each component's full encoding (owner-only fields when the receiving
//	client owns the entity).
//
// The zero value is an empty batch.
type SpawnWriter struct {
	w     bitio.Writer
	body  bitio.Writer
	count int
}

// Reset empties the batch, keeping its memory.
func (s *SpawnWriter) Reset() {
	s.body.Reset(s.body.Bytes())
	s.count = 0
}

// Add adds an entry; owner says whether the receiving client owns the
// entity (it then gets the owner-only fields and the key).
func (s *SpawnWriter) Add(plans []*schema.Plan, e SpawnEntry, owner bool) {
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
	rel := false
	for set := e.Meta.Set; set != 0; set &= set - 1 {
		p := plans[bits.TrailingZeros64(set)]
		n := p.NumLanes()
		p.Write(&s.body, e.Lanes[off:off+n], owner)
		off += n
		rel = rel || p.IsRelation()
	}
	if rel {
		schema.WriteRef(&s.body, e.Target.Handle, e.Target.Gen, e.HasTarget)
	}
}

// Len returns the length of the message Bytes returns (0 if empty).
func (s *SpawnWriter) Len() int {
	if s.count == 0 {
		return 0
	}
	return (40 + bitio.ExpGolombLen(uint64(s.count), 0) + s.body.BitLen() + 7) / 8
}

// Bytes returns the message for tick, written over dst (nil if empty).
func (s *SpawnWriter) Bytes(tick uint32, dst []byte) []byte {
	if s.count == 0 {
		return nil
	}
	body := s.body.Bytes()
	s.w.Reset(dst)
	s.w.WriteBits(uint64(KindSpawns), 8)
	s.w.WriteBits(uint64(tick), 32) // = little-endian u32 at byte 1
	s.w.WriteExpGolomb(uint64(s.count), 0)
	nbits := s.body.BitLen()
	s.w.AppendBits(body, nbits)
	return s.w.Bytes()
}

// ParseSpawns decodes a spawn batch, calling fn per entry (its lanes are
// only valid during the call). me is the receiving client's owner id; an
// entity of more than maxLanes lanes is malformed.
func ParseSpawns(b []byte, plans []*schema.Plan, me uint8, maxLanes int, fn func(tick uint32, e SpawnEntry)) error {
	if len(b) < 5 || b[0] != KindSpawns {
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
		var e SpawnEntry
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
			rel := false
			for set := e.Meta.Set; set != 0; set &= set - 1 {
				p := plans[bits.TrailingZeros64(set)]
				if p.IsRelation() {
					if rel {
						return fmt.Errorf("%w: two relation components", ErrMalformed)
					}
					rel = true
				}
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
			if rel {
				h, g, ok := schema.ReadRef(r)
				e.Target, e.HasTarget = components.NetID{Handle: h, Gen: g}, ok
			}
		}
		if err := r.Err(); err != nil {
			return fmt.Errorf("%w: %v", ErrMalformed, err)
		}
		fn(tick, e)
	}
	return nil
}
