package encode

import (
	"github.com/archenet/archenet/replication/internal/codec"
	"github.com/archenet/archenet/replication/internal/entity"
	"github.com/archenet/archenet/replication/internal/store"
)

// Record kinds (package codec's), short.
const (
	kindDelta   = codec.KindDelta
	kindFull    = codec.KindFull
	kindRemoval = codec.KindRemoval
)

// record returns the record of slot (entry i of frame f, −1 to look it up)
// for key k, from the pre-encoded records, the cache, or encoded now, with
// its index (preBit | slot for a pre-encoded one).
func (e *Encoder) record(f *store.Frame, slot uint32, i int, k recKey) (*cacheEntry, uint32) {
	if ce, ok := e.preRecord(slot, &k); ok {
		return ce, preBit | slot
	}
	tag := e.cache.keyTag(k)
	if x := e.cache.find(slot, tag); x >= 0 {
		e.cache.CacheHits++
		return &e.cache.entries[x], uint32(x)
	}
	return e.encode(f, slot, i, k, tag)
}

// entry returns the cache entry of a candidate: its record in the
// encoder's cache or, with preBit, in the Group's pre-encoded records.
// Candidates hold an index, not a pointer, so appending them needs no GC
// write barrier.
func (e *Encoder) entry(cd *cand) *cacheEntry {
	if cd.ent&preBit != 0 {
		return &e.g.pre.entries[cd.ent&^preBit]
	}
	return &e.cache.entries[cd.ent]
}

// encode encodes the record of slot for key k (cache tag tag) into a cache
// entry, which it returns with its index.
func (e *Encoder) encode(f *store.Frame, slot uint32, i int, k recKey, tag uint64) (*cacheEntry, uint32) {
	e.cache.CacheMisses++
	x := e.cache.victim(slot, tag)
	ce := &e.cache.entries[x]
	if ce.sends != 0 {
		e.shard.countN(&ce.stats, ce.sends)
	}
	*ce = cacheEntry{}
	e.encodeInto(ce, f, slot, i, k)
	return ce, x
}

// encodeInto encodes the record of slot (entry i of frame f, −1 to look
// it up) for key k into ce, which is zero.
func (e *Encoder) encodeInto(ce *cacheEntry, f *store.Frame, slot uint32, i int, k recKey) {
	if i < 0 {
		i = f.Lookup(slot)
	}
	m := f.Metas[i]
	cur := f.EntityLanes(i)
	owner := k.owner
	if src := k.src; src != 0 {
		bf := e.r.Frame(src)
		bi := -1
		if bf != nil {
			bi = bf.Lookup(slot)
		}
		if bi >= 0 && bf.Metas[bi] == m {
			// (The views go into this frame's own struct: a slice stored
			// through a pointer argument costs a GC write barrier while
			// the GC marks.)
			v := codec.Views{Base: bf.EntityLanes(bi), Cur: cur}
			var ok bool
			if v.Prev, v.Third, ok = e.predictionViews(m, &k, slot); ok && e.deltaRecord(ce, m, &v, &k, f.Tick, slot) {
				return
			}
		}
	}
	// Full record.
	a := &e.coder.Arena
	a.Align()
	start := a.BitLen()
	codec.WriteFull(a, e.plans, m, cur, owner)
	ce.kind = kindFull
	ce.maskBits = 0
	ce.bodyOff = uint32(start / 8)
	ce.bodyBits = uint32(a.BitLen() - start)
	ce.short, ce.hasShort = a.Tail(start)
	if e.acct != nil {
		e.acct.noteFull(e, slot, ce, m, cur, owner)
	}
}

// deltaRecord encodes the delta of an entity from base (its value at the
// client's baseline) to cur into the arena — its field masks, then its body:
// with prediction on (pb ≠ 0) and the entity in view pb2 with the same Meta,
// the residuals against the linear extrapolation through its value there,
// else the residuals against base (v.Prev and v.Third: predictionViews).
// It reports false, leaving ce to a full record, when a residual cannot be
// coded or a full record is shorter. A value that changed and changed back
// since base gets a delta with empty field masks: it tells the client its
// value is current, so that a mirror that showed the intermediate value
// (from a datagram of another baseline chain) comes back. A few bits.
//
// With quad, positions of an entity that view pb3 also holds (value tick
// src3) are extrapolated quadratically; without, src3 ≠ 0 only measures
// what that would save.
func (e *Encoder) deltaRecord(ce *cacheEntry, m entity.Meta, v *codec.Views, k *recKey, S, slot uint32) bool {
	lc := &e.coder
	lc.Arena.Align()
	start := lc.Arena.BitLen()
	mask, maskPred := lc.DeltaMasks(m.Set, v.Base, v.Prev, v.Cur, k.owner)
	maskBits := lc.Arena.BitLen() - start
	lc.Arena.Align()
	bodyStart := lc.Arena.BitLen()
	res, ok := lc.DeltaBody(m.Set, v, codec.Extrap{Num: int64(S - k.pb), Den: int64(k.pb - k.pb2), Quad: k.quad}, &ce.stats)
	bodyBits := lc.Arena.BitLen() - bodyStart
	if !ok || maskBits+bodyBits >= lc.MinFullBits(m.Set) && maskBits+bodyBits >= lc.FullBits(m, v.Cur, k.owner) {
		lc.Arena.Truncate(start)
		return false
	}
	ce.mask = mask
	ce.maskOff, ce.maskBits = uint32(start/8), uint16(maskBits)
	// The receiver predicts the masks from its views: the groups that
	// changed from view pb2 to the baseline.
	ce.maskPred = v.Prev != nil && maskPred
	ce.stats.QuadGain = int16(max(-1<<15, min(res.QuadGain, 1<<15-1)))
	ce.stats.QuadN = uint8(min(res.QuadN, 255))
	ce.kind = kindDelta
	ce.bodyOff = uint32(bodyStart / 8)
	ce.bodyBits = uint32(bodyBits)
	ce.short, ce.hasShort = lc.Arena.Tail(bodyStart)
	if v.Prev != nil {
		ce.usePred = true
		ce.saved = int32(res.Plain - bodyBits)
		e.cache.Predicted++
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
func (e *Encoder) predictionViews(m entity.Meta, k *recKey, slot uint32) (prev, third []uint64, ok bool) {
	if k.pb == 0 || k.src2 == 0 {
		return nil, nil, true
	}
	pf := e.r.Frame(k.src2)
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
	tf := e.r.Frame(k.src3)
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
