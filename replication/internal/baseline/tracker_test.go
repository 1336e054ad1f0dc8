package baseline

import (
	"reflect"
	"testing"

	"github.com/archenet/archenet/replication/internal/entity"
	"github.com/archenet/archenet/replication/internal/store"
	"github.com/archenet/archenet/replication/internal/wire"
	"github.com/archenet/archenet/replication/schema"
	"github.com/stretchr/testify/require"
)

// TestViewStaysCompact: a Build reads the views around its client's
// baseline; at 32 bytes without pointers two share a cache line, and the
// GC does not scan them. Lists go in viewLists.
func TestViewStaysCompact(t *testing.T) {
	typ := reflect.TypeFor[View]()
	if typ.Size() > 32 {
		t.Errorf("View is %d bytes, want at most 32", typ.Size())
	}
	for f := range typ.Fields() {
		switch f.Type.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Map, reflect.String, reflect.Interface, reflect.Func, reflect.Chan:
			t.Errorf("View.%s is a %v: views hold no pointers", f.Name, f.Type.Kind())
		}
	}
}

// record makes the view of tick from base as a Build does: members
// sharing base's set, then set one by one, with the records of its parts.
func record(tr *Tracker, tick uint32, base *View, parts uint8, recs []Rec) *View {
	v := tr.Begin(tick)
	if base != nil {
		v.Base = base.Tick
	}
	v.Parts = parts
	tr.ShareMembers(v, base)
	for _, r := range recs {
		if parts > 1 {
			tr.AddRec(v, r)
		}
		tr.SetMember(v, r.Slot, r.Kind != 2)
	}
	return v
}

// An ack turns views into baselines; a partial ack undoes the records of
// the parts it lacks (an entity the client held keeps its older value, one
// it did not is absent); acks of ticks never sent, a second ack of the same
// tick and an ack of a one-part tick that lost its part change nothing.
func TestTrackerAcks(t *testing.T) {
	tr := NewTracker(1, 8)
	v1 := record(tr, 1, nil, 1, []Rec{{Slot: 3}, {Slot: 70}})
	require.Nil(t, tr.Baseline(2, nil), "nothing acked yet")
	require.Equal(t, uint64(1), tr.Ack(&wire.Ack{Newest: 1}))
	require.Equal(t, uint64(0), tr.Ack(&wire.Ack{Newest: 1}), "acked before")
	require.Equal(t, v1, tr.AckedAt(1))
	require.Equal(t, entity.Bitset{1 << 3, 1 << 6}, tr.Members(v1))

	// Tick 2 in two parts: part 0 moves slot 3 (held at tick 1), part 1
	// spawns slot 9 and removes slot 70.
	v2 := record(tr, 2, v1, 2, []Rec{{Slot: 3, Src: 1, Part: 0, Mem: true}, {Slot: 9, Part: 1, Kind: 1}, {Slot: 70, Src: 1, Part: 1, Kind: 2, Mem: true}})
	require.Equal(t, entity.Bitset{1<<3 | 1<<9, 0}, tr.Members(v2))
	require.Equal(t, entity.Bitset{1 << 3, 1 << 6}, tr.Members(v1), "copied on write")
	a := wire.Ack{Newest: 2, Mask: 1, Partial: 1, PartCount: [wire.AckWindow]uint8{2}, Parts: [wire.AckWindow]uint64{0b01}}
	tr.Ack(&a)
	require.Equal(t, uint64(1), tr.AckedPartial)
	require.Equal(t, entity.Bitset{1 << 3, 1 << 6}, tr.Members(v2), "the spawn of part 1 undone, the removal too")
	require.Equal(t, []Behind{{Slot: 70, Src: 1}}, tr.Behind(v2), "slot 70 keeps its tick-1 value")

	// A one-part tick whose part did not arrive is no baseline.
	record(tr, 3, v2, 1, []Rec{{Slot: 4, Kind: 1}})
	lost := wire.Ack{Newest: 3, Partial: 1, PartCount: [wire.AckWindow]uint8{1}}
	tr.Ack(&lost)
	require.Nil(t, tr.AckedAt(3))
	require.Equal(t, uint32(3), tr.NewestAck)
	tr.Ack(&wire.Ack{Newest: 7, Mask: 0xff}) // never sent
	require.Nil(t, tr.AckedAt(7))
	require.Equal(t, uint64(2), tr.Acked)

	// Clone is independent.
	c := tr.Clone()
	c.SetMember(c.At(2), 50, true)
	require.False(t, tr.Members(tr.At(2)).Has(50))
	require.True(t, c.Members(c.At(2)).Has(50))

	tr.Reset()
	require.Nil(t, tr.At(2))
	require.Zero(t, tr.NewestAck)
}

// The accumulators merge in slot order: taken, kept, installed.
func TestTrackerAccumulators(t *testing.T) {
	tr := NewTracker(0, 0)
	m := tr.StartAcc()
	require.False(t, m.Pending())
	m.Keep(4, 1)
	m.Keep(9, 2)
	m.Finish(tr)
	require.Equal(t, []AccEntry{{4, 1}, {9, 2}}, tr.Acc())
	m = tr.StartAcc()
	require.True(t, m.Pending())
	require.Equal(t, float32(0), m.Take(1))
	require.Equal(t, float32(2), m.Take(9))
	m.Keep(9, 3.5)
	m.Finish(tr)
	require.Equal(t, []AccEntry{{9, 3.5}}, tr.Acc())
}

// A thin view is the baseline only when no other acked view is left with
// its frame in the ring; a new view of its tick is not thin.
func TestBaselineSkipsThin(t *testing.T) {
	reg := schema.NewRegistry()
	schema.MustRegister[thinPos](reg)
	r := store.New(reg, 8)
	for tick := uint32(1); tick <= 4; tick++ {
		r.Begin(tick)
		r.Commit()
	}
	tr := NewTracker(1, 8)
	v1 := record(tr, 1, nil, 1, []Rec{{Slot: 3}})
	v2 := record(tr, 2, nil, 1, nil)
	tr.SetThin(v2)
	tr.Ack(&wire.Ack{Newest: 1})
	tr.Ack(&wire.Ack{Newest: 2, Mask: 1})
	require.Equal(t, v1, tr.Baseline(5, r), "the older view that is not thin")
	v3 := record(tr, 3, v1, 1, nil)
	tr.SetThin(v3)
	tr.Ack(&wire.Ack{Newest: 3, Mask: 3})
	require.Equal(t, v1, tr.Baseline(5, r))
	for tick := uint32(5); tick <= 9; tick++ { // tick 1 leaves the ring
		r.Begin(tick)
		r.Commit()
	}
	require.Equal(t, v3, tr.Baseline(10, r), "only thin views left: the newest")
	v4 := record(tr, 4, v3, 1, nil)
	tr.Ack(&wire.Ack{Newest: 4, Mask: 7})
	require.Equal(t, v4, tr.Baseline(10, r), "the newest, not thin")
	for tick := uint32(10); tick <= 11; tick++ {
		r.Begin(tick)
		r.Commit()
	}
	v11 := record(tr, 11, v4, 1, nil) // (in the thin view 3's place)
	tr.Ack(&wire.Ack{Newest: 11})
	require.Equal(t, v11, tr.Baseline(12, r), "a new view in a thin one's place is not thin")
}

// thinPos is a component for a ring without entities.
type thinPos struct{ N int32 }

// TestDropSpareRecsWaits: the spare record lists go only after spareHold
// ticks of one datagram in a row; a tick of several starts the wait again.
func TestDropSpareRecsWaits(t *testing.T) {
	tr := NewTracker(1, 0)
	tr.recsPool = [][]Rec{make([]Rec, 0, 8), make([]Rec, 0, 8), make([]Rec, 0, 8)}
	for range spareHold {
		tr.DropSpareRecs()
	}
	require.Len(t, tr.recsPool, 3, "a client taking turns between one datagram and several keeps its lists")
	tr.DropSpareRecs()
	require.Len(t, tr.recsPool, 2)
	require.NotNil(t, tr.takeRecs()) // a tick of several datagrams
	for range spareHold {
		tr.DropSpareRecs()
	}
	require.Len(t, tr.recsPool, 1)
	tr.DropSpareRecs()
	require.Empty(t, tr.recsPool)
}
