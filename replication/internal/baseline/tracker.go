package baseline

import (
	"unsafe"

	"github.com/archenet/archenet/replication/internal/entity"
	"github.com/archenet/archenet/replication/internal/store"
	"github.com/archenet/archenet/replication/internal/wire"
)

// Tracker is the server's record of what one client holds: the view it was
// sent at each tick (what it holds if that tick's datagrams arrive), which
// of those views it acknowledged (its baselines), and the priority its
// deferred entities accumulated. Not safe for concurrent use.
type Tracker struct {
	// ID is the client's owner id: owner-only fields of entities whose
	// Meta.Owner equals ID are sent to this client only. 0 = owns nothing.
	ID uint8

	views []View
	lists []viewLists // per View, at the same index
	// sets holds the views' member sets: views whose members are the same
	// share one (most ticks change no membership), copied when one of them
	// changes (SetMember). freeSets lists the unused ones.
	sets     []memberSet
	freeSets []int32
	// acc is the priority each entity deferred last tick accumulated
	// since it was last sent (sorted by slot); accNext the spare list the
	// next tick's is built in. An entity that stops being a candidate (it
	// left the client's interest unsent, or its value came back to the
	// client's) loses its accumulated priority.
	acc, accNext []AccEntry

	undoBuf, mergeBuf []Behind
	// recsPool holds the record lists of acked views for the next ones.
	recsPool [][]Rec
	// singles counts the ticks of one datagram since the last of several
	// (DropSpareRecs).
	singles uint8

	// bestAck is the newest tick whose View was acked (0 = none): the
	// baseline, while its View and frame are kept.
	bestAck uint32

	// cover is what Acks have named so far, bit i being tick coverNewest−i.
	cover       uint64
	coverNewest uint32

	// Counters.
	Sent, Acked uint64
	// AckedPartial counts acked ticks of which some datagrams were lost.
	AckedPartial uint64
	// NewestAck is the newest tick the client acknowledged (0 = none).
	NewestAck uint32

	// PredOff: prediction did not pay off in the client's recent ticks
	// (the encoder's to set and read).
	PredOff bool
}

// View is what a client holds after decoding the datagrams of one tick: the
// member entities, each at the newest frame's value except the "behind"
// ones, which hold the value of an older frame (deferred by the budget).
//
// A View is 32 bytes, with no pointer: a Build reads the few views around
// its baseline, two to a cache line. Its lists (viewLists) are apart, in
// Tracker.lists at the same index, read only when hasBehind or hasRecs says
// they hold something.
type View struct {
	Tick uint32
	Base uint32 // the baseline tick the View was built against (0 = none)
	// InputAck, if HasInputAck, is the input ack the View's datagram
	// carried: later datagrams built on this View send theirs relative to it.
	InputAck uint32
	members  int32       // its member set: an index of Tracker.sets (−1: none, empty)
	Coding   wire.Coding // the residual coding of the View's records
	// Parts is how many datagrams the tick was sent in (≤ wire.MaxParts).
	Parts       uint8
	used        bool
	acked       bool
	HasInputAck bool
	// hasBehind: the View has deferred entries (viewLists.behind);
	// behindArr: viewLists.behind keeps an array (for reuse); hasRecs: its
	// datagrams' records are listed (viewLists.recs)
	hasBehind, behindArr, hasRecs bool
	// thin: the View lacks entities that the client holds from an earlier,
	// unacked tick's full records and that changed since (SetThin).
	thin bool
}

// SetThin marks v as lacking entities that the client holds from an
// earlier tick's full records, still unacked when v was built, and that
// changed since (a recovery held in flight while it moves): coded against
// v, each would need a full record again, so Baseline takes v only when no
// other acked view is left.
func (t *Tracker) SetThin(v *View) { v.thin = true }

// Acked reports whether the client acknowledged the view (then its
// members are what the client holds of it).
func (v *View) Acked() bool { return v.acked }

// viewLists is what a View lists besides its scalars: its deferred
// entries, sorted by slot, and, for a tick sent in more than one datagram
// whose ack is still to come, which records each datagram carried (slot
// order): what an ack naming only some parts undoes. Empty lists keep
// their arrays for reuse.
type viewLists struct {
	behind []Behind
	recs   []Rec
}

// Behind is a deferred entry of a view: the client holds slot at the value
// of tick Src, older than the view's.
type Behind struct{ Slot, Src uint32 }

// Rec is one record of a view's datagrams.
type Rec struct {
	Slot, Src uint32 // Src: tick of the value the client held before (0: none)
	Part      uint8  // the datagram that carried it
	Kind      uint8  // codec.KindDelta, KindFull or KindRemoval
	Mem       bool   // the client held the entity before
}

// NewTracker returns the state of a client with owner id id, keeping depth
// views (0 = entity.DefaultDepth; use the ring's depth).
func NewTracker(id uint8, depth int) *Tracker {
	t := &Tracker{}
	t.Init(id, depth)
	return t
}

// Init makes t the state of a new client (as NewTracker), in place: a
// server keeps it inside its own per-client state.
func (t *Tracker) Init(id uint8, depth int) {
	if depth <= 0 {
		depth = entity.DefaultDepth
	}
	*t = Tracker{ID: id, views: make([]View, depth), lists: make([]viewLists, depth)}
	for i := range t.views {
		t.views[i].members = -1
	}
}

// Depth returns how many views the tracker keeps.
func (t *Tracker) Depth() int { return len(t.views) }

// Baseline returns the client's newest acked view older than tick S whose
// frame is still in r (nil if none): what S's datagrams are coded against.
// A thin view (SetThin) is taken only if no other acked view is left.
func (t *Tracker) Baseline(S uint32, r *store.Ring) *View {
	// The newest acked view, unless it is gone or thin (then the newest
	// left that is not).
	if v := &t.views[t.bestAck%uint32(len(t.views))]; t.bestAck != 0 && v.used && v.acked && !v.thin && v.Tick == t.bestAck && int32(S-v.Tick) > 0 && r.Frame(v.Tick) != nil {
		return v
	}
	var base, thin *View
	for i := range t.views {
		v := &t.views[i]
		if v.used && v.acked && v.Tick != S && int32(S-v.Tick) > 0 && r.Frame(v.Tick) != nil {
			switch {
			case v.thin:
				if thin == nil || int32(v.Tick-thin.Tick) > 0 {
					thin = v
				}
			case base == nil || int32(v.Tick-base.Tick) > 0:
				base = v
			}
		}
	}
	if base == nil {
		return thin
	}
	return base
}

// NewestAcked returns the newest view the client acked while the tracker
// still holds it, whether or not its frame is still in the ring (nil if
// none).
func (t *Tracker) NewestAcked() *View {
	if v := &t.views[t.bestAck%uint32(len(t.views))]; t.bestAck != 0 && v.used && v.acked && v.Tick == t.bestAck {
		return v
	}
	return nil
}

// At returns the view of tick (nil if the tracker no longer holds it).
func (t *Tracker) At(tick uint32) *View {
	if v := &t.views[tick%uint32(len(t.views))]; v.used && v.Tick == tick {
		return v
	}
	return nil
}

// AckedAt returns the view of tick if the client acked it (else nil).
func (t *Tracker) AckedAt(tick uint32) *View {
	if v := t.At(tick); v != nil && v.acked {
		return v
	}
	return nil
}

// Members returns the entities v holds (read-only: change them with
// SetMember).
func (t *Tracker) Members(v *View) entity.Bitset {
	if v.members < 0 {
		return nil
	}
	return t.sets[v.members].bits
}

// Behind returns v's deferred entries (nil: none), sorted by slot.
func (t *Tracker) Behind(v *View) []Behind {
	if !v.hasBehind {
		return nil
	}
	return t.listsOf(v).behind
}

// listsOf returns the lists of v, one of t.views.
func (t *Tracker) listsOf(v *View) *viewLists {
	i := (uintptr(unsafe.Pointer(v)) - uintptr(unsafe.Pointer(unsafe.SliceData(t.views)))) / unsafe.Sizeof(View{})
	return &t.lists[i]
}

// Reset forgets every view (after a reconnect the client starts empty).
func (t *Tracker) Reset() {
	for i := range t.views {
		t.views[i].used = false
		t.views[i].acked = false
		t.views[i].hasBehind = false
		t.releaseMembers(&t.views[i])
		t.releaseRecs(&t.views[i])
	}
	t.acc = t.acc[:0]
	t.NewestAck, t.bestAck = 0, 0
	t.cover, t.coverNewest = 0, 0
}

// MemoryBytes returns the bytes the tracker holds (capacities, not
// lengths): its views and their member sets, deferred entries and records,
// and its priority accumulators.
func (t *Tracker) MemoryBytes() int {
	n := int(unsafe.Sizeof(*t)) + (cap(t.acc)+cap(t.accNext))*int(unsafe.Sizeof(AccEntry{})) + (cap(t.undoBuf)+cap(t.mergeBuf))*int(unsafe.Sizeof(Behind{}))
	for i := range t.views {
		l := &t.lists[i]
		n += int(unsafe.Sizeof(t.views[i])) + int(unsafe.Sizeof(*l)) + cap(l.behind)*int(unsafe.Sizeof(Behind{})) + cap(l.recs)*int(unsafe.Sizeof(Rec{}))
	}
	for _, r := range t.recsPool {
		n += int(unsafe.Sizeof(r)) + cap(r)*int(unsafe.Sizeof(Rec{}))
	}
	for i := range t.sets {
		n += int(unsafe.Sizeof(t.sets[i])) + cap(t.sets[i].bits)*8
	}
	n += cap(t.freeSets) * 4
	return n
}

// shrunk empties s for reuse, letting its array go if its last use (its
// length) took less than an eighth of it: a burst (a client's first
// ticks, a spawn wave) does not stay resident in every view.
func shrunk[T any](s []T) []T {
	if cap(s) > 32 && len(s) < cap(s)/8 {
		return nil
	}
	return s[:0]
}

// Clone returns a deep copy of t (for a second client in the same state).
func (t *Tracker) Clone() *Tracker {
	c := *t
	c.views = append([]View(nil), t.views...)
	c.lists = make([]viewLists, len(t.lists))
	for i, l := range t.lists {
		c.lists[i] = viewLists{behind: append([]Behind(nil), l.behind...), recs: append([]Rec(nil), l.recs...)}
	}
	c.sets = make([]memberSet, len(t.sets))
	for i, s := range t.sets {
		c.sets[i] = memberSet{bits: append(entity.Bitset(nil), s.bits...), refs: s.refs}
	}
	c.freeSets = append([]int32(nil), t.freeSets...)
	c.acc = append([]AccEntry(nil), t.acc...)
	c.accNext = append([]AccEntry(nil), t.accNext...)
	c.undoBuf, c.mergeBuf = nil, nil
	c.recsPool = nil
	return &c
}
