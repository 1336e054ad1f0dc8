package snapshot

import (
	"errors"
	"fmt"
	"math/bits"
	"sort"

	"github.com/archenet/archenet/replication/bitio"
	"github.com/archenet/archenet/replication/schema"
)

// Decode errors. A datagram that fails is dropped whole and not acked; the
// receiver's state is unchanged.
var (
	// ErrMissingBaseline: the datagram is a delta against a tick this
	// receiver does not hold (lost, or too old). Never guessed.
	ErrMissingBaseline = errors.New("snapshot: baseline not held")
	// ErrDuplicate: the tick was already decoded (harmless).
	ErrDuplicate = errors.New("snapshot: duplicate tick")
	// ErrTooOld: the tick is older than the receiver's ring.
	ErrTooOld = errors.New("snapshot: tick too old")
	// ErrNotSnapshot: the datagram is not a snapshot datagram.
	ErrNotSnapshot = errors.New("snapshot: not a snapshot datagram")
	// ErrTooManyEntities: the decoded view would exceed MaxEntities.
	ErrTooManyEntities = errors.New("snapshot: too many entities")
)

// DefaultMaxEntities bounds a receiver's view.
const DefaultMaxEntities = 1 << 16

// Receiver is a client's side of snapshot replication: a ring of the views
// it decoded, each the full quantized state of its relevant entities at one
// tick, and the ack state it reports to the server. Not safe for concurrent
// use.
type Receiver struct {
	// MaxEntities bounds the entities of one view (default
	// DefaultMaxEntities); a datagram exceeding it is rejected.
	MaxEntities int

	plans  []*schema.Plan
	me     uint8
	ring   []Frame
	newest uint32
	mask   uint32
	latest *Frame
	masks  [schema.MaxComponents]uint64

	maskBuf    [8]byte
	maskReader bitio.Reader
	pred       []uint64
	dec        decompressor

	// Counters.
	Decoded, Dropped uint64
}

// NewReceiver returns a receiver for the components of reg, for the client
// with owner id me (0 = owns nothing), keeping depth views (0 =
// DefaultDepth; must match the server's ring depth or exceed it).
func NewReceiver(reg *schema.Registry, me uint8, depth int) *Receiver {
	if depth <= 0 {
		depth = DefaultDepth
	}
	return &Receiver{plans: reg.Plans(), me: me, ring: make([]Frame, depth), MaxEntities: DefaultMaxEntities}
}

// SetOwnerID changes the client's owner id (assigned at connect).
func (r *Receiver) SetOwnerID(me uint8) { r.me = me }

// Reset forgets every view and ack (after a reconnect).
func (r *Receiver) Reset() {
	for i := range r.ring {
		r.ring[i].valid = false
	}
	r.newest, r.mask, r.latest = 0, 0, nil
}

// Ack returns the acknowledgement to send: the newest decoded tick and a
// mask whose bit i says tick newest−1−i was decoded too.
func (r *Receiver) Ack() (newest, mask uint32) { return r.newest, r.mask }

// Latest returns the view of the newest decoded tick (nil before the
// first). Entries are sorted by slot; do not modify it.
func (r *Receiver) Latest() *Frame { return r.latest }

// View returns the decoded view of tick, or nil.
func (r *Receiver) View(tick uint32) *Frame {
	if tick == 0 {
		return nil
	}
	f := &r.ring[tick%uint32(len(r.ring))]
	if !f.valid || f.Tick != tick {
		return nil
	}
	return f
}

// Find returns the entry index of slot in f (a receiver view), or −1.
func (f *Frame) Find(slot uint32) int {
	i := sort.Search(len(f.Slots), func(i int) bool { return f.Slots[i] >= slot })
	if i < len(f.Slots) && f.Slots[i] == slot {
		return i
	}
	return -1
}

// Decode decodes a snapshot datagram on top of the baseline it names and
// stores the resulting view. It returns the datagram's tick. Errors leave
// the receiver unchanged: [ErrMissingBaseline], [ErrDuplicate], [ErrTooOld],
// truncated or corrupt input (wrapping [ErrCorrupt], schema.ErrCorrupt or
// bitio.ErrShortBuffer). Never panics, whatever the bytes.
func (r *Receiver) Decode(b []byte) (uint32, error) {
	t, err := r.decode(b)
	if err != nil {
		r.Dropped++
		return t, err
	}
	r.Decoded++
	return t, nil
}

func (r *Receiver) decode(b []byte) (uint32, error) {
	if len(b) < 1 || b[0]&^FlagCompressed != KindSnapshot {
		return 0, ErrNotSnapshot
	}
	body := b
	if b[0]&FlagCompressed != 0 {
		d, err := r.dec.decompress(b[1:])
		if err != nil {
			return 0, err
		}
		body = d
	} else {
		body = b[1:]
	}
	var rd bitio.Reader
	rd.Reset(body)
	S := uint32(rd.ReadBits(32))
	d := rd.ReadExpGolomb(0)
	var predOn bool
	var dd uint64
	if d != 0 {
		predOn = rd.ReadBool()
		if predOn {
			dd = rd.ReadExpGolomb(0) + 1
		}
	}
	count := rd.ReadExpGolomb(0)
	k := uint(rd.ReadBits(3))
	ext := rd.ReadBits(1)
	if err := rd.Err(); err != nil {
		return 0, err
	}
	depth := uint32(len(r.ring))
	if S == 0 || d >= uint64(depth) || uint64(S) <= d {
		return S, fmt.Errorf("%w: tick %d baseline distance %d", ErrCorrupt, S, d)
	}
	var inputAck uint32
	var inputLead, inputDepth int64
	var hasFeedback, ackRel bool
	if ext != 0 {
		// The ack is relative to the baseline view's (resolved below) or in
		// full.
		if ackRel = rd.ReadBool(); ackRel {
			d := bitio.UnZigZag(rd.ReadExpGolomb(2))
			if d < -MaxInputLead || d > MaxInputLead {
				return S, fmt.Errorf("%w: input ack step %d", ErrCorrupt, d)
			}
			inputAck = uint32(d)
		} else {
			inputAck = uint32(rd.ReadBits(32))
		}
		if hasFeedback = rd.ReadBool(); hasFeedback {
			inputLead = bitio.UnZigZag(rd.ReadExpGolomb(2))
			inputDepth = bitio.UnZigZag(rd.ReadExpGolomb(2))
		}
		if err := rd.Err(); err != nil {
			return S, err
		}
		if inputLead < -MaxInputLead || inputLead > MaxInputLead || inputDepth < -MaxInputDepth || inputDepth > MaxInputDepth {
			return S, fmt.Errorf("%w: input feedback lead %d depth %d", ErrCorrupt, inputLead, inputDepth)
		}
	}
	if count > uint64(rd.BitsLeft()) {
		return S, fmt.Errorf("%w: %d records in %d bits", ErrCorrupt, count, rd.BitsLeft())
	}
	if r.View(S) != nil {
		return S, ErrDuplicate
	}
	if r.newest != 0 && int32(r.newest-S) >= int32(depth) {
		return S, ErrTooOld
	}
	var base, base2 *Frame
	if d != 0 {
		base = r.View(S - uint32(d))
		if base == nil {
			return S, ErrMissingBaseline
		}
		if ackRel {
			if !base.HasInputAck {
				return S, fmt.Errorf("%w: input ack relative to a baseline without one", ErrCorrupt)
			}
			inputAck += base.InputAck
		}
		if predOn {
			if d+dd >= uint64(depth) || uint64(S) <= d+dd {
				return S, fmt.Errorf("%w: prediction view distance %d", ErrCorrupt, d+dd)
			}
			base2 = r.View(S - uint32(d+dd))
			if base2 == nil {
				return S, ErrMissingBaseline
			}
		}
	}
	if ackRel && d == 0 {
		return S, fmt.Errorf("%w: input ack relative to no baseline", ErrCorrupt)
	}
	// The ring slot of S holds nothing a server can still name as a
	// baseline (a tick at least one ring depth older), so it is reused.
	out := &r.ring[S%depth]
	out.valid = false
	if err := r.merge(&rd, base, base2, out, S, int(count), k); err != nil {
		return S, err
	}
	out.Tick = S
	out.InputAck, out.HasInputAck = inputAck, ext != 0
	out.InputHeld, out.InputDepth, out.HasInputFeedback = inputAck+uint32(inputLead), int(inputDepth), hasFeedback
	out.valid = true
	r.noteDecoded(S)
	return S, nil
}

func (r *Receiver) noteDecoded(S uint32) {
	switch {
	case r.newest == 0:
		r.newest, r.mask = S, 0
	case int32(S-r.newest) > 0:
		shift := S - r.newest
		if shift > 32 {
			r.mask = 0
		} else {
			r.mask = r.mask<<shift | 1<<(shift-1)
		}
		r.newest = S
	default:
		back := r.newest - S // ≥ 1
		if back <= 32 {
			r.mask |= 1 << (back - 1)
		}
	}
	if r.latest == nil || int32(S-r.latest.Tick) > 0 {
		r.latest = r.View(S)
	}
}

func (r *Receiver) merge(rd *bitio.Reader, base, base2, out *Frame, S uint32, count int, k uint) error {
	out.Slots = out.Slots[:0]
	out.Metas = out.Metas[:0]
	out.Offs = out.Offs[:0]
	out.Lanes = out.Lanes[:0]
	out.Srcs = out.Srcs[:0]
	bi := 0
	nb := 0
	if base != nil {
		nb = len(base.Slots)
	}
	copyBase := func(i int) {
		out.Slots = append(out.Slots, base.Slots[i])
		out.Metas = append(out.Metas, base.Metas[i])
		out.Offs = append(out.Offs, uint32(len(out.Lanes)))
		out.Lanes = append(out.Lanes, base.EntityLanes(i)...)
		out.Srcs = append(out.Srcs, base.Srcs[i])
	}
	prev := int64(-1)
	var prevMask uint64
	prevMaskBits := -1
	for n := 0; n < count; n++ {
		gap := rd.ReadExpGolomb(k)
		if err := rd.Err(); err != nil {
			return err
		}
		slot64 := prev + 1 + int64(gap)
		if gap >= MaxSlots || slot64 >= MaxSlots {
			return fmt.Errorf("%w: slot out of range", ErrCorrupt)
		}
		slot := uint32(slot64)
		prev = slot64
		for bi < nb && base.Slots[bi] < slot {
			copyBase(bi)
			bi++
		}
		inBase := bi < nb && base.Slots[bi] == slot
		kind := kindDelta
		if rd.ReadBits(1) == 1 {
			kind = kindFull + int(rd.ReadBits(1))
		}
		if err := rd.Err(); err != nil {
			return err
		}
		switch kind {
		case kindRemoval:
			if !inBase {
				return fmt.Errorf("%w: removal of slot %d not in the baseline", ErrCorrupt, slot)
			}
			bi++
		case kindFull:
			if inBase {
				bi++
			}
			start := len(out.Lanes)
			m, lanes, err := readFull(rd, r.plans, r.me, out.Lanes)
			out.Lanes = lanes
			if err != nil {
				return err
			}
			out.Slots = append(out.Slots, slot)
			out.Metas = append(out.Metas, m)
			out.Offs = append(out.Offs, uint32(start))
			out.Srcs = append(out.Srcs, S)
		default:
			if !inBase {
				return fmt.Errorf("%w: delta for slot %d not in the baseline", ErrCorrupt, slot)
			}
			m := base.Metas[bi]
			owner := r.me != 0 && m.Owner == r.me
			repeat := rd.ReadBits(1) == 1
			if repeat {
				if prevMaskBits < 0 {
					return fmt.Errorf("%w: repeated field mask without a previous one", ErrCorrupt)
				}
				mr := &r.maskReader
				for i := range r.maskBuf {
					r.maskBuf[i] = byte(prevMask >> (8 * i))
				}
				mr.Reset(r.maskBuf[:(prevMaskBits+7)/8])
				_, nb := readMasks(mr, r.plans, m.Set, owner, &r.masks)
				if mr.Err() != nil || nb != prevMaskBits {
					return fmt.Errorf("%w: repeated field mask does not fit slot %d", ErrCorrupt, slot)
				}
			} else {
				raw, nbits := readMasks(rd, r.plans, m.Set, owner, &r.masks)
				if nbits <= 64 {
					prevMask, prevMaskBits = raw, nbits
				} else {
					prevMaskBits = -1
				}
			}
			if err := rd.Err(); err != nil {
				return err
			}
			baseLanes := base.EntityLanes(bi)
			pred := baseLanes
			if base2 != nil && rd.ReadBool() {
				// Residuals against the extrapolation through view base2.
				i2 := base2.Find(slot)
				if i2 < 0 || base2.Metas[i2] != m {
					return fmt.Errorf("%w: predicted slot %d not in the prediction view", ErrCorrupt, slot)
				}
				r.pred = append(r.pred[:0], baseLanes...)
				predict(r.plans, m.Set, baseLanes, base2.EntityLanes(i2), int64(S-base.Tick), int64(base.Tick-base2.Tick), r.pred)
				pred = r.pred
			}
			start := len(out.Lanes)
			out.Lanes = append(out.Lanes, baseLanes...)
			nc := bits.OnesCount64(m.Set)
			if err := readDeltaBody(rd, r.plans, m.Set, r.masks[:nc], out.Lanes[start:], pred, owner); err != nil {
				return err
			}
			out.Slots = append(out.Slots, slot)
			out.Metas = append(out.Metas, m)
			out.Offs = append(out.Offs, uint32(start))
			out.Srcs = append(out.Srcs, S)
			bi++
		}
		if len(out.Slots) > r.MaxEntities {
			return ErrTooManyEntities
		}
	}
	for bi < nb {
		copyBase(bi)
		bi++
	}
	if len(out.Slots) > r.MaxEntities {
		return ErrTooManyEntities
	}
	return rd.Err()
}
