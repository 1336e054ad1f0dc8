package replication

import (
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"unsafe"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/internal/slots"
	"github.com/archenet/archenet/replication/internal/wire"
	"github.com/archenet/archenet/replication/schema"
	"github.com/archenet/archenet/transport"
	arche "github.com/mlange-42/arche/ecs"
)

// A checkpoint moves a match to another process: Server.Checkpoint writes
// its replicated world, its net handle table and its seats to bytes;
// Restore makes a server of them in a new world; Server.DrainTo tells the
// clients where the match goes on, and they resume their seats there.
//
// Layout (little-endian; a checkpoint is read by the same build on the same
// architecture: component values are their memory):
//
//	"ANCP" | version u8 | registry hash u64 | tick u32 | match length u8 | match |
//	slots uvarint | per slot: generation uvarint | flags u8 (bit 0: alive,
//	  bit 1: owner) | if alive: [owner u8] | component set u64 |
//	  Replicated | each registered component of the set, in registry order |
//	free slots uvarint | each uvarint |
//	seats u8 | per seat: client u8 | secret [16] | messages taken u32 |
//	game state length uvarint | game state

// checkpointMagic starts a checkpoint; checkpointVersion is its layout's.
const (
	checkpointMagic   = "ANCP"
	checkpointVersion = 1
	maxCheckpointSlot = 1 << 24 // (net handles hold 24 bits of slot)
)

// ErrCheckpoint wraps the errors of a checkpoint that does not restore.
var ErrCheckpoint = errors.New("replication: checkpoint")

// Checkpoint appends the match to dst: its replicated entities (their
// registered components, Replicated and Owner, at their full precision),
// its net handle table (every slot's generation and the free slots, so that
// the restored server hands out the handles and generations this one would
// have, and the clients' references stay valid), its seats (each client's
// id and resume secret), its tick and game, the game's own state (anything
// not replicated: server-only components, scores, the simulation's
// clock), for the game that restores it (Restore returns it).
//
// What does not move: reliable messages in flight (each client's replication
// starts over in the new process: it drops its mirrors and receives the
// world again as its seat resumes), the input logs (input.Authority), the
// interest grid's hysteresis, predicted spawns' keys, and components the
// registry does not hold. A world whose entities hold components with
// components.Ref fields or relation components is refused (their entities
// are not carried), as is a registered component that holds pointers (a
// string, a slice). Call it right after Server.Send, on the simulation
// goroutine: a structural change since (an entity created or removed, a
// component added or removed) is an error.
func (s *Server) Checkpoint(dst []byte, game []byte) ([]byte, error) {
	for _, rc := range append(s.refs[:len(s.refs):len(s.refs)], s.rels...) {
		if q := s.world.Query(rc.filter); q.Count() > 0 {
			q.Close()
			return dst, fmt.Errorf("%w: entities hold %s, whose references a checkpoint does not carry", ErrCheckpoint, rc.plan.Type)
		}
	}
	for _, p := range s.plans {
		if hasPointers(p.Type) {
			return dst, fmt.Errorf("%w: component %s holds pointers, which a checkpoint does not carry", ErrCheckpoint, p.Type)
		}
	}
	if s.capture.Pending() {
		return dst, fmt.Errorf("%w: entities were created, removed or changed their components since the last Server.Send: take a checkpoint right after Send", ErrCheckpoint)
	}
	b := append(dst, checkpointMagic...)
	b = append(b, checkpointVersion)
	b = binary.LittleEndian.AppendUint64(b, s.cfg.Registry.Hash())
	b = binary.LittleEndian.AppendUint32(b, s.tick)
	b = append(b, byte(len(s.cfg.Match)))
	b = append(b, s.cfg.Match...)
	infos := s.slots.Infos
	b = binary.AppendUvarint(b, uint64(len(infos)))
	repSize := int(unsafe.Sizeof(components.Replicated{}))
	for slot := range infos {
		si := &infos[slot]
		b = binary.AppendUvarint(b, uint64(si.Gen))
		alive := si.Alive && s.world.Alive(si.Entity)
		if !alive {
			b = append(b, 0)
			continue
		}
		e := si.Entity
		hasOwner := s.world.Has(e, s.ids.owner)
		flags := byte(1)
		if hasOwner {
			flags |= 2
		}
		b = append(b, flags)
		if hasOwner {
			b = append(b, (*components.Owner)(s.world.Get(e, s.ids.owner)).Client)
		}
		set := si.Meta.Set
		b = binary.LittleEndian.AppendUint64(b, set)
		b = append(b, unsafe.Slice((*byte)(s.world.Get(e, s.ids.rep)), repSize)...)
		for i, p := range s.plans {
			if set>>i&1 != 0 {
				b = append(b, unsafe.Slice((*byte)(s.world.Get(e, s.ids.comps[i])), p.Type.Size())...)
			}
		}
	}
	free := s.slots.FreeSlots()
	b = binary.AppendUvarint(b, uint64(len(free)))
	for _, slot := range free {
		b = binary.AppendUvarint(b, uint64(slot))
	}
	var seats []*remote
	for _, c := range s.clients {
		if c != nil && s.seatsOn() {
			seats = append(seats, c)
		}
	}
	b = append(b, byte(len(seats)))
	for _, c := range seats {
		b = append(b, c.ID)
		b = append(b, c.seat.secret[:]...)
		b = binary.LittleEndian.AppendUint32(b, c.seat.taken)
	}
	b = binary.AppendUvarint(b, uint64(len(game)))
	return append(b, game...), nil
}

// hasPointers reports whether a value of t holds pointers.
func hasPointers(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Array:
		return t.Len() > 0 && hasPointers(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if hasPointers(t.Field(i).Type) {
				return true
			}
		}
		return false
	case reflect.Pointer, reflect.UnsafePointer, reflect.Slice, reflect.Map, reflect.String, reflect.Interface, reflect.Func, reflect.Chan:
		return true
	}
	return false
}

// Restore makes a server, as NewServer does, of a checkpoint
// (Server.Checkpoint) taken elsewhere: it creates the checkpoint's
// entities in world (which must hold no replicated entity), with their
// registered components, Replicated and Owner, gives them the net handles
// and generations they had, and keeps every seat suspended for
// ServerLimits.SeatWindow with its secret, so that its client resumes it
// here (its replication starts over: Welcome's reset). It returns the
// game's own state as the checkpoint carried it; the game restores it,
// finding its entities with Server.Resolve (their NetIDs are the same),
// and its players with Server.Suspended. cfg must have the registry of
// the checkpoint (its hash is checked); its Match, if empty, is the
// checkpoint's. Nothing of a checkpoint that fails to decode is left in
// world.
func Restore(world *arche.World, l transport.Listener, cfg ServerConfig, checkpoint []byte) (*Server, []byte, error) {
	cp, err := parseCheckpoint(checkpoint, cfg.Registry.Plans())
	if err != nil {
		return nil, nil, err
	}
	if h := cfg.Registry.Hash(); cp.hash != h {
		return nil, nil, fmt.Errorf("%w: taken with registry %#x, restored with %#x", ErrCheckpoint, cp.hash, h)
	}
	if cfg.Match == "" {
		cfg.Match = cp.match
	}
	s, err := NewServer(world, l, cfg)
	if err != nil {
		return nil, nil, err
	}
	restored := make([]slots.Restored, len(cp.slots))
	for i := range cp.slots {
		cs := &cp.slots[i]
		restored[i] = slots.Restored{Gen: cs.gen, Alive: cs.alive}
		if cs.alive {
			restored[i].Entity = s.restoreEntity(cs)
		}
	}
	s.slots.Restore(restored, cp.free)
	s.capture.Apply() // (their layouts: Resolve finds them at once)
	s.slots.EndTick() // (no client holds anything yet: no layout change to tell)
	s.tick = cp.tick
	now := s.cfg.Now()
	for _, st := range cp.seats {
		c := &remote{conn: &deadConn{done: make(chan struct{}), mtu: s.cfg.MTU}}
		c.Init(st.id, s.peerConfig(), now)
		s.seatSerial++
		c.seat = seat{serial: s.seatSerial, secret: st.secret, suspended: true, since: now, taken: st.taken, restored: true,
			why: errors.New("the match was restored from a checkpoint")}
		c.seat.log.reset()
		s.clients[st.id] = c
	}
	return s, cp.game, nil
}

// restoreEntity creates the entity of a checkpoint's slot in the server's
// world.
func (s *Server) restoreEntity(cs *checkpointSlot) arche.Entity {
	ids := []arche.ID{s.ids.rep}
	if cs.hasOwner {
		ids = append(ids, s.ids.owner)
	}
	for i := range s.plans {
		if cs.set>>i&1 != 0 {
			ids = append(ids, s.ids.comps[i])
		}
	}
	e := s.world.NewEntity(ids...)
	copy(unsafe.Slice((*byte)(s.world.Get(e, s.ids.rep)), len(cs.rep)), cs.rep)
	if cs.hasOwner {
		(*components.Owner)(s.world.Get(e, s.ids.owner)).Client = cs.owner
	}
	at := 0
	for i, p := range s.plans {
		if cs.set>>i&1 != 0 {
			n := int(p.Type.Size())
			copy(unsafe.Slice((*byte)(s.world.Get(e, s.ids.comps[i])), n), cs.comps[at:at+n])
			at += n
		}
	}
	return e
}

// checkpoint is a decoded checkpoint.
type checkpoint struct {
	hash  uint64
	tick  uint32
	match string
	slots []checkpointSlot
	free  []uint32
	seats []checkpointSeat
	game  []byte
}

type checkpointSlot struct {
	gen        uint32
	alive      bool
	hasOwner   bool
	owner      uint8
	set        uint64
	rep, comps []byte // (alias the checkpoint)
}

type checkpointSeat struct {
	id     uint8
	secret [wire.SecretLen]byte
	taken  uint32
}

// cpReader reads a checkpoint, failing closed.
type cpReader struct {
	b   []byte
	err error
}

func (r *cpReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: "+format, append([]any{ErrCheckpoint}, args...)...)
	}
	r.b = nil
}

func (r *cpReader) bytes(n int) []byte {
	if r.err != nil || n < 0 || n > len(r.b) {
		r.fail("truncated")
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *cpReader) uvarint(max uint64) uint64 {
	if r.err != nil {
		return 0
	}
	v, k := binary.Uvarint(r.b)
	if k <= 0 || v > max {
		r.fail("a count or number out of bounds")
		return 0
	}
	r.b = r.b[k:]
	return v
}

// parseCheckpoint decodes a checkpoint for plans. Every count is bounded by
// what is left of b before anything is allocated for it.
func parseCheckpoint(b []byte, plans []*schema.Plan) (checkpoint, error) {
	var cp checkpoint
	r := &cpReader{b: b}
	if string(r.bytes(len(checkpointMagic))) != checkpointMagic {
		return cp, fmt.Errorf("%w: not a checkpoint", ErrCheckpoint)
	}
	if v := r.bytes(1); r.err == nil && v[0] != checkpointVersion {
		return cp, fmt.Errorf("%w: layout version %d, this build reads %d", ErrCheckpoint, v[0], checkpointVersion)
	}
	if h := r.bytes(8); r.err == nil {
		cp.hash = binary.LittleEndian.Uint64(h)
	}
	if t := r.bytes(4); r.err == nil {
		cp.tick = binary.LittleEndian.Uint32(t)
	}
	if n := r.bytes(1); r.err == nil {
		if n[0] > transport.MaxMatchLen {
			r.fail("match of %d bytes", n[0])
		}
		cp.match = string(r.bytes(int(n[0])))
	}
	n := r.uvarint(maxCheckpointSlot)
	if n > uint64(len(r.b))/2 { // (a slot takes 2 bytes at least)
		r.fail("%d slots in %d bytes", n, len(r.b))
	}
	repSize := int(unsafe.Sizeof(components.Replicated{}))
	for slot := uint64(0); slot < n && r.err == nil; slot++ {
		var cs checkpointSlot
		cs.gen = uint32(r.uvarint(1<<32 - 1))
		flags := r.bytes(1)
		if r.err != nil {
			break
		}
		if flags[0]&^3 != 0 || flags[0] == 2 {
			r.fail("slot %d flags %#x", slot, flags[0])
			break
		}
		cs.alive, cs.hasOwner = flags[0]&1 != 0, flags[0]&2 != 0
		if cs.alive {
			if cs.hasOwner {
				if o := r.bytes(1); r.err == nil {
					cs.owner = o[0]
				}
			}
			if set := r.bytes(8); r.err == nil {
				cs.set = binary.LittleEndian.Uint64(set)
			}
			if cs.set == 0 || cs.set>>len(plans) != 0 {
				r.fail("slot %d component set %#x", slot, cs.set)
				break
			}
			cs.rep = r.bytes(repSize)
			size := 0
			for i, p := range plans {
				if cs.set>>i&1 != 0 {
					size += int(p.Type.Size())
				}
			}
			cs.comps = r.bytes(size)
		}
		cp.slots = append(cp.slots, cs)
	}
	nf := r.uvarint(n)
	seen := make(map[uint32]bool)
	for range nf {
		slot := uint32(r.uvarint(n))
		if r.err != nil || slot >= uint32(n) {
			r.fail("free slot %d of %d", slot, n)
			break
		}
		if cp.slots[slot].alive || seen[slot] {
			r.fail("free slot %d is alive or listed twice", slot)
			break
		}
		seen[slot] = true
		cp.free = append(cp.free, slot)
	}
	if ns := r.bytes(1); r.err == nil {
		for range ns[0] {
			id := r.bytes(1)
			secret := r.bytes(wire.SecretLen)
			taken := r.bytes(4)
			if r.err != nil {
				break
			}
			if id[0] == 0 || id[0] == 255 || slicesContainsSeat(cp.seats, id[0]) {
				r.fail("seat of client %d (or twice)", id[0])
				break
			}
			st := checkpointSeat{id: id[0], taken: binary.LittleEndian.Uint32(taken)}
			copy(st.secret[:], secret)
			cp.seats = append(cp.seats, st)
		}
	}
	cp.game = r.bytes(int(r.uvarint(uint64(len(r.b)))))
	if r.err == nil && len(r.b) != 0 {
		r.fail("%d trailing bytes", len(r.b))
	}
	return cp, r.err
}

func slicesContainsSeat(seats []checkpointSeat, id uint8) bool {
	for _, s := range seats {
		if s.id == id {
			return true
		}
	}
	return false
}
