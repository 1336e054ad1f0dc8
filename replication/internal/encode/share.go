package encode

import (
	"github.com/archenet/archenet/replication/internal/baseline"
	"github.com/archenet/archenet/replication/internal/entity"
	"github.com/archenet/archenet/replication/internal/wire"
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
// no entity with some. The datagrams are byte for byte those a full Build
// would write (TestSharedBuildsSameBytes).
//
// The coding's counts weigh each record as often as it is sent: a repeat
// adds one to its Build's pending sends, which go to its delta records'
// cache entries (listed in ents) before the encoder's next full Build,
// which may replace them, and when its counts are flushed. A Build that
// is not kept (another client's view) leaves the kept one in place: a
// client after it may still repeat that one, as long as no encode since
// replaced one of its records (the cache's hot count).

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
	// ents are the kept Build's delta records (cacheEntry indexes, preBit
	// for pre-encoded ones); hot the cache's hot count when it was kept
	ents []uint32
	hot  uint64
	// reuses counts the repeats whose sends are still to count
	// (flushShare), repeats all of them
	reuses, repeats uint32
	// misses counts the kept Builds in a row that were not repeated; from
	// shareMisses on, only one Build in shareSkip is kept (skip counts down)
	misses, skip int
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

// canShare reports whether t's Build may repeat or be repeated: no
// compression (per-client work on the bytes), a simple
// prediction context, no deferred entries or priorities, and no owner-only
// fields of its own.
func (e *Encoder) canShare(t *baseline.Tracker, behind []baseline.Behind) bool {
	if e.NoShare || e.Compression != nil || !e.pc.simple || len(behind) != 0 || len(t.Acc()) != 0 {
		return false
	}
	return e.ownerComps == 0 || t.ID == 0 || !e.cache.ownerHas(t.ID)
}

// tryRepeat repeats the encoder's last repeatable Build for t if its inputs
// are the same, writing out and recording t's view; false if they are not.
func (e *Encoder) tryRepeat(t *baseline.Tracker, k *shareKey, base *baseline.View, baseMembers, rel, held entity.Bitset, total int, opt *BuildOptions, h *wire.Header, out *Packets, info *BuildInfo) bool {
	sh := &e.share
	if !sh.valid || sh.t == t || sh.hot != e.cache.hot || sh.acctOn != (e.acct != nil) || sh.key != *k || total < sh.need || !entity.Same(sh.base, baseMembers) || !entity.Same(sh.m2, e.pc.members) ||
		!entity.Same(sh.m3, e.pc.members3) || !entity.Same(sh.rel, rel) || !entity.Same(sh.held, held) {
		return false
	}
	v := sh.t.At(sh.view)
	if v == nil {
		return false
	}
	// The datagrams, each with t's header (of the same length).
	hp := *h
	hp.Parts = len(sh.parts)
	w := &e.packer.partW
	for pi := range sh.parts {
		pt := &sh.parts[pi]
		hp.Part, hp.Count, hp.GapOrder = pi, pt.to-pt.from, pt.k
		w.Reset(w.Bytes())
		w.WriteBits(uint64(wire.KindSnapshot), 8)
		hp.AppendBits(w)
		if w.BitLen() != sh.hdrBits[pi] {
			out.Reset()
			return false
		}
		start := len(out.buf)
		out.buf = append(out.buf, sh.pkts.At(pi)...)
		overwriteBits(out.buf[start:], w.Bytes(), sh.hdrBits[pi])
		out.ends = append(out.ends, len(out.buf))
	}
	*info = sh.info
	info.Shared = true
	// The view, as recordView made the repeated Build's.
	nv := e.beginView(t, k.tick, base, opt, len(sh.parts))
	t.SetMembers(nv, sh.t.Members(v))
	if len(sh.parts) > 1 {
		t.SetRecs(nv, sh.t.Recs(v))
		acc := t.StartAcc()
		acc.Finish(t)
	} else {
		t.DropSpareRecs()
	}
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
func (e *Encoder) keepShare(t *baseline.Tracker, k *shareKey, baseMembers, rel, held entity.Bitset, out *Packets, info *BuildInfo, preHits int) {
	sh := &e.share
	if info.Deferred != 0 || info.Starved || e.packer.need == noShare {
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
	e.retireShare() // (the kept one, if any, is replaced)
	sh.valid, sh.key, sh.reuses, sh.repeats, sh.hot = true, *k, 0, 0, e.cache.hot
	sh.ents = sh.ents[:0]
	note := func(cd *cand) {
		if cd.kind != kindRemoval && cd.kind != kindFull {
			sh.ents = append(sh.ents, cd.ent)
		}
	}
	if e.sel.all {
		for i := range e.cands.list {
			note(&e.cands.list[i])
		}
	} else {
		for _, i := range e.sel.idx {
			note(&e.cands.list[i])
		}
	}
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

// flushShare counts the pending repeats of the kept Build in its delta
// records' sends: before a Build that may replace those records.
func (e *Encoder) flushShare() {
	sh := &e.share
	if !sh.valid || sh.reuses == 0 {
		return
	}
	n := sh.reuses
	for _, x := range sh.ents {
		if x&preBit != 0 {
			e.preSendN(x&^preBit, n)
		} else {
			e.cache.entries[x].sends += n // (≥ 1 already: listed in pending)
		}
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
}
