package snapshot

import (
	"math"
	"math/bits"
)

// candidates is one client's candidate records for a Build: what changed
// since its baseline among the entities it holds or should hold, entering
// and leaving entities, and the ones deferred earlier, each with its size
// estimate.
type candidates struct {
	cands    []cand
	candBits int      // the candidates' estimated bits together
	candGapK uint     // the best gap order for all of cands
	slotBuf  []uint32 // (collectSimple)
	members  Bitset   // (relevant)

	// touchOn: collect reads ahead what the packet's records are built
	// from (large worlds), from the current frame and the views'.
	touchAt     int // frame size from which to (touchEntities)
	touchOn     bool
	touchFrames [4]*Frame
	touched     uint64 // (the reads' sum, so that they are not dropped)
}

type cand struct {
	slot uint32
	src  uint32 // baseline tick of the client's value (0 = none)
	kind uint8  // kindDelta, kindFull, kindRemoval
	ent  uint32 // its record's index in e.entries (none for removals)
	mem  bool   // member of the baseline view
	// bits: its estimated size in a datagram; pri: its priority (set by
	// selectRecords when not all fit)
	bits int32
	pri  float32
}

// relevant returns the client's interest set intersected with the entities
// present in the newest frame.
func (e *Encoder) relevant(interest Bitset) Bitset {
	if interest == nil {
		return e.present
	}
	n := len(e.present)
	if cap(e.members) < n {
		e.members = make(Bitset, n)
	}
	m, p := e.members[:n], e.present[:n]
	k := min(n, len(interest))
	for i := range k {
		m[i] = p[i] & interest[i]
	}
	clear(m[k:])
	e.members = m
	return m
}

// candSource is what one client's candidates are collected from: its
// state, the frame, the entities relevant to it, its baseline view (tick B:
// its members and the entries deferred in it) and the slots changed since.
type candSource struct {
	c         *Client
	f         *Frame
	rel, base Bitset
	behind    []behindEntry
	changed   Bitset
	B         uint32
}

// collect gathers the candidates (collectAll; collectSimple when no view
// has deferred entries) with their size estimates and the best gap order
// for all of them. O(words + candidates).
func (e *Encoder) collect(cs *candSource) {
	e.cands = e.cands[:0]
	if e.pc.simple && len(cs.behind) == 0 && !e.touchOn {
		e.collectSimple(cs)
	} else {
		e.collectAll(cs)
	}
	// Size estimates use the gap to the previous candidate; packing computes
	// exact sizes. The gap order for all of them is found on the way.
	var gh gapHist
	prevSlot := int64(-1)
	sum := 0
	for i := range e.cands {
		cd := &e.cands[i]
		g := uint64(int64(cd.slot) - prevSlot - 1)
		cd.bits += int32(egLen(g, 1))
		sum += int(cd.bits)
		gh.add(g)
		prevSlot = int64(cd.slot)
	}
	e.candGapK, _ = gh.best()
	e.candBits = sum
}

// collectSimple is collectAll when no view has deferred entries and
// collect does not read ahead (small worlds): a leaf scan of the words
// lists the candidate slots, then their candidates are made. (One loop
// doing both keeps too much in registers.)
func (e *Encoder) collectSimple(cs *candSource) {
	words := max(len(cs.rel), len(cs.base))
	if cap(e.slotBuf) < 64*words {
		e.slotBuf = make([]uint32, 64*words)
	}
	var owned Bitset
	if cs.c.ID != 0 && e.ownerComps != 0 {
		owned = e.owned
	}
	n := scanWords(e.slotBuf[:64*words], cs, owned, e.w.layoutAt)
	for _, slot := range e.slotBuf[:n] {
		if slot&otherCand == 0 {
			e.deltaCand(cs.f, slot, cs.B)
			continue
		}
		slot &^= otherCand
		e.classify(cs.c, cs.f, slot, cs.B, cs.base.Has(slot), cs.rel.Has(slot))
	}
}

// otherCand flags a slot of scanWords' list that is not the common delta.
const otherCand = 1 << 31

// scanWords lists in out (64 per word of rel and base) the slots that are
// candidates, in slot order: changed since the baseline B and relevant or
// held, or entering or leaving the client's view. The common delta —
// changed, held, relevant, same layout since B, not in owned — is listed as
// is; others carry otherCand. It returns how many it listed.
func scanWords(out []uint32, cs *candSource, owned Bitset, layoutAt []uint32) int {
	rel, base, changed, B := cs.rel, cs.base, cs.changed, cs.B
	n := 0
	words := max(len(rel), len(base))
	for wi := range words {
		r, m, ch := rel.word(wi), base.word(wi), changed.word(wi)
		cw := ch&(r|m) | (r ^ m)
		fast := ch & r & m &^ owned.word(wi)
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
func (e *Encoder) collectAll(cs *candSource) {
	c, f, rel, baseMembers, behind, changed, B := cs.c, cs.f, cs.rel, cs.base, cs.behind, cs.changed, cs.B
	words := max(len(rel), len(baseMembers))
	ownerPossible := c.ID != 0 && e.ownerComps != 0
	bi := 0
	for wi := 0; ; wi++ {
		// Most words of a big world hold no candidate (nothing the
		// client sees or holds, or nothing of it changed): skipped in
		// a tight loop up to the next word with a deferred entry.
		nb := math.MaxInt
		if bi < len(behind) {
			nb = int(behind[bi].slot >> 6)
		}
		if wi = nextCand(rel, baseMembers, changed, wi, min(words, nb)); wi >= words {
			if nb == math.MaxInt {
				break
			}
			wi = nb
		}
		r, m := rel.word(wi), baseMembers.word(wi)
		cw := changed.word(wi)&(r|m) | (r ^ m)
		// fast: changed since the baseline, held and relevant, not
		// deferred: the common delta, whose key setupPrediction made.
		fast := changed.word(wi) & r & m
		if !e.pc.simple {
			fast = 0
		}
		if ownerPossible {
			fast &^= e.owned.word(wi) // (classify asks ownerView)
		}
		if fast != 0 && e.touchOn {
			t := fast
			if e.preKi != [3]bool{} {
				t &^= e.w.pre.has.word(wi) // (pre-encoded: nothing to read ahead)
			}
			e.touch(t, wi)
		}
		bj := bi
		for bi < len(behind) && int(behind[bi].slot>>6) == wi {
			cw |= 1 << (behind[bi].slot & 63)
			fast &^= 1 << (behind[bi].slot & 63)
			bi++
		}
		for ; cw != 0; cw &= cw - 1 {
			bit := bits.TrailingZeros64(cw)
			slot := uint32(wi<<6 | bit)
			if fast>>bit&1 != 0 && e.w.layoutAt[slot] <= B {
				e.deltaCand(f, slot, B)
				continue
			}
			src := B
			for bj < bi && behind[bj].slot < slot {
				bj++
			}
			if bj < bi && behind[bj].slot == slot {
				src = behind[bj].src
			}
			e.classify(c, f, slot, src, m>>(slot&63)&1 != 0, r>>(slot&63)&1 != 0)
		}
	}
}

// touchEntities is the frame size from which collect reads ahead (touch):
// measured on this project's 2-core test machines, reading ahead saves 6%
// of the per-client build at 10,000 entities and 12% at 50,000, and costs
// a little at 2,000, whose frames and cache stay in the CPU's caches.
const touchEntities = 8192

// touch reads, for the fast candidates of word wi (see collect), the
// memory their records are looked up and encoded from: their cache slots
// and their lanes in the frames of the packet's views. The reads of
// different slots do not depend on one another, so in a large world, whose
// frames and cache do not fit in the CPU's caches, their misses overlap here
// instead of stalling each record in turn.
func (e *Encoder) touch(fast uint64, wi int) {
	var sum uint64
	for w := fast; w != 0; w &= w - 1 {
		slot := wi<<6 | bits.TrailingZeros64(w)
		sum += (e.tags[2*slot] ^ e.tags[2*slot+1]) + e.touchLanes(slot)
	}
	e.touched += sum
}

// touchLanes reads slot's first lane in each of e.touchFrames (touch's
// and touchPre's reads of the frames) and returns their sum.
func (e *Encoder) touchLanes(slot int) uint64 {
	var sum uint64
	for _, f := range e.touchFrames {
		if f == nil || slot >= len(f.index) {
			continue
		}
		if i := f.index[slot]; int(i) < len(f.Offs) {
			if o := f.Offs[i]; int(o) < len(f.Lanes) {
				sum += f.Lanes[o]
			}
		}
	}
	return sum
}

// deltaCand adds the candidate of a slot the client holds at the
// baseline's value B, changed since with the same layout, seen without
// owner-only fields, when no view has deferred entries: classify's common
// case without its searches.
func (e *Encoder) deltaCand(f *Frame, slot, B uint32) {
	ki := 0
	if e.pc.members.Has(slot) {
		ki = 1
		if e.pc.B3 != 0 && e.pc.members3.Has(slot) {
			ki = 2
		}
	}
	if e.preKi[ki] && e.w.pre.has.Has(slot) {
		ce := &e.w.pre.entries[slot]
		e.PreHits++
		e.cands = append(e.cands, cand{slot: slot, src: B, kind: ce.kind, ent: preBit | slot, bits: int32(memberBits(ce)), mem: true})
		return
	}
	tag := e.pc.tags[ki]
	var ce *cacheEntry
	var x uint32
	if i := e.find(slot, tag); i >= 0 {
		ce, x = &e.entries[i], uint32(i)
		e.CacheHits++
	} else {
		ce, x = e.encode(f, slot, -1, e.pc.keys[ki], tag)
	}
	e.cands = append(e.cands, cand{slot: slot, src: B, kind: ce.kind, ent: x, bits: int32(memberBits(ce)), mem: true})
}

func weight(ws []float32, slot uint32) float32 {
	if int(slot) < len(ws) {
		return ws[slot]
	}
	return 1
}

// classify adds slot to the candidates if the client's value differs from
// the newest frame.
func (e *Encoder) classify(c *Client, f *Frame, slot, src uint32, inB, inS bool) {
	switch {
	case inB && !inS:
		e.cands = append(e.cands, cand{slot: slot, src: src, kind: kindRemoval, bits: 4, mem: true})
	case !inB && inS:
		ce, x := e.record(f, slot, -1, recKey{owner: e.ownerView(c, f, slot)})
		e.cands = append(e.cands, cand{slot: slot, kind: kindFull, ent: x, bits: int32(ce.bodyBits)})
	case inB && inS:
		if e.w.changedAt[slot] <= src { // (a layout change is a change)
			return // unchanged since the client's value
		}
		s := src
		if e.w.layoutAt[slot] > src {
			s = 0 // new incarnation or layout: full
		}
		ce, x := e.record(f, slot, -1, e.pc.key(slot, s, e.ownerView(c, f, slot)))
		e.cands = append(e.cands, cand{slot: slot, src: src, kind: ce.kind, ent: x, bits: int32(memberBits(ce)), mem: true})
	}
}
