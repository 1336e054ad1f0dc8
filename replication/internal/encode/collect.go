package encode

import (
	"math"
	"math/bits"

	"github.com/archenet/archenet/replication/bitio"
	"github.com/archenet/archenet/replication/internal/baseline"
	"github.com/archenet/archenet/replication/internal/entity"
	"github.com/archenet/archenet/replication/internal/store"
)

// candidates is one client's candidate records for a Build: what changed
// since its baseline among the entities it holds or should hold, entering
// and leaving entities, and the ones deferred earlier, each with its size
// estimate.
type candidates struct {
	list    []cand
	bits    int           // the candidates' estimated bits together
	gapK    uint          // the best gap order for all of them
	slotBuf []uint32      // (collectSimple)
	members entity.Bitset // (relevant)

	// touchOn: collect reads ahead what the Build's records are built
	// from (large worlds), from the current frame and the views'.
	touchAt     int // frame size from which to (touchEntities)
	touchOn     bool
	touchFrames [4]*store.Frame
	touched     uint64 // (the reads' sum, so that they are not dropped)
}

type cand struct {
	slot uint32
	src  uint32 // baseline tick of the client's value (0 = none)
	kind uint8  // kindDelta, kindFull, kindRemoval
	ent  uint32 // its record's index in the cache's entries (none for removals)
	mem  bool   // member of the baseline view
	// bits: its estimated size in a datagram; pri: its priority (set by
	// the selection when not all fit)
	bits int32
	pri  float32
}

// relevant returns the client's interest set intersected with present,
// the entities of the newest frame (interest nil: present).
func (cs *candidates) relevant(interest, present entity.Bitset) entity.Bitset {
	if interest == nil {
		return present
	}
	n := len(present)
	if cap(cs.members) < n {
		cs.members = make(entity.Bitset, n)
	}
	m, p := cs.members[:n], present[:n]
	k := min(n, len(interest))
	for i := range k {
		m[i] = p[i] & interest[i]
	}
	clear(m[k:])
	cs.members = m
	return m
}

// estimate adds each candidate's gap code to its size estimate (the gap to
// the previous candidate; packing computes exact sizes) and finds the gap
// order for all of them.
func (cs *candidates) estimate() {
	var gh gapHist
	prevSlot := int64(-1)
	sum := 0
	for i := range cs.list {
		cd := &cs.list[i]
		g := uint64(int64(cd.slot) - prevSlot - 1)
		cd.bits += int32(bitio.ExpGolombLen(g, 1))
		sum += int(cd.bits)
		gh.add(g)
		prevSlot = int64(cd.slot)
	}
	cs.gapK, _ = gh.best()
	cs.bits = sum
}

// touchLanes reads slot's first lane in each of touchFrames (touch's and
// touchPre's reads of the frames) and returns their sum.
func (cs *candidates) touchLanes(slot int) uint64 {
	var sum uint64
	for _, f := range cs.touchFrames {
		if f != nil {
			sum += f.Peek(slot)
		}
	}
	return sum
}

// candSource is what one client's candidates are collected from: its
// tracker, the frame, the entities relevant to it, its baseline view (tick
// B: its members and the entries deferred in it) and the slots changed
// since.
type candSource struct {
	t         *baseline.Tracker
	f         *store.Frame
	rel, base entity.Bitset
	behind    []baseline.Behind
	changed   entity.Bitset
	B         uint32
	// held: entities the client holds at their current value outside its
	// views (BuildOptions.SpawnHeld): no candidates unless base holds them.
	held entity.Bitset
}

// collect gathers the candidates (collectAll; collectSimple when no view
// has deferred entries) with their size estimates and the best gap order
// for all of them. O(words + candidates).
func (e *Encoder) collect(src *candSource) {
	e.cands.list = e.cands.list[:0]
	if e.pc.simple && len(src.behind) == 0 && !e.cands.touchOn {
		e.collectSimple(src)
	} else {
		e.collectAll(src)
	}
	e.cands.estimate()
}

// collectSimple is collectAll when no view has deferred entries and
// collect does not read ahead (small worlds): a leaf scan of the words
// lists the candidate slots, then their candidates are made. (One loop
// doing both keeps too much in registers.)
func (e *Encoder) collectSimple(src *candSource) {
	cs := &e.cands
	words := max(len(src.rel), len(src.base))
	if cap(cs.slotBuf) < 64*words {
		cs.slotBuf = make([]uint32, 64*words)
	}
	var owned entity.Bitset
	if src.t.ID != 0 && e.ownerComps != 0 {
		owned = e.cache.owned
	}
	n := scanWords(cs.slotBuf[:64*words], src, owned, e.r.LayoutAts())
	for _, slot := range cs.slotBuf[:n] {
		if slot&otherCand == 0 {
			e.deltaCand(src.f, slot, src.B)
			continue
		}
		slot &^= otherCand
		e.classify(src.t, src.f, slot, src.B, src.base.Has(slot), src.rel.Has(slot))
	}
}

// otherCand flags a slot of scanWords' list that is not the common delta.
const otherCand = 1 << 31

// scanWords lists in out (64 per word of rel and base) the slots that are
// candidates, in slot order: changed since the baseline B and relevant or
// held, or entering or leaving the client's view (but for the entities its
// spawns brought up to date, src.held). The common delta —
// changed, held, relevant, same layout since B, not in owned — is listed as
// is; others carry otherCand. It returns how many it listed.
func scanWords(out []uint32, src *candSource, owned entity.Bitset, layoutAt []uint32) int {
	rel, base, changed, held, B := src.rel, src.base, src.changed, src.held, src.B
	n := 0
	words := max(len(rel), len(base))
	for wi := range words {
		r, m, ch := rel.Word(wi), base.Word(wi), changed.Word(wi)
		cw := (ch&(r|m) | (r ^ m)) &^ (held.Word(wi) &^ m)
		fast := ch & r & m &^ owned.Word(wi)
		for ; cw != 0; cw &= cw - 1 {
			bit := bits.TrailingZeros64(cw)
			slot := uint32(wi<<6 | bit)
			if fast>>bit&1 == 0 || int(slot) >= len(layoutAt) || layoutAt[slot] > B {
				slot |= otherCand
			}
			if n < len(out) {
				out[n] = slot
				n++
			}
		}
	}
	return n
}

// collectAll gathers the candidates, word by word: changed since the
// baseline and relevant or held by the client, entering or leaving the
// client's view, and entries deferred earlier ("behind").
func (e *Encoder) collectAll(src *candSource) {
	t, f, rel, baseMembers, behind, changed, B := src.t, src.f, src.rel, src.base, src.behind, src.changed, src.B
	words := max(len(rel), len(baseMembers))
	ownerPossible := t.ID != 0 && e.ownerComps != 0
	layoutAt := e.r.LayoutAts()
	bi := 0
	for wi := 0; ; wi++ {
		// Most words of a big world hold no candidate (nothing the
		// client sees or holds, or nothing of it changed): skipped in
		// a tight loop up to the next word with a deferred entry.
		nb := math.MaxInt
		if bi < len(behind) {
			nb = int(behind[bi].Slot >> 6)
		}
		if wi = nextCand(rel, baseMembers, changed, wi, min(words, nb)); wi >= words {
			if nb == math.MaxInt {
				break
			}
			wi = nb
		}
		r, m := rel.Word(wi), baseMembers.Word(wi)
		cw := (changed.Word(wi)&(r|m) | (r ^ m)) &^ (src.held.Word(wi) &^ m)
		// fast: changed since the baseline, held and relevant, not
		// deferred: the common delta, whose key setupPrediction made.
		fast := changed.Word(wi) & r & m
		if !e.pc.simple {
			fast = 0
		}
		if ownerPossible {
			fast &^= e.cache.owned.Word(wi) // (classify asks ownerView)
		}
		if fast != 0 && e.cands.touchOn {
			w := fast
			if e.pre.ki != [3]bool{} {
				w &^= e.g.pre.has.Word(wi) // (pre-encoded: nothing to read ahead)
			}
			e.touch(w, wi)
		}
		bj := bi
		for bi < len(behind) && int(behind[bi].Slot>>6) == wi {
			cw |= 1 << (behind[bi].Slot & 63)
			fast &^= 1 << (behind[bi].Slot & 63)
			bi++
		}
		for ; cw != 0; cw &= cw - 1 {
			bit := bits.TrailingZeros64(cw)
			slot := uint32(wi<<6 | bit)
			if fast>>bit&1 != 0 && layoutAt[slot] <= B {
				e.deltaCand(f, slot, B)
				continue
			}
			src := B
			for bj < bi && behind[bj].Slot < slot {
				bj++
			}
			if bj < bi && behind[bj].Slot == slot {
				src = behind[bj].Src
			}
			e.classify(t, f, slot, src, m>>(slot&63)&1 != 0, r>>(slot&63)&1 != 0)
		}
	}
}

// nextCand returns the first word index in [i, lim) holding a slot that
// is relevant or held and changed, or relevant and not held, or held and
// not relevant (collectAll's candidates), or lim: the skip of a sparse scan,
// in a loop without bounds checks.
func nextCand(rel, held, changed entity.Bitset, i, lim int) int {
	if n := min(lim, len(rel), len(held), len(changed)); i < n {
		r, m, c := rel[i:n], held[i:n], changed[i:n]
		m, c = m[:len(r)], c[:len(r)]
		for j := range r {
			if c[j]&(r[j]|m[j])|(r[j]^m[j]) != 0 {
				return i + j
			}
		}
		i = n
	}
	for i < lim && changed.Word(i)&(rel.Word(i)|held.Word(i))|(rel.Word(i)^held.Word(i)) == 0 {
		i++
	}
	return i
}

// touchEntities is the frame size from which collect reads ahead (touch):
// measured on this project's 2-core test machines, reading ahead saves 6%
// of the per-client build at 10,000 entities and 12% at 50,000, and costs
// a little at 2,000, whose frames and cache stay in the CPU's caches.
const touchEntities = 8192

// touch reads, for the fast candidates of word wi (see collect), the
// memory their records are looked up and encoded from: their cache slots
// and their lanes in the frames of the Build's views. The reads of
// different slots do not depend on one another, so in a large world, whose
// frames and cache do not fit in the CPU's caches, their misses overlap here
// instead of stalling each record in turn.
func (e *Encoder) touch(fast uint64, wi int) {
	var sum uint64
	tags := e.cache.tags
	for w := fast; w != 0; w &= w - 1 {
		slot := wi<<6 | bits.TrailingZeros64(w)
		sum += (tags[2*slot] ^ tags[2*slot+1]) + e.cands.touchLanes(slot)
	}
	e.cands.touched += sum
}

// deltaCand adds the candidate of a slot the client holds at the
// baseline's value B, changed since with the same layout, seen without
// owner-only fields, when no view has deferred entries: classify's common
// case without its searches.
func (e *Encoder) deltaCand(f *store.Frame, slot, B uint32) {
	ki := 0
	if e.pc.members.Has(slot) {
		ki = 1
		if e.pc.B3 != 0 && e.pc.members3.Has(slot) {
			ki = 2
		}
	}
	if e.pre.ki[ki] && e.g.pre.has.Has(slot) {
		ce := &e.g.pre.entries[slot]
		e.PreHits++
		e.cands.list = append(e.cands.list, cand{slot: slot, src: B, kind: ce.kind, ent: preBit | slot, bits: int32(memberBits(ce)), mem: true})
		return
	}
	tag := e.pc.tags[ki]
	var ce *cacheEntry
	var x uint32
	if i := e.cache.find(slot, tag); i >= 0 {
		ce, x = &e.cache.entries[i], uint32(i)
		e.cache.CacheHits++
	} else {
		ce, x = e.encode(f, slot, -1, e.pc.keys[ki], tag)
	}
	e.cands.list = append(e.cands.list, cand{slot: slot, src: B, kind: ce.kind, ent: x, bits: int32(memberBits(ce)), mem: true})
}

// classify adds slot to the candidates if the client's value differs from
// the newest frame.
func (e *Encoder) classify(t *baseline.Tracker, f *store.Frame, slot, src uint32, inB, inS bool) {
	switch {
	case inB && !inS:
		e.cands.list = append(e.cands.list, cand{slot: slot, src: src, kind: kindRemoval, bits: 4, mem: true})
	case !inB && inS:
		ce, x := e.record(f, slot, -1, recKey{owner: e.ownerView(t, f, slot)})
		e.cands.list = append(e.cands.list, cand{slot: slot, kind: kindFull, ent: x, bits: int32(ce.bodyBits)})
	case inB && inS:
		if e.r.ChangedAt(slot) <= src { // (a layout change is a change)
			return // unchanged since the client's value
		}
		s := src
		if e.r.LayoutAt(slot) > src {
			s = 0 // new incarnation or layout: full
		}
		ce, x := e.record(f, slot, -1, e.pc.key(slot, s, e.ownerView(t, f, slot)))
		e.cands.list = append(e.cands.list, cand{slot: slot, src: src, kind: ce.kind, ent: x, bits: int32(memberBits(ce)), mem: true})
	}
}

// weight returns slot's relevance weight (1 where ws has none).
func weight(ws []float32, slot uint32) float32 {
	if int(slot) < len(ws) {
		return ws[slot]
	}
	return 1
}
