package snapshot

import (
	"math/bits"
	"slices"

	"github.com/archenet/archenet/replication/bitio"

	"github.com/archenet/archenet/replication/schema"
)

// recordCache holds every record the encoder encoded for the current
// tick: two ways per slot, each tagged with the frame tick and the id of
// its record key (what the record depends on: the client's baseline value,
// the prediction views, the owner view), so that clients with the same key
// share the record's bits ("encode once, copy many"). The records' bits
// live in arena.
type recordCache struct {
	tick uint32 // tick the cache belongs to
	// keyIDs numbers the record keys of the tick (cache tags); lastKeys
	// and lastTags: the common keys of the last Build and their tags
	keyIDs   map[recKey]uint32
	lastKeys [3]recKey
	lastTags [3]uint64
	arena    bitio.Writer
	// entries holds two cache ways per slot (entries[2·slot+way]), tags
	// their tags (apart: a lookup reads 16 bytes, not two entries); evict
	// says which way of a slot the next encode replaces
	entries []cacheEntry
	tags    []uint64
	evict   []uint8
	present Bitset // slots present in the current frame
	// owned: slots of the current frame with an owner and owner-only
	// groups (their records depend on the client: see ownerView)
	owned Bitset
	// presentLayout is the frame layout present and owned were made for
	// (frames of one layout share their entries and Metas)
	presentLayout uint32
	gmasks        []uint64 // per component of a delta: its changed groups
	compBody      []uint32 // per component of a delta: its body bits (accounting)

	// Cache statistics since the last Begin.
	CacheHits, CacheMisses int
	// Predicted counts records (since the last Begin) whose residuals are
	// against the linear extrapolation.
	Predicted int
}

type cacheEntry struct {
	usePred  bool     // the body's residuals are against the extrapolation
	maskPred bool     // (with usePred) the field masks are the predicted ones: sent as one bit
	saved    int32    // bits that prediction saved against the plain residuals (< 0: cost)
	stats    recStats // its residuals, counted for each client it is sent to
	sends    uint32   // times sent since its stats were last counted
	kind     uint8    // kindDelta or kindFull
	maskBits uint16
	mask     uint64 // mask bits when maskBits ≤ 64
	maskOff  uint32 // arena offset of the mask when maskBits > 64
	bodyOff  uint32 // arena byte offset of the body
	bodyBits uint32
	// short holds the body itself when hasShort (at most 56 bits): the
	// datagram writer takes it from here, not from the arena
	short    uint64
	hasShort bool
	arena    uint8 // of a pre-encoded record: its encoder's arena (pre.go)
}

// begin prepares the per-tick cache for the newest frame.
func (e *Encoder) begin() {
	f := e.w.Current()
	if f == nil || f.Tick == e.tick {
		return
	}
	e.tick = f.Tick
	clear(e.keyIDs)
	e.lastTags = [3]uint64{}
	e.arena.Reset(e.arena.Bytes())
	e.CacheHits, e.CacheMisses, e.Predicted = 0, 0, 0
	if e.acct != nil {
		e.acct.begin()
	}
	e.setCoding(e.w.codes.coding)
	e.quad = e.w.codes.quad
	if n := len(e.w.changedAt); len(e.evict) < n {
		e.entries = append(e.entries, make([]cacheEntry, 2*n-len(e.entries))...)
		e.tags = append(e.tags, make([]uint64, 2*n-len(e.tags))...)
		e.evict = append(e.evict, make([]uint8, n-len(e.evict))...)
	}
	if f.layout == e.presentLayout {
		return // (same entries and Metas as when present and owned were made)
	}
	e.presentLayout = f.layout
	e.present.Reset()
	e.owned.Reset()
	for i, s := range f.Slots {
		e.present.Set(s)
		if m := f.Metas[i]; m.Owner != 0 && m.Set&e.ownerComps != 0 {
			e.owned.Set(s)
		}
	}
}

// setCoding sets the residual coding of the tick's records (and its order
// table).
func (e *Encoder) setCoding(c Coding) {
	e.coding = c
	for cl := range numClasses {
		for ctx := range maxCodeCtx + 1 {
			e.orders[cl][ctx] = uint8(c.orderCtx(cl, ctx))
		}
	}
}

// entry returns the cache entry of a candidate: its record in the
// encoder's cache or, with preBit, in the World's pre-encoded records.
// Candidates hold an index, not a pointer, so appending them needs no GC
// write barrier.
func (e *Encoder) entry(cd *cand) *cacheEntry {
	if cd.ent&preBit != 0 {
		return &e.w.pre.entries[cd.ent&^preBit]
	}
	return &e.entries[cd.ent]
}

// indexOf returns the index in rc.entries of ce, one of slot's entries.
func (rc *recordCache) indexOf(slot uint32, ce *cacheEntry) uint32 {
	if ce == &rc.entries[2*slot] {
		return 2 * slot
	}
	return 2*slot + 1
}

// find returns the index in rc.entries of slot's record of tag, or −1.
func (rc *recordCache) find(slot uint32, tag uint64) int {
	i := 2 * int(slot)
	switch tag {
	case rc.tags[i]:
		return i
	case rc.tags[i+1]:
		return i + 1
	}
	return -1
}

// record returns the cached record of slot (entry i of frame f, −1 to look
// it up) for key k.
func (e *Encoder) record(f *Frame, slot uint32, i int, k recKey) (*cacheEntry, uint32) {
	if ce, ok := e.preRecord(slot, &k); ok {
		return ce, preBit | slot
	}
	tag := e.keyTag(k)
	if x := e.find(slot, tag); x >= 0 {
		e.CacheHits++
		return &e.entries[x], uint32(x)
	}
	return e.encode(f, slot, i, k, tag)
}

// keyTag returns the cache tag of key k in the current tick: the tick and
// the key's number among the tick's keys.
func (rc *recordCache) keyTag(k recKey) uint64 {
	id, ok := rc.keyIDs[k]
	if !ok {
		id = uint32(len(rc.keyIDs)) + 1
		rc.keyIDs[k] = id
	}
	return uint64(rc.tick)<<32 | uint64(id)
}

// setTags sets the tags of the packet's common keys (pc.keys), reusing
// the last Build's where the keys are the same.
func (e *Encoder) setTags() {
	for i := range e.pc.keys {
		if e.lastTags[i] == 0 || e.lastKeys[i] != e.pc.keys[i] {
			e.lastKeys[i], e.lastTags[i] = e.pc.keys[i], e.keyTag(e.pc.keys[i])
		}
		e.pc.tags[i] = e.lastTags[i]
	}
}

// entryTick returns the frame tick of a cache entry (0: none).
func (rc *recordCache) entryTick(x uint32) uint32 { return uint32(rc.tags[x] >> 32) }

// memberBits estimates a record's size in a datagram, for a slot the
// client holds (gap code aside): kind, masks unless predicted, body.
func memberBits(ce *cacheEntry) int {
	b := int(ce.bodyBits) + 4
	if ce.kind == kindDelta && !ce.maskPred {
		b += int(ce.maskBits) - 1
	} else if ce.kind == kindDelta {
		b -= 3
	}
	return b
}

// encode encodes the record of slot for key k (cache tag tag) into a cache
// entry, which it returns with its index.
func (e *Encoder) encode(f *Frame, slot uint32, i int, k recKey, tag uint64) (*cacheEntry, uint32) {
	e.CacheMisses++
	x := 2*slot + uint32(e.evict[slot])
	e.evict[slot] ^= 1
	ce := &e.entries[x]
	if ce.sends != 0 {
		e.shard.countN(&ce.stats, ce.sends)
	}
	*ce = cacheEntry{}
	e.tags[x] = tag
	e.encodeInto(ce, f, slot, i, k)
	return ce, x
}

// encodeInto encodes the record of slot (entry i of frame f, −1 to look
// it up) for key k into ce, which is zero.
func (e *Encoder) encodeInto(ce *cacheEntry, f *Frame, slot uint32, i int, k recKey) {
	if i < 0 {
		i = f.Lookup(slot)
	}
	m := f.Metas[i]
	cur := f.EntityLanes(i)
	owner := k.owner
	if src := k.src; src != 0 {
		bf := e.w.Frame(src)
		bi := -1
		if bf != nil {
			bi = bf.Lookup(slot)
		}
		if bi >= 0 && bf.Metas[bi] == m {
			// (The views go into this frame's own struct: a slice stored
			// through a pointer argument costs a GC write barrier while
			// the GC marks.)
			v := recViews{base: bf.EntityLanes(bi), cur: cur}
			var ok bool
			if v.prev, v.third, ok = e.predictionViews(m, &k, slot); ok && e.deltaRecord(ce, m, &v, &k, f.Tick, slot) {
				return
			}
		}
	}
	// Full record.
	e.arena.Align()
	start := e.arena.BitLen()
	writeFull(&e.arena, e.plans, m, cur, owner)
	ce.kind = kindFull
	ce.maskBits = 0
	ce.bodyOff = uint32(start / 8)
	ce.bodyBits = uint32(e.arena.BitLen() - start)
	ce.short, ce.hasShort = e.arena.Tail(start)
	if e.acct != nil {
		e.acct.noteFull(e, slot, ce, m, cur, owner)
	}
}

// deltaRecord encodes the delta of an entity from base (its value at the
// client's baseline) to cur into the arena — its field masks, then its body:
// with prediction on (pb ≠ 0) and the entity in view pb2 with the same Meta,
// the residuals against the linear extrapolation through its value there,
// else the residuals against base (v.prev and v.third: predictionViews).
// It reports false, leaving ce to a full record, when a residual cannot be
// coded or a full record is shorter. A value
// that changed and changed back since base gets a delta with empty field masks: it tells the client its value is
// current, so that a mirror that showed the intermediate value (from a
// datagram of another baseline chain) comes back. A few bits.
//
// With quad, positions of an entity that view pb3 also holds (value tick
// src3) are extrapolated quadratically; without, src3 ≠ 0 only measures
// what that would save.
func (e *Encoder) deltaRecord(ce *cacheEntry, m Meta, v *recViews, k *recKey, S, slot uint32) bool {
	e.arena.Align()
	start := e.arena.BitLen()
	mask, maskPred := e.deltaMasks(m.Set, v.base, v.prev, v.cur, k.owner)
	maskBits := e.arena.BitLen() - start
	e.arena.Align()
	bodyStart := e.arena.BitLen()
	x := bodyCtx{extrap: extrap{num: int64(S - k.pb), den: int64(k.pb - k.pb2), quad: k.quad}, st: &ce.stats}
	ok := e.deltaBody(m.Set, v, &x)
	bodyBits := e.arena.BitLen() - bodyStart
	if !ok || maskBits+bodyBits >= e.minFullBits(m.Set) && maskBits+bodyBits >= e.fullBits(m, v.cur, k.owner) {
		e.arena.Truncate(start)
		return false
	}
	ce.mask = mask
	ce.maskOff, ce.maskBits = uint32(start/8), uint16(maskBits)
	// The receiver predicts the masks from its views: the groups that
	// changed from view pb2 to the baseline.
	ce.maskPred = v.prev != nil && maskPred
	ce.stats.quadGain = int16(max(-1<<15, min(x.res.quadGain, 1<<15-1)))
	ce.stats.quadN = uint8(min(x.res.quadN, 255))
	ce.kind = kindDelta
	ce.bodyOff = uint32(bodyStart / 8)
	ce.bodyBits = uint32(bodyBits)
	ce.short, ce.hasShort = e.arena.Tail(bodyStart)
	if v.prev != nil {
		ce.usePred = true
		ce.saved = int32(x.res.plain - bodyBits)
		e.Predicted++
	}
	if e.acct != nil {
		e.acct.noteDelta(e, slot, ce, m.Set, k.owner)
	}
	return true
}

// predictionViews returns the entity's values in the prediction views of k
// (prev and third; nil where the entity has another Meta there, or
// prediction is off). ok is false when the client's view holds a value the
// encoder no longer has (or never had): then no delta is coded.
func (e *Encoder) predictionViews(m Meta, k *recKey, slot uint32) (prev, third []uint64, ok bool) {
	if k.pb == 0 || k.src2 == 0 {
		return nil, nil, true
	}
	pf := e.w.Frame(k.src2)
	if pf == nil {
		return nil, nil, false // the receiver would predict from a value gone from the ring
	}
	pi := pf.Lookup(slot)
	if pi < 0 {
		return nil, nil, false
	}
	if pf.Metas[pi] != m {
		return nil, nil, true
	}
	prev = pf.EntityLanes(pi)
	if k.src3 == 0 {
		return prev, nil, true
	}
	tf := e.w.Frame(k.src3)
	ti := -1
	if tf != nil {
		ti = tf.Lookup(slot)
	}
	switch {
	case ti >= 0 && tf.Metas[ti] == m:
		third = tf.EntityLanes(ti)
	case ti < 0 && k.quad:
		return nil, nil, false // the receiver holds a value the encoder does not
	}
	return prev, third, true
}

// sameGroup reports whether group g's lanes are equal in a and b.
func sameGroup(g *schema.Group, a, b []uint64) bool {
	if g.Count == 1 {
		return a[g.First] == b[g.First]
	}
	return slices.Equal(a[g.First:g.First+g.Count], b[g.First:g.First+g.Count])
}

// changedGroups returns the groups of p whose lanes differ between a and b
// (owner-only groups only when owner).
func changedGroups(p *schema.Plan, a, b []uint64, owner bool) uint64 {
	var gm uint64
	groups := p.Groups()
	for gi := range groups {
		g := &groups[gi]
		if !owner && g.OwnerOnly {
			continue
		}
		if !sameGroup(g, a, b) {
			gm |= 1 << gi
		}
	}
	return gm
}

// minFullBits is a lower bound of a full record's size: when a delta is
// below it, the full encoding need not be measured.
func (e *Encoder) minFullBits(set uint64) int {
	n := 3 // generation, owner, component set: at least 1 bit each
	for s := set; s != 0; s &= s - 1 {
		n += e.plans[bits.TrailingZeros64(s)].MinBits()
	}
	return n
}

func (e *Encoder) fullBits(m Meta, lanes []uint64, owner bool) int {
	e.scratch3.Reset(e.scratch3.Bytes())
	writeFull(&e.scratch3, e.plans, m, lanes, owner)
	return e.scratch3.BitLen()
}
