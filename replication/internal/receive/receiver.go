package receive

import (
	"errors"
	"fmt"
	"math/bits"
	"sort"

	"github.com/archenet/archenet/replication/bitio"
	"github.com/archenet/archenet/replication/internal/codec"
	"github.com/archenet/archenet/replication/internal/entity"
	"github.com/archenet/archenet/replication/internal/wire"
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
	ErrNotSnapshot = wire.ErrNotSnapshot
	// ErrTooManyEntities: the decoded view would exceed MaxEntities.
	ErrTooManyEntities = errors.New("snapshot: too many entities")
)

// DefaultMaxEntities bounds a receiver's view.
const DefaultMaxEntities = 1 << 16

// Receiver is a client's side of snapshot replication: a ring of the views
// it decoded, each the full quantized state of its relevant entities at one
// tick, and the ack state it reports to the server. Not safe for concurrent
// use.
//
// A tick may come in several datagrams (parts). Each is decoded against the
// baseline it names the moment it arrives: the first part of a tick makes its
// view from the baseline view, later ones merge their records in (the parts
// of a tick carry disjoint entities). [Receiver.Ack] seals every view it
// reports, so the server's model of each acked view is exact; a part that
// arrives after its view was sealed is still decoded and shown
// ([Receiver.View]), but never merged into the view later datagrams are
// decoded against, and the server, which learns it was missing, sends its
// records again.
type Receiver struct {
	// MaxEntities bounds the entities of one view (default
	// DefaultMaxEntities); a datagram exceeding it is rejected.
	MaxEntities int

	plans []*schema.Plan
	poses uint64 // the plans laid out as poses (codec.IsPose), by id
	// ownerOnly is each plan's owner-only groups (a bit per group).
	ownerOnly []uint64
	me        uint8
	ring      []View     // exact views: what later datagrams are decoded against
	meta      []viewMeta // per ring entry
	shown     []View     // per ring entry: the view plus parts that came after sealing
	spare     View       // merge target, swapped into place
	// stage holds a later part's records while they are read (merger.inPlace);
	// stageAt is the entry in the tick's view of each record of an entity
	// the view holds, and removed the entries its removals take out.
	stage   View
	stageAt []int32
	removed []int32
	// copyParts (tests): merge later parts into a new view as first parts
	// are; inPlaceN and combinedN count the later parts written in place
	// and merged.
	copyParts           bool
	inPlaceN, combinedN int
	newest              uint32
	mask                uint32
	latest              uint32 // newest decoded tick (0: none)
	masks               [schema.MaxComponents]uint64

	maskBuf    [8]byte
	maskReader bitio.Reader
	rd         bitio.Reader
	pred       []uint64
	orders     []uint8 // per lane of a delta record: its residual's Rice order
	dec        codec.Decompressor

	// Counters.
	Decoded, Dropped uint64
	// Records counts the records of the datagrams decoded.
	Records uint64
	// Late counts parts that arrived after their tick's view was sealed by an
	// wire.Ack: shown, not merged.
	Late uint64
}

// viewMeta is what a receiver knows about one view besides its content.
type viewMeta struct {
	parts  uint64 // parts merged into the view
	late   uint64 // parts that came after sealing (in shown only)
	count  int    // parts the tick was sent in
	base   uint32 // baseline tick (0: none)
	base2  uint32 // prediction view tick (0: none)
	held   int    // Acks that left the view out while it lacked datagrams
	sealed bool   // reported by an wire.Ack: its content is final
}

// NewReceiver returns a receiver for the components of reg, for the client
// with owner id me (0 = owns nothing), keeping depth views (0 =
// entity.DefaultDepth; must match the server's ring depth or exceed it).
func NewReceiver(reg *schema.Registry, me uint8, depth int) *Receiver {
	if depth <= 0 {
		depth = entity.DefaultDepth
	}
	r := &Receiver{plans: reg.Plans(), me: me, ring: make([]View, depth), meta: make([]viewMeta, depth),
		shown: make([]View, depth), MaxEntities: DefaultMaxEntities}
	r.ownerOnly = make([]uint64, len(r.plans))
	for i, p := range r.plans {
		if codec.IsPose(p) {
			r.poses |= 1 << i
		}
		for gi, g := range p.Groups() {
			if g.OwnerOnly {
				r.ownerOnly[i] |= 1 << gi
			}
		}
	}
	return r
}

// Depth returns how many views the receiver keeps.
func (r *Receiver) Depth() int { return len(r.ring) }

// EnableZstd lets the receiver decode compressed datagrams, with the
// dictionary the server uses (nil for none); see codec.Decompressor.
func (r *Receiver) EnableZstd(dict []byte) error { return r.dec.Enable(dict) }

// SetOwnerID changes the client's owner id (assigned at connect).
func (r *Receiver) SetOwnerID(me uint8) { r.me = me }

// Reset forgets every view and ack (after a reconnect).
func (r *Receiver) Reset() {
	for i := range r.ring {
		r.ring[i].valid = false
		r.meta[i] = viewMeta{}
	}
	r.newest, r.mask, r.latest = 0, 0, 0
}

// Newest returns the newest tick decoded (0: none).
func (r *Receiver) Newest() uint32 { return r.newest }

// ackGrace is how many Acks a view that lacks some of its datagrams is held
// back from, so that datagrams of a tick spread by jitter are merged, not
// left to arrive after their view was sealed.
const ackGrace = 2

// wire.Ack returns the acknowledgement to send — the newest tick it reports, a
// mask of the 32 before it, and the parts held of any tick that lacks some
// — and seals every view it names: from now on their content is final (see
// [Receiver]). A view that lacks datagrams is left out of the first ackGrace
// Acks after it was decoded (its missing datagrams may be on their way), then
// reported with what it holds.
func (r *Receiver) Ack() wire.Ack {
	var a wire.Ack
	if r.newest == 0 {
		return a
	}
	depth := uint32(len(r.ring))
	var report [wire.AckWindow]bool
	for i := uint32(0); i < wire.AckWindow; i++ {
		if i > 0 && r.mask>>(i-1)&1 == 0 {
			continue
		}
		t := r.newest - i
		if r.exact(t) == nil {
			continue // overwritten in a ring shorter than the window
		}
		m := &r.meta[t%depth]
		if !m.sealed && m.parts != 1<<m.count-1 && m.held < ackGrace {
			m.held++
			continue
		}
		report[i] = true
	}
	for i := uint32(0); i < wire.AckWindow; i++ {
		if !report[i] {
			continue
		}
		t := r.newest - i
		if a.Newest == 0 {
			a.Newest = t
		} else {
			a.Mask |= 1 << (a.Newest - t - 1)
		}
		m := &r.meta[t%depth]
		m.sealed = true
		if all := uint64(1)<<m.count - 1; m.parts != all {
			j := a.Newest - t
			a.Partial |= 1 << j
			a.Parts[j], a.PartCount[j] = m.parts, uint8(m.count)
		}
	}
	return a
}

// Parts returns how many datagrams of tick the receiver decoded (including
// those that came after the view was sealed) and how many the tick was sent
// in; 0, 0 if it holds no view of tick.
func (r *Receiver) Parts(tick uint32) (got, count int) {
	if r.exact(tick) == nil {
		return 0, 0
	}
	m := &r.meta[tick%uint32(len(r.ring))]
	return bits.OnesCount64(m.parts | m.late), m.count
}

// Latest returns the view of the newest decoded tick (nil before the
// first). entity.Entries are sorted by slot; do not modify it.
func (r *Receiver) Latest() *View { return r.View(r.latest) }

// View returns the decoded view of tick, or nil: everything the client knows
// of that tick, including parts that arrived after the view was sealed.
func (r *Receiver) View(tick uint32) *View {
	f := r.exact(tick)
	if f == nil {
		return nil
	}
	i := tick % uint32(len(r.ring))
	if r.meta[i].late != 0 {
		return &r.shown[i]
	}
	return f
}

// Exact returns the view of tick that later datagrams are decoded against
// (the one an Ack reports: without parts that arrived after it was
// sealed), or nil.
func (r *Receiver) Exact(tick uint32) *View { return r.exact(tick) }

// exact is Exact.
func (r *Receiver) exact(tick uint32) *View {
	if tick == 0 {
		return nil
	}
	f := &r.ring[tick%uint32(len(r.ring))]
	if !f.valid || f.Tick != tick {
		return nil
	}
	return f
}

// View is what a client holds of the server's world at one tick: the full
// quantized state of its relevant entities, decoded from snapshot datagrams
// on top of their baselines.
type View struct {
	Tick uint32
	entity.Entries
	// Srcs is, per entry, the tick of the datagram whose record last set the
	// entry's state along the baseline chain: the client applies an entry to
	// its mirror only when Srcs is newer than what it applied.
	Srcs []uint32
	// InputAck (when HasInputAck) is the newest input tick the server had
	// applied for this client when it sent the view.
	InputAck    uint32
	HasInputAck bool
	// InputHeld and InputDepth (when HasInputFeedback) are the server's
	// input feedback for this client (see BuildOptions.InputHeld).
	InputHeld        uint32
	InputDepth       int
	HasInputFeedback bool

	coding wire.Coding // the residual coding of the view's tick
	valid  bool
}

// Find returns the entry index of slot, or −1. O(log n).
func (f *View) Find(slot uint32) int {
	i := sort.Search(len(f.Slots), func(i int) bool { return f.Slots[i] >= slot })
	if i < len(f.Slots) && f.Slots[i] == slot {
		return i
	}
	return -1
}

// poseMasks is the predicted field masks of a record of one pose component
// (set, in r.poses): codec.ChangedGroups from lanes2 to base, without
// owner-only groups for others than the owner.
func (r *Receiver) poseMasks(set uint64, lanes2, base []uint64, owner bool) uint64 {
	gm := codec.PoseGroups(lanes2, base)
	if !owner {
		gm &^= r.ownerOnly[bits.TrailingZeros64(set)]
	}
	return gm
}

// reserve makes room in f, which is empty, for a view the size of v and
// an eighth more, unless it has room for v already: a view that grows (a
// join) is then allocated once per growth, not grown while filled (each
// growth a copy of what it holds). Sizes come from v, a view held, never
// from a datagram.
func (f *View) reserve(v *View) {
	n := len(v.Slots)
	f.Slots, f.Metas, f.Offs, f.Srcs = room(f.Slots, n), room(f.Metas, n), room(f.Offs, n), room(f.Srcs, n)
	f.Lanes = room(f.Lanes, len(v.Lanes))
}

// room returns s, empty, or a new empty slice with room for n and an eighth
// more if s has not room for n.
func room[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, 0, n+n/8)
	}
	return s[:0]
}

// seek is Find for slots asked in increasing order (a datagram's records):
// the entries before *at are below slot, and *at moves to the first entry
// at or above it. A few entries are stepped over one by one (the records
// of a datagram are usually close in the view), the rest found by binary
// search.
func (f *View) seek(slot uint32, at *int) int {
	i, n := *at, len(f.Slots)
	for k := 0; k < 8 && i < n && f.Slots[i] < slot; k++ {
		i++
	}
	if i < n && f.Slots[i] < slot {
		i += sort.Search(n-i, func(j int) bool { return f.Slots[i+j] >= slot })
	}
	*at = i
	if i < n && f.Slots[i] == slot {
		return i
	}
	return -1
}

// Decode decodes a snapshot datagram on top of the baseline it names and
// stores the result in its tick's view. It returns the datagram's tick.
// Errors leave the receiver unchanged: [ErrMissingBaseline], [ErrDuplicate],
// [ErrTooOld], truncated or corrupt input (wrapping [wire.ErrCorrupt],
// schema.wire.ErrCorrupt or bitio.ErrShortBuffer). Never panics, whatever the
// bytes.
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
	rd := &r.rd // a field: a local would escape through the merger
	h, err := r.open(b, rd)
	if err != nil {
		return h.Tick, err
	}
	p, err := r.place(&h)
	if err != nil {
		return h.Tick, err
	}
	S, m := h.Tick, &r.meta[p.idx]
	// Records apply to the baseline view for a tick's first part, else to
	// the tick's view (or, once sealed, to what is shown of it).
	from, into := p.base, &r.ring[p.idx]
	switch {
	case p.cur == nil:
	case !m.sealed:
		from = p.cur
	default:
		from, into = p.cur, &r.shown[p.idx]
		if m.late != 0 {
			from = into
		}
	}
	out := &r.spare
	out.valid = false
	mg := merger{r: r, rd: rd, base: from, base2: p.base2, base3: p.base3, out: out, S: S, baseTick: p.B, cod: p.coding}
	if from == into && !r.copyParts {
		// A later part of a tick: its records are read aside, then written
		// over the entries they change in place, unless they add or remove
		// entities (then merged with the view into a new one). A tick sent
		// in several datagrams is copied once, not once per datagram.
		mg.inPlace, mg.out = true, &r.stage
	}
	if err := mg.merge(h.Count, uint(h.GapOrder)); err != nil {
		return S, err
	}
	if mg.inPlace {
		if mg.layout {
			if err := mg.combine(out); err != nil {
				return S, err
			}
			r.combinedN++
		} else {
			mg.apply(into)
			out = into
			r.inPlaceN++
		}
	}
	r.Records += uint64(h.Count)
	out.Tick = S
	out.coding = p.coding
	out.InputAck, out.HasInputAck = p.inputAck, h.HasInputAck
	out.InputHeld, out.InputDepth, out.HasInputFeedback = p.inputAck+uint32(h.InputLead), int(h.InputDepth), h.HasInputFeedback
	out.valid = true
	if out != into {
		*into, r.spare = *out, *into
		r.spare.valid = false
	}
	bit := uint64(1) << h.Part
	switch {
	case p.cur == nil:
		*m = viewMeta{parts: bit, count: h.Parts, base: p.B, base2: p.B2}
	case !m.sealed:
		m.parts |= bit
	default:
		m.late |= bit
		r.Late++
	}
	r.noteDecoded(S)
	return S, nil
}

// open checks a datagram's kind, decompresses it if it says so and reads
// its header, leaving rd at the first record.
func (r *Receiver) open(b []byte, rd *bitio.Reader) (wire.Header, error) {
	if len(b) < 1 || b[0]&^(wire.FlagCompressed|wire.FlagMessages) != wire.KindSnapshot {
		return wire.Header{}, ErrNotSnapshot // (the caller took a message section off: wire.SplitSection)
	}
	body := b[1:]
	if b[0]&wire.FlagCompressed != 0 {
		d, err := r.dec.Decompress(b[1:])
		if err != nil {
			return wire.Header{}, err
		}
		body = d
	}
	rd.Reset(body)
	return wire.ReadHeader(rd)
}

// placement is where a datagram's records go: its tick's ring entry, the
// views they are coded against, and the input ack they carry.
type placement struct {
	idx         uint32
	cur         *View // the tick's view if a part of it was decoded
	B, B2       uint32
	base, base2 *View
	base3       *View // the quadratic extrapolation's third view (nil: linear)
	inputAck    uint32
	coding      wire.Coding
}

// place checks a parsed header against the ring and finds the views it
// names.
func (r *Receiver) place(h *wire.Header) (placement, error) {
	var p placement
	S := h.Tick
	depth := uint32(len(r.ring))
	if h.Baseline >= depth || (h.Predict && uint64(h.Baseline)+uint64(h.PredictGap)+1 >= uint64(depth)) ||
		(h.Quad && uint64(h.Baseline)+2*(uint64(h.PredictGap)+1) >= uint64(depth)) {
		return p, fmt.Errorf("%w: tick %d names a view %d ticks back, beyond the ring", wire.ErrCorrupt, S, h.Baseline+h.PredictGap+1)
	}
	if r.newest != 0 && int32(r.newest-S) >= int32(depth) {
		return p, ErrTooOld
	}
	if h.Baseline != 0 {
		p.B = S - h.Baseline
		if h.Predict {
			p.B2 = p.B - h.PredictGap - 1
		}
	}
	p.idx = S % depth
	p.cur = r.exact(S)
	if m := &r.meta[p.idx]; p.cur != nil {
		if (m.parts|m.late)&(1<<h.Part) != 0 {
			return p, ErrDuplicate
		}
		if m.count != h.Parts || m.base != p.B || m.base2 != p.B2 {
			return p, fmt.Errorf("%w: part %d of tick %d disagrees with the tick's other parts", wire.ErrCorrupt, h.Part, S)
		}
	}
	if p.B != 0 {
		if p.base = r.exact(p.B); p.base == nil {
			return p, ErrMissingBaseline
		}
		if p.B2 != 0 {
			if p.base2 = r.exact(p.B2); p.base2 == nil {
				return p, ErrMissingBaseline
			}
		}
		if h.Quad {
			if p.base3 = r.exact(p.B2 - (p.B - p.B2)); p.base3 == nil {
				return p, ErrMissingBaseline
			}
		}
	}
	p.coding = h.Coding
	if h.CodingInherited {
		p.coding = p.base.coding
	}
	if p.cur != nil && p.cur.coding != p.coding {
		return p, fmt.Errorf("%w: part %d of tick %d disagrees with the tick's other parts", wire.ErrCorrupt, h.Part, S)
	}
	p.inputAck = h.InputAck
	if h.InputAckRelative {
		if p.base == nil || !p.base.HasInputAck {
			return p, fmt.Errorf("%w: input ack relative to a baseline without one", wire.ErrCorrupt)
		}
		p.inputAck += p.base.InputAck
	}
	return p, nil
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
	case S != r.newest:
		back := r.newest - S // ≥ 1
		if back <= 32 {
			r.mask |= 1 << (back - 1)
		}
	}
	if r.latest == 0 || int32(S-r.latest) > 0 {
		r.latest = S
	}
}

// merge writes into mg.out the view mg.base (nil: empty) with count
// records from mg.rd applied (gap order k). Deltas are against base's
// values; predicted ones against the extrapolation of base's values through
// base2, as they were at tick baseTick (base may be a view of tick S
// itself, for a tick's later parts). With inPlace, mg.out gets the records
// alone, for apply or combine.
func (mg *merger) merge(count int, k uint) error {
	r, out := mg.r, mg.out
	out.Reset()
	out.Srcs = out.Srcs[:0]
	mg.prev, mg.run = -1, codec.NewMaskRun()
	r.stageAt, r.removed = r.stageAt[:0], r.removed[:0]
	if mg.base != nil {
		mg.nb = len(mg.base.Slots)
		if !mg.inPlace {
			out.reserve(mg.base)
		}
	}
	for n := 0; n < count; n++ {
		if err := mg.record(k); err != nil {
			return err
		}
		if len(out.Slots) > r.MaxEntities {
			return ErrTooManyEntities
		}
	}
	mg.copyBaseUpTo(entity.MaxSlots)
	if len(out.Slots) > r.MaxEntities {
		return ErrTooManyEntities
	}
	return mg.rd.Err()
}

// apply writes the records read aside (inPlace, without layout changes)
// over the entries of view v they change.
func (mg *merger) apply(v *View) {
	st := mg.out
	for j, at := range mg.r.stageAt {
		copy(v.EntityLanes(int(at)), st.EntityLanes(j))
		v.Srcs[at] = st.Srcs[j]
	}
}

// combine writes into out the view mg.base with the records read aside
// (inPlace) applied: its entries in slot order, each replaced by its record,
// removed, or kept, and the new entities among them.
func (mg *merger) combine(out *View) error {
	r, base, st := mg.r, mg.base, mg.out
	out.Reset()
	out.Srcs = out.Srcs[:0]
	out.reserve(base)
	add := func(v *View, i int) {
		out.Slots = append(out.Slots, v.Slots[i])
		out.Metas = append(out.Metas, v.Metas[i])
		out.Offs = append(out.Offs, uint32(len(out.Lanes)))
		out.Lanes = append(out.Lanes, v.EntityLanes(i)...)
		out.Srcs = append(out.Srcs, v.Srcs[i])
	}
	j, ri := 0, 0
	for i := range mg.nb {
		s := base.Slots[i]
		for ; j < len(st.Slots) && st.Slots[j] < s; j++ {
			add(st, j)
		}
		switch {
		case j < len(st.Slots) && st.Slots[j] == s:
			add(st, j)
			j++
		case ri < len(r.removed) && int(r.removed[ri]) == i:
			ri++
		default:
			add(base, i)
		}
		if len(out.Slots) > r.MaxEntities {
			return ErrTooManyEntities
		}
	}
	for ; j < len(st.Slots); j++ {
		add(st, j)
	}
	if len(out.Slots) > r.MaxEntities {
		return ErrTooManyEntities
	}
	return nil
}

// merger is the state of one merge: the baseline view walked in slot order
// alongside the datagram's records.
type merger struct {
	r           *Receiver
	rd          *bitio.Reader
	base, base2 *View
	base3       *View // nil: linear extrapolation
	out         *View
	S, baseTick uint32
	bi, nb      int   // next baseline entry, baseline length
	at2, at3    int   // seek's places in base2 and base3
	prev        int64 // previous record's slot
	run         codec.MaskRun
	cod         wire.Coding // the datagram's residual coding (a copy: merger escapes)
	// inPlace: out is the receiver's stage, which gets the records only
	// (their entries in base in r.stageAt, removals in r.removed), not
	// base's other entries; layout: a record adds or removes an entity or
	// changes an entity's Meta.
	inPlace, layout bool
}

// copyBaseUpTo copies the baseline's entries below slot to the output
// (inPlace: passes over them).
func (mg *merger) copyBaseUpTo(slot uint32) {
	base, out := mg.base, mg.out
	if mg.inPlace {
		for mg.bi < mg.nb && base.Slots[mg.bi] < slot {
			mg.bi++
		}
		return
	}
	for ; mg.bi < mg.nb && base.Slots[mg.bi] < slot; mg.bi++ {
		i := mg.bi
		out.Slots = append(out.Slots, base.Slots[i])
		out.Metas = append(out.Metas, base.Metas[i])
		out.Offs = append(out.Offs, uint32(len(out.Lanes)))
		out.Lanes = append(out.Lanes, base.EntityLanes(i)...)
		out.Srcs = append(out.Srcs, base.Srcs[i])
	}
}

// record reads and applies one record: its slot gap (exp-Golomb of order
// k), its kind and body.
func (mg *merger) record(k uint) error {
	rd := mg.rd
	gap := rd.ReadExpGolomb(k)
	if err := rd.Err(); err != nil {
		return err
	}
	slot64 := mg.prev + 1 + int64(gap)
	if gap >= entity.MaxSlots || slot64 >= entity.MaxSlots {
		return fmt.Errorf("%w: slot out of range", wire.ErrCorrupt)
	}
	slot := uint32(slot64)
	mg.prev = slot64
	mg.copyBaseUpTo(slot)
	inBase := mg.bi < mg.nb && mg.base.Slots[mg.bi] == slot
	if !inBase {
		if mg.inPlace {
			mg.layout = true
		}
		return mg.full(slot)
	}
	// The kind code: the number of zeros before the first one, at most 4.
	z := 0
	for z < 4 && rd.ReadBits(1) == 0 {
		z++
	}
	if err := rd.Err(); err != nil {
		return err
	}
	at := mg.bi
	mg.bi++
	if mg.inPlace {
		return mg.recordAside(slot, at, z)
	}
	switch z {
	case 4: // removal
		return nil
	case 3: // full
		return mg.full(slot)
	default: // delta: 0 predicted masks, 1 repeated, 2 given
		return mg.delta(slot, at, z)
	}
}

// recordAside is record's end for a record of base's entry at (kind code
// z) when inPlace: it notes the entry the record changes or removes.
func (mg *merger) recordAside(slot uint32, at, z int) error {
	r := mg.r
	switch z {
	case 4: // removal
		mg.layout = true
		r.removed = append(r.removed, int32(at))
		return nil
	case 3: // full
		r.stageAt = append(r.stageAt, int32(at))
		err := mg.full(slot)
		if out := mg.out; err == nil && out.Metas[len(out.Metas)-1] != mg.base.Metas[at] {
			mg.layout = true
		}
		return err
	default:
		r.stageAt = append(r.stageAt, int32(at))
		return mg.delta(slot, at, z)
	}
}

// emit appends an entry whose lanes start at start in the output.
func (mg *merger) emit(slot uint32, m entity.Meta, start int) {
	out := mg.out
	out.Slots = append(out.Slots, slot)
	out.Metas = append(out.Metas, m)
	out.Offs = append(out.Offs, uint32(start))
	out.Srcs = append(out.Srcs, mg.S)
}

// full reads a full record for slot.
func (mg *merger) full(slot uint32) error {
	r, out := mg.r, mg.out
	start := len(out.Lanes)
	m, lanes, err := codec.ReadFull(mg.rd, r.plans, r.me, out.Lanes)
	out.Lanes = lanes
	if err != nil {
		return err
	}
	mg.emit(slot, m, start)
	return nil
}

// delta reads a delta record for slot, the baseline's entry bi, whose
// field masks are predicted (maskCode 0), repeated (1) or given (2).
func (mg *merger) delta(slot uint32, bi, maskCode int) error {
	r, rd, base := mg.r, mg.rd, mg.base
	m := base.Metas[bi]
	owner := r.me != 0 && m.Owner == r.me
	baseLanes := base.EntityLanes(bi)
	var lanes2, lanes3 []uint64 // the entity's values in views base2 and base3, if predicted
	if mg.base2 != nil {
		if i2 := mg.base2.seek(slot, &mg.at2); i2 >= 0 && mg.base2.Metas[i2] == m {
			lanes2 = mg.base2.EntityLanes(i2)
			if mg.base3 != nil {
				if i3 := mg.base3.seek(slot, &mg.at3); i3 >= 0 && mg.base3.Metas[i3] == m {
					lanes3 = mg.base3.EntityLanes(i3)
				}
			}
		}
	}
	if err := mg.masks(slot, m, owner, maskCode, baseLanes, lanes2); err != nil {
		return err
	}
	out := mg.out
	start := len(out.Lanes)
	if m.Set&(m.Set-1) == 0 && m.Set&r.poses != 0 {
		// One pose: prediction and residuals in one pass.
		out.Lanes = append(out.Lanes, baseLanes...)
		v := codec.Views{Base: baseLanes, Prev: lanes2, Third: lanes3}
		x := codec.Extrap{Num: int64(mg.S - mg.baseTick)}
		if lanes2 != nil {
			x.Den = int64(mg.baseTick - mg.base2.Tick)
		}
		p := r.plans[bits.TrailingZeros64(m.Set)]
		if err := codec.ReadPoseBody(rd, p, r.masks[0], &v, x, &mg.cod, out.Lanes[start:]); err != nil {
			return err
		}
		mg.emit(slot, m, start)
		return nil
	}
	sh := codec.Shape{Set: m.Set, Masks: r.masks[:bits.OnesCount64(m.Set)]}
	pred := codec.LanePred{Lanes: baseLanes, Orders: append(r.orders[:0], make([]uint8, len(baseLanes))...)}
	r.orders = pred.Orders
	if lanes2 != nil {
		// Residuals against the extrapolation through view base2.
		r.pred = append(r.pred[:0], baseLanes...)
		pred.Lanes = r.pred
		x := codec.Extrap{Num: int64(mg.S - mg.baseTick), Den: int64(mg.baseTick - mg.base2.Tick)}
		codec.Predict(r.plans, &sh, &codec.Views{Base: baseLanes, Prev: lanes2, Third: lanes3}, x, &mg.cod, &pred)
	} else {
		codec.PlainOrders(r.plans, m.Set, &mg.cod, r.orders)
	}
	out.Lanes = append(out.Lanes, baseLanes...)
	if err := codec.ReadDeltaBody(rd, r.plans, &sh, out.Lanes[start:], &pred); err != nil {
		return err
	}
	mg.emit(slot, m, start)
	return nil
}

// masks reads a delta record's field masks into r.masks: predicted (code
// 0, for a record predicted from lanes2: the groups that changed from
// lanes2 to base), a repeat of the previous record's (1), or given (2).
func (mg *merger) masks(slot uint32, m entity.Meta, owner bool, code int, base, lanes2 []uint64) error {
	r, rd := mg.r, mg.rd
	if code == 0 {
		if lanes2 == nil {
			return fmt.Errorf("%w: predicted field masks for unpredicted slot %d", wire.ErrCorrupt, slot)
		}
		if m.Set&(m.Set-1) == 0 && m.Set&r.poses != 0 {
			r.masks[0] = r.poseMasks(m.Set, lanes2, base, owner)
			return rd.Err()
		}
		off, ci := 0, 0
		for s := m.Set; s != 0; s &= s - 1 {
			p := r.plans[bits.TrailingZeros64(s)]
			n := p.NumLanes()
			r.masks[ci] = codec.ChangedGroups(p, lanes2[off:off+n], base[off:off+n], owner)
			off += n
			ci++
		}
		return rd.Err()
	}
	if code == 2 {
		mg.run.Note(codec.ReadMasks(rd, r.plans, m.Set, owner, &r.masks))
		return rd.Err()
	}
	if mg.run.Bits < 0 {
		return fmt.Errorf("%w: repeated field mask without a previous one", wire.ErrCorrupt)
	}
	mr := &r.maskReader
	for i := range r.maskBuf {
		r.maskBuf[i] = byte(mg.run.Mask >> (8 * i))
	}
	mr.Reset(r.maskBuf[:(mg.run.Bits+7)/8])
	_, nb := codec.ReadMasks(mr, r.plans, m.Set, owner, &r.masks)
	if mr.Err() != nil || nb != mg.run.Bits {
		return fmt.Errorf("%w: repeated field mask does not fit slot %d", wire.ErrCorrupt, slot)
	}
	return rd.Err()
}
