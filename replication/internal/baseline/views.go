package baseline

import "github.com/archenet/archenet/replication/internal/entity"

// The views a Build records: Begin empties the view of the tick, which
// takes the baseline's members (ShareMembers) and then changes them record
// by record (SetMember), with the records each datagram carried (AddRec)
// and the entries the budget deferred (AddBehind).

// spareSets is how many unused member sets keep their arrays for reuse.
const spareSets = 2

// spareRecs is how many unused record lists a tracker keeps for reuse.
const spareRecs = 4

// memberSet is a set of entities one or more views hold.
type memberSet struct {
	bits entity.Bitset
	refs int32 // views holding it
}

// Begin returns the view of tick, emptied: no members, no deferred
// entries, no records; the caller sets its fields and fills it.
func (t *Tracker) Begin(tick uint32) *View {
	v := &t.views[tick%uint32(len(t.views))]
	t.releaseMembers(v)
	t.releaseRecs(v)
	if v.behindArr {
		// (an array a burst of deferrals grew is let go: shrunk)
		l := t.listsOf(v)
		l.behind = shrunk(l.behind)
		v.behindArr = l.behind != nil
	}
	v.hasBehind = false
	v.Tick = tick
	v.used = true
	v.acked = false
	v.thin = false
	return v
}

// ShareMembers makes v hold the member set of from (nil: none).
func (t *Tracker) ShareMembers(v, from *View) {
	t.releaseMembers(v)
	if from != nil && from.members >= 0 {
		v.members = from.members
		t.sets[v.members].refs++
	}
}

// releaseMembers lets go of v's member set.
func (t *Tracker) releaseMembers(v *View) {
	if v.members < 0 {
		return
	}
	s := &t.sets[v.members]
	if s.refs--; s.refs == 0 {
		if len(t.freeSets) >= spareSets {
			s.bits = nil // (a burst of distinct sets is over: not kept resident)
		}
		t.freeSets = append(t.freeSets, v.members)
	}
	v.members = -1
}

// SetMember adds slot to v's members (in) or takes it out, copying the
// set first if other views share it; a set it does not change is not
// copied.
func (t *Tracker) SetMember(v *View, slot uint32, in bool) {
	if t.Members(v).Has(slot) == in {
		return
	}
	t.ownSet(v, t.Members(v))
	if s := &t.sets[v.members]; in {
		s.bits.Set(slot)
	} else {
		s.bits.Clear(slot)
	}
}

// AddBehind appends a deferred entry to v's (in slot order).
func (t *Tracker) AddBehind(v *View, b Behind) {
	l := t.listsOf(v)
	if !v.hasBehind {
		l.behind = l.behind[:0]
	}
	l.behind = append(l.behind, b)
	v.hasBehind, v.behindArr = true, true
}

// AddRec appends a sent record to v's list (in slot order): a tick of
// several datagrams lists its records, for an ack naming only some of them.
func (t *Tracker) AddRec(v *View, r Rec) {
	l := t.listsOf(v)
	if !v.hasRecs {
		l.recs = t.takeRecs()
		v.hasRecs = true
	}
	l.recs = append(l.recs, r)
}

// releaseRecs gives v's per-datagram record list back to the tracker's
// pool: only views whose ack is still to come hold one.
func (t *Tracker) releaseRecs(v *View) {
	if !v.hasRecs {
		return
	}
	l := t.listsOf(v)
	if r := shrunk(l.recs); r != nil && len(t.recsPool) < spareRecs {
		t.recsPool = append(t.recsPool, r) // (a burst's long list is let go: shrunk)
	}
	l.recs = nil
	v.hasRecs = false
}

// DropSpareRecs lets one pooled record list go once the client's ticks
// have been one datagram each for a while (spareHold ticks): a tick of one
// datagram calls it, so that the lists of a burst of multi-datagram ticks
// do not stay resident, while a client whose ticks take turns between one
// datagram and several keeps them (no allocation per tick).
func (t *Tracker) DropSpareRecs() {
	if t.singles < spareHold {
		t.singles++
		return
	}
	if n := len(t.recsPool); n > 0 {
		t.recsPool[n-1] = nil
		t.recsPool = t.recsPool[:n-1]
	}
}

// spareHold is how many ticks of one datagram in a row keep the spare
// record lists (DropSpareRecs).
const spareHold = 32

// takeRecs returns a pooled record list, or nil (a tick of several
// datagrams: DropSpareRecs waits again).
func (t *Tracker) takeRecs() []Rec {
	t.singles = 0
	n := len(t.recsPool)
	if n == 0 {
		return nil
	}
	r := t.recsPool[n-1]
	t.recsPool[n-1] = nil
	t.recsPool = t.recsPool[:n-1]
	return r
}

// SetMembers makes v's members exactly bits (read, not kept): v keeps the
// set it holds (shared, say, by ShareMembers) when that is equal already,
// and takes a copy of bits otherwise. A Build that repeats another
// client's (encode's shared builds) sets the view's members at once.
func (t *Tracker) SetMembers(v *View, bits entity.Bitset) {
	if entity.Same(t.Members(v), bits) {
		return
	}
	t.ownSet(v, nil)
	s := &t.sets[v.members]
	s.bits = append(s.bits[:0], bits...)
}

// ownSet gives v a member set of its own (none other shares), holding from
// if it takes a new one; a set v alone holds is kept as it is.
func (t *Tracker) ownSet(v *View, from entity.Bitset) {
	if v.members >= 0 && t.sets[v.members].refs == 1 {
		return
	}
	var i int32
	if n := len(t.freeSets); n > 0 {
		i, t.freeSets = t.freeSets[n-1], t.freeSets[:n-1]
	} else {
		t.sets = append(t.sets, memberSet{})
		i = int32(len(t.sets) - 1)
	}
	s := &t.sets[i]
	s.bits = append(s.bits[:0], from...)
	s.refs = 1
	t.releaseMembers(v)
	v.members = i
}

// Recs returns the records v's datagrams carried (nil unless v was sent in
// more than one datagram and its ack is still to come), read-only.
func (t *Tracker) Recs(v *View) []Rec {
	if !v.hasRecs {
		return nil
	}
	return t.listsOf(v).recs
}

// SetRecs makes v's record list a copy of recs (AddRec for each).
func (t *Tracker) SetRecs(v *View, recs []Rec) {
	if len(recs) == 0 {
		t.releaseRecs(v)
		return
	}
	l := t.listsOf(v)
	if !v.hasRecs {
		l.recs = t.takeRecs()
		v.hasRecs = true
	}
	l.recs = append(l.recs[:0], recs...)
}
