package encode

import (
	"cmp"
	"github.com/archenet/archenet/replication/bitio"
	"github.com/archenet/archenet/replication/internal/baseline"
	"github.com/archenet/archenet/replication/internal/codec"
	"github.com/archenet/archenet/replication/internal/entity"
	"github.com/archenet/archenet/replication/internal/lanes"
	"github.com/archenet/archenet/replication/internal/store"
	"github.com/archenet/archenet/replication/internal/wire"
	"math/bits"
	"slices"
	"sort"
)

// Shared builds. When everything moves and every client sees everything,
// the clients that acked the same tick hold the same view: their Builds
// would collect the same candidates, select all of them, pack them the
// same way and write the same records, their datagrams differing only in
// the header's per-client fields (the input ack and feedback). A Build
// whose inputs equal those of the encoder's last Build of the tick copies
// that Build's datagrams and writes its own header into each, and gives
// its tracker the same view: the cost of a client is then its header, the
// copy and a comparison of a few sets, not its records.
//
// The inputs compared (shareKey and the sets of shareState) are all a
// Build's output depends on besides the tick's frame and coding: the
// baseline and prediction views and their members, the entities relevant
// to the client and held by it, the datagram size and count, the header's
// length and the byte allowance. Only Builds that sent every candidate
// (nothing deferred) are repeated, for clients with no deferred entries
// and no priority accumulated, and whose allowance is at least what the
// repeated Build needed; with owner-only fields, only for clients that own
// no entity with some; and only for clients whose prediction views hold
// every entity at the view's tick (a client that lost a datagram of a
// tick holds some at older values). Those others take the kept Build's
// candidates and remake the records that differ (repeatCands). The
// datagrams are byte for byte those a full Build would write
// (TestSharedBuildsSameBytes, TestSharedCandsSameBytes,
// TestSharedWithDeferredPredictionViews).
//
// The coding's counts weigh each record as often as it is sent: a repeat
// adds one to its Build's pending sends, which are counted (with copies of
// its delta records' counts, kept with it: stats) before the encoder's next
// full Build and when its counts are flushed. A Build that is not kept
// (another client's view) leaves the kept one in place: a client after it
// may still repeat that one, or take its candidates (repeatCands), whose
// records stay in the cache while it is kept (pinned: an encode of another
// key replaces the slot's other way). A kept Build that was repeated is
// not replaced by a Build of another baseline or prediction (a client that
// lost a datagram, say): the clients after it are likelier to share the
// first.

// shareKey is what a repeatable Build's scalars must match.
type shareKey struct {
	tick, B    uint32
	pcOn       bool
	B2, B3     uint32
	quad       bool
	mtu, parts int
	hdrBits    int // the header's length with the client's fields
}

// shareState is the encoder's last repeatable Build of the tick.
type shareState struct {
	valid bool
	key   shareKey
	// the Build's sets: its baseline's members, the prediction views'
	// members, the relevant entities (a copy: the encoder's buffer is
	// rewritten by the next Build) and the held ones
	base, m2, m3, held, rel entity.Bitset
	// need: the least byte allowance with which the Build does the same
	need int
	// what it made: the tracker and view it recorded (read at a repeat:
	// the members and records), its datagrams, their parts and what it
	// reported
	t       *baseline.Tracker
	view    uint32
	pkts    Packets
	parts   []part
	hdrBits []int
	info    BuildInfo
	preHits int
	// acct: the Build's bit accounting (what it added to the encoder's
	// Account; acctOn: accounting was on), added again at each repeat;
	// acctPre the Account before the Build
	acct, acctPre Account
	acctOn        bool
	// ents are the kept Build's pre-encoded delta records (their indexes),
	// stats its other delta records' counts for the coding choice
	// (copies), minus how many of the pending repeats each is not counted
	// in (a patched repeat replaced it), statOf the index in stats of each
	// of cands (−1: none); pins its records' cache entries, pinned while
	// it is kept (recordCache.pin: its candidates name them)
	ents   []uint32
	stats  []lanes.Stats
	minus  []uint32
	statOf []int32
	pins   []uint32
	// reuses counts the repeats whose sends are still to count
	// (flushShare), repeats all of them
	reuses, repeats uint32
	// misses counts the kept Builds in a row that were not repeated; from
	// shareMisses on, only one Build in shareSkip is kept (skip counts down)
	misses, skip int
	// owned: the Build's client owns entities with owner-only fields (its
	// datagrams are its own); simple: its prediction views had no deferred
	// entries (predCtx.simple), else those entries' slots are in pcSlots;
	// cands, bits, gapK: its candidates (repeatCands); single: its emit's
	// attempt at one datagram (packer.single)
	owned   bool
	simple  bool
	pcSlots []uint32
	cands   []cand
	bits    int
	gapK    uint
	single  int
	// passes, passParts: its pack's passes (packer.passes)
	passes    []packPass
	passParts []part
}

// shareMisses and shareSkip: an encoder whose kept Builds are not
// repeated (clients that see different entities) keeps fewer, to spare
// the copies.
const (
	shareMisses = 8
	shareSkip   = 8
)

// noShare is packer.need for a Build that a client with more allowance
// would not repeat.
const noShare = int(^uint(0) >> 1)

// SharedBuilds counts the Builds that repeated another's datagrams since
// the encoder was made.
func (e *Encoder) SharedBuilds() int { return e.sharedN }

// SharedCands counts the Builds that took another's candidates
// (repeatCands) since the encoder was made.
func (e *Encoder) SharedCands() int { return e.candsN }

// canShare reports whether t's Build may repeat or be repeated: no
// compression (per-client work on the bytes), no deferred entries in its
// baseline (they change its candidates) nor priorities.
// (A client with owner-only fields of its own, or with deferred entries in
// its prediction views, shares candidates, and patched datagrams:
// repeatCands.)
func (e *Encoder) canShare(t *baseline.Tracker, behind []baseline.Behind) bool {
	return !e.NoShare && e.Compression == nil && len(behind) == 0 && len(t.Acc()) == 0
}

// ownRecords reports whether some of the records of t's Build may differ
// from those of another client's with the same inputs: it owns an entity
// with owner-only fields, or its prediction views hold older values of
// some entities (deferred or lost), which its records are coded against.
func (e *Encoder) ownRecords(t *baseline.Tracker) bool {
	return !e.pc.simple || e.ownsOwnerOnly(t)
}

// ownsOwnerOnly reports whether t's client owns an entity with owner-only
// fields (its records of those differ from every other client's).
func (e *Encoder) ownsOwnerOnly(t *baseline.Tracker) bool {
	return e.ownerComps != 0 && t.ID != 0 && e.cache.ownerHas(t.ID)
}

// matches reports whether the kept Build's inputs are t's (key k, sets):
// the same candidates but for the records of entities with owner-only
// fields.
func (sh *shareState) matches(e *Encoder, t *baseline.Tracker, k *shareKey, baseMembers, rel, held entity.Bitset) bool {
	return sh.valid && sh.t != t && sh.acctOn == (e.acct != nil) && sh.key == *k && entity.Same(sh.base, baseMembers) &&
		entity.Same(sh.m2, e.pc.members) && entity.Same(sh.m3, e.pc.members3) && entity.Same(sh.rel, rel) && entity.Same(sh.held, held)
}

// repeatCands takes the kept Build's candidates for t's Build when their
// inputs match but its datagrams cannot be repeated as they are: one of
// the two clients owns an entity with owner-only fields, or has deferred
// entries in its prediction views. The records of those entities (its own
// and t's with owner-only fields; those deferred in either's prediction
// views) are made again for t, as collect would (classify): those that
// differ from the kept Build's are listed in e.subs. The Build then
// selects, packs and records its view as usual (the same datagrams as with
// collect, without its scan and lookups), or patches the kept Build's
// datagrams (emitPatched). False (nothing changed but cache entries of t's
// own records, in the ways the kept Build's are not pinned to) if the
// inputs differ, or if t's datagrams are the kept Build's as they are
// (tryRepeat) or t builds its own to be kept instead.
func (e *Encoder) repeatCands(t *baseline.Tracker, f *store.Frame, k *shareKey, baseMembers, rel, held entity.Bitset) bool {
	sh := &e.share
	switch {
	case !e.ownRecords(t) && !sh.owned && (sh.simple || e.ownerComps == 0):
		// Repeated whole, if at all (tryRepeat); or, the kept Build's
		// records differing from t's only for its deferred entries, built
		// whole, and kept in its place for the clients after t (those with
		// none deferred are the likelier).
		return false
	case !sh.matches(e, t, k, baseMembers, rel, held):
		return false
	}
	// Only the records of t's own entities with owner-only fields and of
	// the kept Build's client's differ (both see a third client's without
	// its owner-only fields), and those of entities deferred in either's
	// prediction views. In slot order, as the candidates are.
	slots := e.remake[:0]
	for wi, w := range e.cache.owned {
		for ; w != 0; w &= w - 1 {
			slot := uint32(wi<<6 | bits.TrailingZeros64(w))
			if j := f.Lookup(slot); j >= 0 {
				if o := f.Metas[j].Owner; o == t.ID || o == sh.t.ID {
					slots = append(slots, slot)
				}
			}
		}
	}
	if !sh.simple || !e.pc.simple {
		slots = append(slots, sh.pcSlots...)
		slots = appendBehindSlots(slots, e.pc.behind, e.pc.behind3)
		slices.Sort(slots)
		slots = slices.Compact(slots)
	}
	e.remake = slots
	list := append(e.cands.list[:0], sh.cands...)
	e.cands.list = list
	e.subs = e.subs[:0]
	sum, preHits := sh.bits, sh.preHits
	for _, slot := range slots {
		i, found := sort.Find(len(list), func(i int) int { return cmp.Compare(slot, list[i].slot) })
		if !found {
			continue // (not a candidate: unchanged for both)
		}
		cd := &list[i]
		// (classify appends the slot's candidate after the list's end,
		// whence it moves into place)
		n := len(e.cands.list)
		e.classify(t, f, slot, k.B, baseMembers.Has(slot), rel.Has(slot))
		if len(e.cands.list) != n+1 {
			e.cands.list = list
			return false // (no candidate now: cannot happen with the same inputs)
		}
		nc := e.cands.list[n]
		e.cands.list = list
		prev := int64(-1)
		if i > 0 {
			prev = int64(list[i-1].slot)
		}
		nc.bits += int32(bitio.ExpGolombLen(uint64(int64(slot)-prev-1), 1))
		if cd.ent&preBit != 0 {
			preHits-- // (classify counted t's own)
		}
		if nc.ent != cd.ent || nc.kind != cd.kind {
			e.subs = append(e.subs, subst{i: i, old: *cd})
		}
		sum += int(nc.bits) - int(cd.bits)
		*cd = nc
	}
	e.cands.bits, e.cands.gapK = sum, sh.gapK
	e.PreHits += preHits
	sh.repeats++
	if !sh.simple || !e.pc.simple {
		e.pcCandsN++
	}
	return true
}

// subst is a candidate of the kept Build for which a Build that took its
// candidates (repeatCands) has a record of its own: at index i, in place
// of old.
type subst struct {
	i   int
	old cand
}

// canPatch reports whether the Build that took the kept Build's candidates
// may patch its datagrams (emitPatched): the kept Build wrote them as a
// full Build would with more allowance, without bit accounting, and its
// view is still in its tracker.
func (e *Encoder) canPatch() bool {
	sh := &e.share
	return e.acct == nil && sh.need != noShare && sh.t.At(sh.view) != nil
}

// recBound bounds the bits of candidate cd's record in a datagram, and
// what it may change in the next record's (the mask it repeats or sends).
func (e *Encoder) recBound(cd *cand) int {
	if cd.kind == kindRemoval {
		return 160
	}
	ce := e.entry(cd)
	return 160 + int(ce.bodyBits) + int(ce.maskBits)
}

// emitPatched is emit for a Build that took the kept Build's candidates
// (repeatCands), all selected: its datagrams are the kept Build's, with
// its header and, in each datagram that carries one of its own records
// (e.subs), written anew, when its records pack into the same datagrams;
// otherwise it writes them all as emit would. It reports whether they
// packed the same (the kept Build's view is then the client's too:
// repeatView).
func (e *Encoder) emitPatched(out *Packets, mtu, maxParts, total int, h *wire.Header, info *BuildInfo) bool {
	sh := &e.share
	k0 := e.cands.gapK
	n := len(e.cands.list)
	e.packer.hdrBits = e.packer.hdrBits[:0]
	e.packer.single = -1
	hp := *h
	if len(sh.parts) == 1 && sh.single >= 0 {
		// The kept Build's one datagram: this one's, if it fits as well.
		e.packer.parts = append(e.packer.parts[:0], part{from: 0, to: n, k: uint8(k0)})
		hp.Parts = 1
		if len(e.subs) == 0 && e.copyKeptPart(out, &hp, 0, info) {
			info.Parts = 1
			return true
		}
		if bits := e.writePart(&hp, 0); bits <= mtu*8 && (bits+7)/8 <= total {
			e.packer.hdrBits = append(e.packer.hdrBits, e.packer.partHdrBits)
			e.appendPart(out, info)
			info.Parts = 1
			return true
		}
	} else {
		// The kept Build packed several datagrams because one did not
		// hold its records, by more than this one's own can take back:
		// nor does it hold this one's.
		bound := 0
		for _, s := range e.subs {
			bound += e.recBound(&s.old) + e.recBound(&e.cands.list[s.i])
		}
		if sh.single < 0 || sh.single-bound <= mtu*8 {
			e.emit(out, mtu, maxParts, total, h, info)
			return false
		}
		// Its records pack as the kept Build's did if each of the kept
		// pack's passes closes each datagram that holds one of them, or
		// whose next record is one, at the same record; the allowance
		// never binds if it exceeds the kept Build's need by more than its
		// records can add.
		if total >= sh.need+bound/8+1 && e.packsSame(mtu, h, k0) {
			e.packer.parts = append(e.packer.parts[:0], sh.parts...)
			return e.writePatched(out, h, true, info)
		}
	}
	e.sel.fill(&e.cands)
	e.sel.all = false
	e.pack(mtu, maxParts, total, h, k0)
	same := len(e.packer.parts) == len(sh.parts)
	for pi := 0; same && pi < len(sh.parts); pi++ {
		same = e.packer.parts[pi] == sh.parts[pi]
	}
	return e.writePatched(out, h, same, info)
}

// packsSame reports whether the candidates, the kept Build's with this
// Build's records of e.subs, make the kept Build's pack passes (all of
// them: the parts each assumes come from the one before): for each part
// of each pass that holds one of e.subs, or whose next record is one, its
// records, sized as packWith does, fit, and the next does not.
func (e *Encoder) packsSame(mtu int, h *wire.Header, k0 uint) bool {
	sh := &e.share
	if len(sh.passes) == 0 {
		return false
	}
	capBits := (mtu - 1) * 8
	list := e.cands.list
	hp := *h
	for _, ps := range sh.passes {
		parts := sh.passParts[ps.from:ps.to]
		if len(parts) == 0 || parts[len(parts)-1].to != len(list) {
			return false // (a pass that left records out)
		}
		hp.Parts, hp.GapOrder = max(ps.assume, 1), 7
		si := 0
		for p, pt := range parts {
			for si < len(e.subs) && e.subs[si].i < pt.from {
				si++
			}
			if si == len(e.subs) || e.subs[si].i > pt.to {
				continue // (the part and its close are the kept Build's)
			}
			hp.Part, hp.Count = p, 0
			bitsNow, prev, run := hp.BitLen(), int64(-1), codec.NewMaskRun()
			for i := pt.from; i < pt.to; i++ {
				bitsNow += e.addedBits(&list[i], prev, k0, &run, hp.Count)
				hp.Count++
				prev = int64(list[i].slot)
			}
			if bitsNow > capBits {
				return false
			}
			if pt.to < len(list) && bitsNow+e.addedBits(&list[pt.to], prev, k0, &run, hp.Count) <= capBits {
				return false // (the next record fits this datagram now)
			}
		}
	}
	return true
}

// writePatched writes the datagrams of e.packer.parts to out: with same
// (the kept Build's parts), those that carry none of e.subs are the kept
// Build's, with this Build's header. It returns same.
func (e *Encoder) writePatched(out *Packets, h *wire.Header, same bool, info *BuildInfo) bool {
	hp := *h
	hp.Parts = len(e.packer.parts)
	e.packer.hdrBits = e.packer.hdrBits[:0]
	si := 0
	for pi := range e.packer.parts {
		pt := &e.packer.parts[pi]
		own := false // (the datagram carries one of this Build's records)
		for ; si < len(e.subs) && e.subs[si].i < pt.to; si++ {
			own = own || e.subs[si].i >= pt.from
		}
		if same && !own && e.copyKeptPart(out, &hp, pi, info) {
			continue
		}
		e.writePart(&hp, pi)
		e.packer.hdrBits = append(e.packer.hdrBits, e.packer.partHdrBits)
		e.appendPart(out, info)
	}
	info.Parts = len(e.packer.parts)
	return same
}

// copyKeptPart appends the kept Build's datagram pi to out with header hp
// (part pi's fields set here); false if that header's length differs.
func (e *Encoder) copyKeptPart(out *Packets, hp *wire.Header, pi int, info *BuildInfo) bool {
	sh := &e.share
	pt := &sh.parts[pi]
	hp.Part, hp.Count, hp.GapOrder = pi, pt.to-pt.from, pt.k
	w := &e.packer.partW
	w.Reset(w.Bytes())
	w.WriteBits(uint64(wire.KindSnapshot), 8)
	hp.AppendBits(w)
	if w.BitLen() != sh.hdrBits[pi] {
		return false
	}
	start := len(out.buf)
	out.buf = append(out.buf, sh.pkts.At(pi)...)
	overwriteBits(out.buf[start:], w.Bytes(), sh.hdrBits[pi])
	out.ends = append(out.ends, len(out.buf))
	e.packer.hdrBits = append(e.packer.hdrBits, sh.hdrBits[pi])
	info.HeaderBits += sh.hdrBits[pi]
	return true
}

// repeatView records t's view of tick S after emitPatched packed its
// records as the kept Build did: the kept Build's view, and its counts
// but for the records of e.subs (this Build's own, counted here; the kept
// Build's have one send fewer to count).
func (e *Encoder) repeatView(t *baseline.Tracker, S uint32, base *baseline.View, opt *BuildOptions, info *BuildInfo) {
	sh := &e.share
	e.keptView(t, S, base, opt, sh.t.At(sh.view))
	parts, hdrBits := info.Parts, info.HeaderBits
	*info = sh.info
	info.Parts, info.HeaderBits, info.Shared = parts, hdrBits, true
	for _, s := range e.subs {
		switch old := &s.old; old.kind {
		case kindRemoval:
			info.Removals--
		case kindFull:
			info.Fulls--
		default:
			info.Deltas--
			ce := e.entry(old)
			if ce.usePred {
				info.PredictedDeltas--
				info.predSaved -= int(ce.saved)
			}
			if old.ent&preBit != 0 {
				e.pre.sends[old.ent&^preBit]-- // (the repeats' sends come at flushShare: a wrap-around here is made good)
			} else {
				sh.minus[sh.statOf[s.i]]++
			}
		}
		e.tally(&e.cands.list[s.i], info)
	}
	sh.reuses++
}

// tryRepeat repeats the encoder's last repeatable Build for t if its inputs
// are the same, writing out and recording t's view; false if they are not.
func (e *Encoder) tryRepeat(t *baseline.Tracker, k *shareKey, base *baseline.View, baseMembers, rel, held entity.Bitset, total int, opt *BuildOptions, h *wire.Header, out *Packets, info *BuildInfo) bool {
	sh := &e.share
	if sh.owned || !sh.simple || total < sh.need || !sh.matches(e, t, k, baseMembers, rel, held) {
		return false
	}
	v := sh.t.At(sh.view)
	if v == nil {
		return false
	}
	// The datagrams, each with t's header (of the same length).
	hp := *h
	hp.Parts = len(sh.parts)
	for pi := range sh.parts {
		if !e.copyKeptPart(out, &hp, pi, info) {
			out.Reset()
			return false
		}
	}
	*info = sh.info
	info.Shared = true
	e.keptView(t, k.tick, base, opt, v)
	e.endView(t, info)
	if e.acct != nil {
		e.acct.Add(&sh.acct)
	}
	sh.reuses++
	sh.repeats++
	e.PreHits += sh.preHits
	e.sharedN++
	return true
}

// keptView records t's view of tick S as recordView made the kept Build's
// (v): its members and, for a tick of several datagrams, its records.
func (e *Encoder) keptView(t *baseline.Tracker, S uint32, base *baseline.View, opt *BuildOptions, v *baseline.View) {
	sh := &e.share
	nv := e.beginView(t, S, base, opt, len(sh.parts))
	t.SetMembers(nv, sh.t.Members(v))
	if len(sh.parts) > 1 {
		t.SetRecs(nv, sh.t.Recs(v))
		acc := t.StartAcc()
		acc.Finish(t)
	} else {
		t.DropSpareRecs()
	}
}

// overwriteBits writes the first n bits of src over those of dst.
func overwriteBits(dst, src []byte, n int) {
	copy(dst[:n/8], src[:n/8])
	if r := n % 8; r != 0 {
		m := byte(1)<<r - 1
		dst[n/8] = dst[n/8]&^m | src[n/8]&m
	}
}

// keepShare records the Build just made (for t, with key k) as the one
// later Builds of the tick may repeat, if it sent every candidate.
//
// A Build of a client that owns entities with owner-only fields is kept
// only if no other is: its candidates may be repeated (repeatCands), not
// its datagrams.
func (e *Encoder) keepShare(t *baseline.Tracker, k *shareKey, baseMembers, rel, held entity.Bitset, out *Packets, info *BuildInfo, preHits int) {
	sh := &e.share
	owned := e.ownsOwnerOnly(t)
	if info.Deferred != 0 || info.Starved || (e.packer.need == noShare && !owned) || info.Shared || info.SharedCands || ((owned || !e.pc.simple) && sh.valid) {
		return
	}
	if sh.misses >= shareMisses {
		// (its Builds are seldom repeated: one kept now and then)
		if sh.skip > 0 {
			sh.skip--
			return
		}
		sh.skip = shareSkip
	}
	if sh.valid && sh.repeats > 0 && sh.key.tick == k.tick && (sh.key.B != k.B || sh.key.B2 != k.B2 || sh.key.B3 != k.B3) {
		return // (the kept one, repeated, is likelier the common view)
	}
	e.retireShare() // (the kept one, if any, is replaced)
	sh.valid, sh.key, sh.reuses, sh.repeats = true, *k, 0, 0
	sh.ents, sh.stats = sh.ents[:0], sh.stats[:0]
	sh.statOf = sh.statOf[:0]
	for range e.cands.list { // (repeatView names its candidates)
		sh.statOf = append(sh.statOf, -1)
	}
	note := func(i int) {
		switch cd := &e.cands.list[i]; {
		case cd.kind == kindRemoval:
		case cd.ent&preBit != 0:
			if cd.kind != kindFull {
				sh.ents = append(sh.ents, cd.ent)
			}
		default:
			e.cache.pin(cd.ent)
			sh.pins = append(sh.pins, cd.ent)
			if cd.kind != kindFull {
				sh.statOf[i] = int32(len(sh.stats))
				sh.stats = append(sh.stats, e.cache.entries[cd.ent].stats)
			}
		}
	}
	if e.sel.all {
		for i := range e.cands.list {
			note(i)
		}
	} else {
		for _, i := range e.sel.idx {
			note(int(i))
		}
	}
	sh.minus = append(sh.minus[:0], make([]uint32, len(sh.stats))...)
	// (copies: the client's sets may change once its Build is done)
	sh.base = append(sh.base[:0], baseMembers...)
	sh.m2 = append(sh.m2[:0], e.pc.members...)
	sh.m3 = append(sh.m3[:0], e.pc.members3...)
	sh.held = append(sh.held[:0], held...)
	sh.rel = append(sh.rel[:0], rel...)
	sh.need = e.packer.need
	sh.t, sh.view = t, k.tick
	sh.pkts.buf = append(sh.pkts.buf[:0], out.buf...)
	sh.pkts.ends = append(sh.pkts.ends[:0], out.ends...)
	sh.parts = append(sh.parts[:0], e.packer.parts...)
	sh.hdrBits = append(sh.hdrBits[:0], e.packer.hdrBits...)
	sh.info = *info
	sh.preHits = preHits
	sh.acctOn = e.acct != nil
	sh.owned, sh.simple = owned, e.pc.simple
	sh.pcSlots = appendBehindSlots(sh.pcSlots[:0], e.pc.behind, e.pc.behind3)
	sh.cands = append(sh.cands[:0], e.cands.list...)
	sh.bits, sh.gapK, sh.single = e.cands.bits, e.cands.gapK, e.packer.single
	sh.passes = append(sh.passes[:0], e.packer.passes...)
	sh.passParts = append(sh.passParts[:0], e.packer.passParts...)
	if sh.acctOn {
		sh.acct.set(&e.acct.Account)
		sh.acct.sub(&sh.acctPre)
	}
}

// noteAccount keeps the encoder's bit accounting before a Build that may be
// kept for repeats (keepShare takes the difference).
func (e *Encoder) noteAccount() {
	if e.acct != nil {
		e.share.acctPre.set(&e.acct.Account)
	}
}

// flushShare counts the pending repeats of the kept Build for the coding
// choice: in its pre-encoded records' sends, and its other delta records'
// counts (kept copies) in the encoder's.
func (e *Encoder) flushShare() {
	sh := &e.share
	if !sh.valid || sh.reuses == 0 {
		return
	}
	n := sh.reuses
	for _, x := range sh.ents {
		e.preSendN(x&^preBit, n)
	}
	for i := range sh.stats {
		if m := n - sh.minus[i]; m != 0 {
			e.shard.countN(&sh.stats[i], m)
		}
		sh.minus[i] = 0
	}
	sh.reuses = 0
}

// retireShare counts the kept Build's pending repeats and forgets it.
func (e *Encoder) retireShare() {
	sh := &e.share
	e.flushShare()
	if sh.valid && sh.repeats == 0 {
		sh.misses++
	} else if sh.valid {
		sh.misses = 0
	}
	sh.valid, sh.reuses, sh.repeats, sh.t = false, 0, 0, nil
	for _, x := range sh.pins {
		e.cache.unpin(x)
	}
	sh.pins = sh.pins[:0]
}

// appendBehindSlots appends the slots of the deferred entries of a
// Build's prediction views (predCtx.behind and behind3).
func appendBehindSlots(slots []uint32, behinds ...[]baseline.Behind) []uint32 {
	for _, bs := range behinds {
		for _, b := range bs {
			slots = append(slots, b.Slot)
		}
	}
	return slots
}
