package baseline

// AccEntry is the priority a deferred entity accumulated since it was last
// sent.
type AccEntry struct {
	Slot uint32
	Acc  float32
}

// Acc returns the priority each entity deferred last tick accumulated,
// sorted by slot (read-only).
func (t *Tracker) Acc() []AccEntry { return t.acc }

// AccMerge rebuilds a tracker's accumulators from the candidates of a
// tick, which come in slot order: Take returns a candidate's accumulated
// priority, Keep lists a candidate deferred again with its new one, Finish
// installs the new list.
type AccMerge struct {
	old, next []AccEntry
	j         int
}

// StartAcc starts the merge of the tick's accumulators.
func (t *Tracker) StartAcc() AccMerge { return AccMerge{old: t.acc, next: t.accNext[:0]} }

// Take returns slot's accumulated priority (0: none).
func (m *AccMerge) Take(slot uint32) float32 {
	for m.j < len(m.old) && m.old[m.j].Slot < slot {
		m.j++
	}
	if m.j < len(m.old) && m.old[m.j].Slot == slot {
		return m.old[m.j].Acc
	}
	return 0
}

// Keep gives slot the accumulated priority a.
func (m *AccMerge) Keep(slot uint32, a float32) {
	m.next = append(m.next, AccEntry{Slot: slot, Acc: a})
}

// Pending reports whether the tracker had accumulators to merge (a client
// that never had to defer has none, and need not Finish a tick without
// deferrals).
func (m *AccMerge) Pending() bool { return len(m.old) > 0 }

// Finish installs the new list in t. Lists grown by a burst of deferrals
// are let go once a tick needs far less.
func (m *AccMerge) Finish(t *Tracker) {
	if cap(m.old) > 512 && len(m.next) < cap(m.old)/8 {
		m.old = nil
	}
	if cap(m.next) > 512 && len(m.next) < cap(m.next)/8 {
		m.next = append([]AccEntry(nil), m.next...)
	}
	t.acc, t.accNext = m.next, m.old[:0]
}
