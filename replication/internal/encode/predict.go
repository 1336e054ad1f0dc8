package encode

import (
	"sort"

	"github.com/archenet/archenet/replication/internal/baseline"
	"github.com/archenet/archenet/replication/internal/entity"
)

// predCtx is a Build's prediction context: the baseline view B and its own
// baseline B2 (both held by the client); [predCtx.key] finds the tick whose
// value the client's view B2 holds for an entity. With on, a delta record
// of an entity that view B2 holds with the same Meta is coded against the
// linear extrapolation through B2 and B; other delta records against B
// alone (the receiver tells them apart by its view B2).
type predCtx struct {
	on      bool
	B, B2   uint32
	members entity.Bitset
	behind  []baseline.Behind
	// B3 (0 = none) is the view as far before B2 as B2 is before B, when
	// the client acked it: positions may be extrapolated quadratically
	// through B3, B2 and B (quad).
	B3       uint32
	quad     bool
	members3 entity.Bitset
	behind3  []baseline.Behind
	// at2, at3: where the last lookups in behind and behind3 ended
	// (valueTickAt: a Build looks its candidates up in slot order)
	at2, at3 int
	// simple: neither view has deferred entries; keys: see setKeys.
	simple bool
	keys   [3]recKey
	tags   [3]uint64 // the keys' cache tags (recordCache.setTags)
}

// recKey is what a cached record's bytes depend on besides the entity's
// current value: the client's value tick and view of the entity.
type recKey struct {
	src     uint32 // baseline tick of the client's value (0 = none: full record)
	pb, pb2 uint32 // prediction views (baseline, its baseline); 0 = off
	src2    uint32 // value tick of the entity in view pb2 (0 = none)
	pb3     uint32 // third view (0 = none): extrapolated through with quad, else measured
	src3    uint32 // value tick of the entity in view pb3 (0 = none)
	quad    bool
	owner   bool
}

// key returns the record key of slot for a client whose value is from
// baseline tick src, with the Build's prediction context pc.
func (pc *predCtx) key(slot, src uint32, owner bool) recKey {
	if src == pc.B && !owner && pc.simple {
		// The common case, one of three keys setupPrediction made.
		if !pc.members.Has(slot) {
			return pc.keys[0]
		}
		if pc.B3 == 0 || !pc.members3.Has(slot) {
			return pc.keys[1]
		}
		return pc.keys[2]
	}
	return pc.slowKey(slot, src, owner)
}

func (pc *predCtx) slowKey(slot, src uint32, owner bool) recKey {
	k := recKey{src: src, owner: owner}
	if src == 0 || !pc.on {
		return k
	}
	k.pb, k.pb2 = pc.B, pc.B2
	if !pc.members.Has(slot) {
		return k // not in view B2: coded against B alone
	}
	k.src2 = valueTickAt(pc.B2, pc.behind, slot, &pc.at2)
	if pc.B3 != 0 && pc.members3.Has(slot) {
		k.pb3, k.quad = pc.B3, pc.quad
		k.src3 = valueTickAt(pc.B3, pc.behind3, slot, &pc.at3)
	}
	return k
}

// setKeys fills pc.keys for entities whose value is the baseline's, seen
// without owner-only fields, when no view has deferred entries.
func (pc *predCtx) setKeys(B uint32) {
	pc.B = B
	pc.simple = len(pc.behind) == 0 && len(pc.behind3) == 0
	pc.keys[0] = recKey{src: B}
	if pc.on {
		pc.keys[0].pb, pc.keys[0].pb2 = pc.B, pc.B2
	}
	pc.keys[1] = pc.keys[0]
	if pc.on {
		pc.keys[1].src2 = pc.B2
	}
	pc.keys[2] = pc.keys[1]
	if pc.on && pc.B3 != 0 {
		pc.keys[2].pb3, pc.keys[2].quad, pc.keys[2].src3 = pc.B3, pc.quad, pc.B3
	}
}

// setupPrediction decides whether this tick's deltas may be coded against the
// extrapolation through the baseline's own baseline (B2), which the client
// also holds as long as no newer tick can have replaced it in its ring.
func (e *Encoder) setupPrediction(t *baseline.Tracker, base *baseline.View, S uint32) {
	e.pc = predCtx{}
	// A client whose recent packets gained nothing from prediction (random
	// motion) gets it only on every 16th packet, as a probe.
	if base == nil || e.NoPrediction || base.Base == 0 || (t.PredOff && t.Sent%16 != 0) {
		return
	}
	B, B2 := base.Tick, base.Base
	// The extrapolation is through the baseline's own baseline, or a newer
	// view the client acked (exact, like the baseline) two to four ticks
	// before the baseline if there is one: a velocity from two ticks is
	// still smooth, and closer to the baseline's.
	for span := uint32(2); span <= 4; span++ {
		p := B - span
		if int32(p-B2) <= 0 {
			break
		}
		if t.AckedAt(p) != nil {
			B2 = p
			break
		}
	}
	depth := int32(t.Depth())
	if v2 := t.At(B2); v2 != nil && int32(B-B2) > 0 && int32(S-B2) < depth {
		e.pc = predCtx{on: true, B: B, B2: B2, members: t.Members(v2), behind: t.Behind(v2)}
		B3 := B2 - (B - B2)
		if v3 := t.AckedAt(B3); B3 != 0 && int32(B2-B3) > 0 && v3 != nil && int32(S-B3) < depth {
			_, quad := e.coder.Coding()
			e.pc.B3, e.pc.quad = B3, quad
			e.pc.members3, e.pc.behind3 = t.Members(v3), t.Behind(v3)
		}
	}
}

// valueTickAt returns the tick of the value a view of tick v (with deferred
// entries behind) holds for a member slot. It goes on from where the last
// lookup ended (*at) and searches afresh only for a slot before it: a
// Build, which looks its candidates up in slot order, pays O(1) for each,
// amortized.
func valueTickAt(v uint32, behind []baseline.Behind, slot uint32, at *int) uint32 {
	i := min(*at, len(behind))
	if i > 0 && behind[i-1].Slot >= slot {
		i = sort.Search(len(behind), func(j int) bool { return behind[j].Slot >= slot })
	} else {
		for i < len(behind) && behind[i].Slot < slot {
			i++
		}
	}
	*at = i
	if i < len(behind) && behind[i].Slot == slot {
		return behind[i].Src
	}
	return v
}
