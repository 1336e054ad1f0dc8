package snapshot

import (
	"math/bits"
	"sort"

	"github.com/archenet/archenet/replication/bitio"
	"github.com/archenet/archenet/replication/schema"
)

// DefaultMTU is the default maximum datagram size in bytes: safe on every
// path (QUIC guarantees 1200-byte UDP payloads before path MTU discovery).
const DefaultMTU = 1200

// KindSnapshot is the first byte of a snapshot datagram; bit 7 of that byte
// flags a zstd-compressed body.
const (
	KindSnapshot   byte = 0x01
	FlagCompressed byte = 0x80
)

// Encoder builds snapshot datagrams for many clients from one [World]. It
// caches each encoded record per (entity, baseline tick, owner view) for the
// current tick, so clients that acked the same baseline cost only selection
// and bit copies ("encode once, copy many"). One Encoder per server; not
// safe for concurrent use.
type Encoder struct {
	w          *World
	plans      []*schema.Plan
	ownerComps uint64 // components that have owner-only groups

	tick uint32 // tick the cache belongs to
	// keyIDs numbers the record keys of the tick (cache tags); lastKeys
	// and lastTags: the common keys of the last Build and their tags
	keyIDs   map[recKey]uint32
	lastKeys [3]recKey
	lastTags [3]uint64
	arena    bitio.Writer
	// entries holds two cache ways per slot (entries[2·slot+way]); evict
	// says which way of a slot the next encode replaces
	entries []cacheEntry
	evict   []uint8
	present Bitset // slots present in the current frame
	// owned: slots of the current frame with an owner and owner-only
	// groups (their records depend on the client: see ownerView)
	owned Bitset
	// presentLayout is the frame layout present and owned were made for
	// (frames of one layout share their entries and Metas)
	presentLayout uint32

	// scratch, reused by Build
	scratch3 bitio.Writer
	partW    bitio.Writer
	// partHdrBits: the kind byte and header bits of the part in partW
	partHdrBits int
	gmasks      []uint64 // per component of a delta: its changed groups
	compBody    []uint32 // per component of a delta: its body bits (accounting)
	pc          predCtx
	cands       []cand
	sel         []int    // selected candidates, slot order (unless selAll)
	selAll      bool     // every candidate is selected (sel is not filled)
	candBits    int      // the candidates' estimated bits together
	slotBuf     []uint32 // (collectSimple)
	packed      []int
	parts       []part
	members     Bitset
	candGapK    uint // the best gap order for all of e.cands

	// coding is the residual coding of the current tick's records; quad:
	// its packets extrapolate positions quadratically through a third
	// view where they can. Both are the World's choice for the tick, from
	// what the records its encoders sent showed (shard: this encoder's
	// count, see coding.go).
	coding Coding
	quad   bool
	shard  *codeShard
	ops    []planOps // per component: its plan as the delta encoder reads it

	// touchOn: collect reads ahead what the packet's records are built
	// from (large worlds), from the current frame and the views'.
	touchAt     int // frame size from which to (touchEntities)
	touchOn     bool
	touchFrames [4]*Frame
	touched     uint64 // (the reads' sum, so that they are not dropped)

	// Compression, when set, zstd-compresses each datagram body that it
	// strictly shrinks (see [Compressor]). Nil: never compress.
	Compression *Compressor

	// Cache statistics since the last Begin.
	CacheHits, CacheMisses int
	// Predicted counts records (since the last Begin) whose residuals are
	// against the linear extrapolation.
	Predicted int
	// NoPrediction turns the linear-extrapolation predictor off (it is on by
	// default: each record uses it only when it is shorter).
	NoPrediction bool

	acct *bitAccount // nil: accounting off (account.go)
}

type cacheEntry struct {
	// tag: the frame tick the entry is valid for (high 32 bits) and its
	// record key's id in that tick (see Encoder.keyTag)
	tag      uint64
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

// NewEncoder returns an encoder over w.
func NewEncoder(w *World) *Encoder {
	e := &Encoder{w: w, plans: w.reg.Plans(), coding: defaultCoding, touchAt: touchEntities, keyIDs: map[recKey]uint32{}}
	e.shard = w.codes.newShard(e)
	for _, p := range e.plans {
		if p.OwnerOnlyMask() != 0 {
			e.ownerComps |= 1 << p.ID
		}
		e.ops = append(e.ops, newPlanOps(p))
	}
	return e
}

// EndTick counts the residuals of the records e sent this tick for the
// World's choice of the next ticks' coding, while they are still in this
// goroutine's cache; the World's Commit does it otherwise. Call it after the
// tick's last Build on e (not concurrently with it).
func (e *Encoder) EndTick() { e.shard.flush() }

// World returns the encoder's world.
func (e *Encoder) World() *World { return e.w }

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
	e.coding, e.quad = e.w.codes.coding, e.w.codes.quad
	if n := len(e.w.changedAt); len(e.evict) < n {
		e.entries = append(e.entries, make([]cacheEntry, 2*n-len(e.entries))...)
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

// ownerView reports whether c sees slot (in frame f) with its owner-only
// fields.
func (e *Encoder) ownerView(c *Client, f *Frame, slot uint32) bool {
	if c.ID == 0 || e.ownerComps == 0 {
		return false
	}
	m := f.Metas[f.Lookup(slot)]
	return m.Owner == c.ID && m.Set&e.ownerComps != 0
}

// entry returns the cache entry of a candidate. Candidates hold an index,
// not a pointer, so appending them needs no GC write barrier.
func (e *Encoder) entry(cd *cand) *cacheEntry { return &e.entries[cd.ent] }

// indexOf returns the index in e.entries of ce, one of slot's entries.
func (e *Encoder) indexOf(slot uint32, ce *cacheEntry) uint32 {
	if ce == &e.entries[2*slot] {
		return 2 * slot
	}
	return 2*slot + 1
}

// find returns the index in e.entries of slot's record of tag, or −1.
func (e *Encoder) find(slot uint32, tag uint64) int {
	i := 2 * int(slot)
	switch tag {
	case e.entries[i].tag:
		return i
	case e.entries[i+1].tag:
		return i + 1
	}
	return -1
}

// predCtx is a packet's prediction context: the baseline view B and its
// own baseline B2 (both held by the client); [predCtx.key] finds the tick
// whose value the client's view B2 holds for an entity. With on, a delta record of an entity that view B2 holds with
// the same Meta is coded against the linear extrapolation through B2 and B;
// other delta records against B alone (the receiver tells them apart by its
// view B2).
type predCtx struct {
	on      bool
	B, B2   uint32
	members Bitset
	behind  []behindEntry
	// B3 (0 = none) is the view as far before B2 as B2 is before B, when
	// the client acked it: positions may be extrapolated quadratically
	// through B3, B2 and B (quad).
	B3       uint32
	quad     bool
	members3 Bitset
	behind3  []behindEntry
	// simple: neither view has deferred entries; keys: see setKeys.
	simple bool
	keys   [3]recKey
	tags   [3]uint64 // the keys' cache tags (Encoder.setTags)
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
// baseline tick src, with the packet's prediction context pc.
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
	k.src2 = valueTick(pc.B2, pc.behind, slot)
	if pc.B3 != 0 && pc.members3.Has(slot) {
		k.pb3, k.quad = pc.B3, pc.quad
		k.src3 = valueTick(pc.B3, pc.behind3, slot)
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

// record returns the cached record of slot (entry i of frame f, −1 to look
// it up) for key k.
func (e *Encoder) record(f *Frame, slot uint32, i int, k recKey) (*cacheEntry, uint32) {
	tag := e.keyTag(k)
	if x := e.find(slot, tag); x >= 0 {
		e.CacheHits++
		return &e.entries[x], uint32(x)
	}
	return e.encode(f, slot, i, k, tag)
}

// keyTag returns the cache tag of key k in the current tick: the tick and
// the key's number among the tick's keys.
func (e *Encoder) keyTag(k recKey) uint64 {
	id, ok := e.keyIDs[k]
	if !ok {
		id = uint32(len(e.keyIDs)) + 1
		e.keyIDs[k] = id
	}
	return uint64(e.tick)<<32 | uint64(id)
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
func (ce *cacheEntry) entryTick() uint32 { return uint32(ce.tag >> 32) }

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
	*ce = cacheEntry{tag: tag}
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
			if e.deltaRecord(ce, m, &recViews{base: bf.EntityLanes(bi), cur: cur}, &k, f.Tick, slot) {
				return ce, x
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
	return ce, x
}

// deltaRecord encodes the delta of an entity from base (its value at the
// client's baseline) to cur into the arena — its field masks, then its body:
// with prediction on (pb ≠ 0) and the entity in view pb2 with the same Meta,
// the residuals against the linear extrapolation through its value there,
// else the residuals against base. It reports false, leaving ce to a full
// record, when a residual cannot be coded, the client's view pb2 holds a
// value the encoder no longer has, or a full record is shorter. A value
// that changed and changed back since base gets a delta with empty field masks: it tells the client its value is
// current, so that a mirror that showed the intermediate value (from a
// datagram of another baseline chain) comes back. A few bits.
//
// With quad, positions of an entity that view pb3 also holds (value tick
// src3) are extrapolated quadratically; without, src3 ≠ 0 only measures
// what that would save.
func (e *Encoder) deltaRecord(ce *cacheEntry, m Meta, v *recViews, k *recKey, S, slot uint32) bool {
	if !e.predictionViews(m, v, k, slot) {
		return false
	}
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

// predictionViews sets v.prev and v.third to the entity's values in the
// prediction views of k (left nil where the entity has another Meta there,
// or prediction is off). It reports false when the client's view holds a
// value the encoder no longer has (or never had): then no delta is coded.
func (e *Encoder) predictionViews(m Meta, v *recViews, k *recKey, slot uint32) bool {
	if k.pb == 0 || k.src2 == 0 {
		return true
	}
	pf := e.w.Frame(k.src2)
	if pf == nil {
		return false // the receiver would predict from a value gone from the ring
	}
	pi := pf.Lookup(slot)
	if pi < 0 {
		return false
	}
	if pf.Metas[pi] != m {
		return true
	}
	v.prev = pf.EntityLanes(pi)
	if k.src3 == 0 {
		return true
	}
	tf := e.w.Frame(k.src3)
	ti := -1
	if tf != nil {
		ti = tf.Lookup(slot)
	}
	switch {
	case ti >= 0 && tf.Metas[ti] == m:
		v.third = tf.EntityLanes(ti)
	case ti < 0 && k.quad:
		return false // the receiver holds a value the encoder does not
	}
	return true
}

// sameGroup reports whether group g's lanes are equal in a and b.
func sameGroup(g *schema.Group, a, b []uint64) bool {
	if g.Count == 1 {
		return a[g.First] == b[g.First]
	}
	return equalLanes(a[g.First:g.First+g.Count], b[g.First:g.First+g.Count])
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

// BuildOptions selects what one tick's datagrams carry.
type BuildOptions struct {
	// Budget is the largest datagram in bytes; 0 means DefaultMTU.
	Budget int
	// MaxParts bounds the datagrams of the tick; 0 means MaxParts. The
	// client's byte rate ([Client.SetRate]) bounds their total: the
	// highest-priority records that fit are sent; the rest stay changed
	// against the baseline and gain priority.
	MaxParts int
	// Relevant is the client's interest set; nil means every entity.
	Relevant Bitset
	// Weights is the relevance weight per slot added to the client's priority
	// accumulator each tick a changed entity waits; nil or a missing slot
	// means 1.
	Weights []float32
	// InputAck, when HasInputAck is set, tells the client the newest input
	// tick the server has applied for it (the reconciliation point of its
	// predicted entities); it rides in every datagram's header.
	InputAck    uint32
	HasInputAck bool
	// InputHeld and InputDepth, when HasInputFeedback is set (and
	// HasInputAck), are the input feedback for the client's sender and
	// clock (input.Log.Feedback): the newest input tick the server holds
	// (the client may stop resending up to it) and how many ticks of input
	// it held beyond the one it consumed (negative when inputs arrive late).
	// InputHeld is sent relative to InputAck and clamped to ±MaxInputLead
	// of it; InputDepth is clamped to ±MaxInputDepth.
	InputHeld        uint32
	InputDepth       int
	HasInputFeedback bool
}

// Bounds of the input feedback a datagram carries.
const (
	MaxInputLead  = 1 << 16 // |InputHeld − InputAck|
	MaxInputDepth = 1023    // |InputDepth|
)

// BuildInfo reports what one tick's datagrams carry.
type BuildInfo struct {
	Tick, Baseline uint32 // Baseline 0 = against an empty world
	Parts          int    // datagrams written
	Deltas, Fulls  int
	// PredictedDeltas counts deltas coded against the extrapolation.
	PredictedDeltas int
	predSaved       int
	Removals        int
	Deferred        int // changed records left for later by the budget
	Bytes           int // all datagrams together
	// HeaderBits is what the datagrams' kind bytes and headers took
	// together (the per-datagram overhead).
	HeaderBits int
	Compressed int  // datagrams whose body zstd shrank
	Starved    bool // the client's byte rate left no budget: nothing built
}

// Packets holds the datagrams of one tick, back to back in one reusable
// buffer. The zero value is ready to use.
type Packets struct {
	buf  []byte
	ends []int
}

// Reset empties p, keeping its memory.
func (p *Packets) Reset() { p.buf, p.ends = p.buf[:0], p.ends[:0] }

// Len returns the number of datagrams.
func (p *Packets) Len() int { return len(p.ends) }

// At returns datagram i; it stays valid until p is reset.
func (p *Packets) At(i int) []byte {
	start := 0
	if i > 0 {
		start = p.ends[i-1]
	}
	return p.buf[start:p.ends[i]:p.ends[i]]
}

// Bytes returns the total size of the datagrams.
func (p *Packets) Bytes() int { return len(p.buf) }

// MinBudget is the smallest datagram budget worth building; with less the
// tick is skipped for that client (its changes wait with rising priority).
const MinBudget = 48

// Build writes the snapshot datagrams of the newest frame for client c into
// out (reset first) and reports what they carry. It picks c's baseline (the
// newest acked view still in the ring; none → full state against an empty
// world), selects changed, new and removed entities by priority within c's
// byte budget, packs them in slot order into as few datagrams of at most
// opt.Budget bytes as they need, and records what c will hold depending on
// which datagrams arrive, for use as a later baseline once c acks them.
// Every datagram is decodable on its own. Allocation-free in steady state.
func (e *Encoder) Build(c *Client, opt BuildOptions, out *Packets) BuildInfo {
	out.Reset()
	e.begin()
	f := e.w.Current()
	info := BuildInfo{}
	if f == nil {
		return info
	}
	S := f.Tick
	info.Tick = S
	mtu := opt.Budget
	if mtu <= 0 {
		mtu = DefaultMTU
	}
	maxParts := opt.MaxParts
	if maxParts <= 0 || maxParts > MaxParts {
		maxParts = MaxParts
	}
	total := c.budget(maxParts * mtu)
	if total < MinBudget || mtu < MinBudget {
		info.Starved = true
		return info // nothing worth sending this tick
	}

	base, changed := e.pickBaseline(c, S)
	var B uint32
	var baseMembers Bitset
	var behind []behindEntry
	if base != nil {
		B, baseMembers, behind = base.tick, c.membersOf(base), base.behind
	}
	info.Baseline = B
	e.setupPrediction(c, base, S)
	e.pc.setKeys(B)
	e.setTags()
	e.touchOn = len(f.Slots) >= e.touchAt
	if e.touchOn {
		e.touchFrames = [4]*Frame{f, e.w.Frame(B)}
		if e.pc.on {
			e.touchFrames[2], e.touchFrames[3] = e.w.Frame(e.pc.B2), e.w.Frame(e.pc.B3)
		}
	}
	e.collect(&candSource{c: c, f: f, rel: e.relevant(opt.Relevant), base: baseMembers, behind: behind, changed: changed, B: B})

	hdr := e.header(S, B, base, opt)
	e.selectRecords(c, opt.Weights, total, mtu, &hdr)
	e.emit(out, mtu, maxParts, total, &hdr, &info)
	e.recordView(c, S, base, opt, &info)
	info.Bytes = out.Bytes()
	if e.pc.on && info.Deltas >= 8 {
		// Prediction pays if it saved bits.
		c.predOff = info.predSaved <= 0
	}
	c.spend(info.Bytes)
	c.Sent++
	return info
}

// pickBaseline returns c's newest acked view whose frame is still in the ring
// and the slots changed since it; nil if there is none.
func (e *Encoder) pickBaseline(c *Client, S uint32) (*view, Bitset) {
	var base *view
	// The newest acked view, unless it is gone (then the newest left).
	if v := &c.views[c.bestAck%uint32(len(c.views))]; c.bestAck != 0 && v.used && v.acked && v.tick == c.bestAck && int32(S-v.tick) > 0 && e.w.Frame(v.tick) != nil {
		base = v
	} else {
		for i := range c.views {
			v := &c.views[i]
			if v.used && v.acked && v.tick != S && int32(S-v.tick) > 0 && e.w.Frame(v.tick) != nil {
				if base == nil || int32(v.tick-base.tick) > 0 {
					base = v
				}
			}
		}
	}
	if base == nil {
		return nil, nil
	}
	changed, ok := e.w.ChangedSince(base.tick)
	if !ok {
		return nil, nil
	}
	return base, changed
}

// setupPrediction decides whether this tick's deltas may be coded against the
// extrapolation through the baseline's own baseline (B2), which the client
// also holds as long as no newer tick can have replaced it in its ring.
func (e *Encoder) setupPrediction(c *Client, base *view, S uint32) {
	e.pc = predCtx{}
	// A client whose recent packets gained nothing from prediction (random
	// motion) gets it only on every 16th packet, as a probe.
	if base == nil || e.NoPrediction || base.base == 0 || (c.predOff && c.Sent%16 != 0) {
		return
	}
	B, B2 := base.tick, base.base
	// The extrapolation is through the baseline's own baseline, or a newer
	// view the client acked (exact, like the baseline) two to four ticks
	// before the baseline if there is one: a velocity from two ticks is
	// still smooth, and closer to the baseline's.
	for span := uint32(2); span <= 4; span++ {
		p := B - span
		if int32(p-B2) <= 0 {
			break
		}
		if v := &c.views[p%uint32(len(c.views))]; v.used && v.tick == p && v.acked {
			B2 = p
			break
		}
	}
	v2 := &c.views[B2%uint32(len(c.views))]
	if v2.used && v2.tick == B2 && int32(B-B2) > 0 && int32(S-B2) < int32(len(c.views)) {
		e.pc = predCtx{on: true, B: B, B2: B2, members: c.membersOf(v2), behind: v2.behind}
		B3 := B2 - (B - B2)
		if v3 := &c.views[B3%uint32(len(c.views))]; B3 != 0 && int32(B2-B3) > 0 && v3.used && v3.tick == B3 && v3.acked && int32(S-B3) < int32(len(c.views)) {
			e.pc.B3, e.pc.quad = B3, e.quad
			e.pc.members3, e.pc.behind3 = c.membersOf(v3), v3.behind
		}
	}
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
	for wi := 0; wi < words || bi < len(behind); wi++ {
		r, m := rel.word(wi), baseMembers.word(wi)
		if r|m == 0 && (bi == len(behind) || int(behind[bi].slot>>6) != wi) {
			continue // (most words of a big world: nothing the client sees or holds)
		}
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
			e.touch(fast, wi)
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
		sum += e.entries[2*slot].tag ^ e.entries[2*slot+1].tag
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
	}
	e.touched += sum
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

// header returns the fields every datagram of the tick shares.
func (e *Encoder) header(S, B uint32, base *view, opt BuildOptions) Header {
	h := Header{Tick: S, Parts: 1, Coding: defaultCoding, Quad: e.pc.on && e.pc.quad}
	if B != 0 {
		h.Coding = e.coding
		h.CodingInherited = base.coding == e.coding
		h.Baseline = S - B
		h.Predict = e.pc.on
		if e.pc.on {
			h.PredictGap = e.pc.B - e.pc.B2 - 1
		}
	}
	if opt.HasInputAck {
		h.HasInputAck = true
		// The ack moves by a few ticks per packet: relative to the one the
		// baseline view carried when there is one, else in full.
		h.InputAck = opt.InputAck
		if base != nil && base.hasInputAck {
			if d := int64(int32(opt.InputAck - base.inputAck)); d >= -MaxInputLead && d <= MaxInputLead {
				h.InputAckRelative, h.InputAck = true, uint32(int32(d))
			}
		}
		if opt.HasInputFeedback {
			h.HasInputFeedback = true
			h.InputLead = max(-MaxInputLead, min(MaxInputLead, int64(int32(opt.InputHeld-opt.InputAck))))
			h.InputDepth = int64(max(-MaxInputDepth, min(MaxInputDepth, opt.InputDepth)))
		}
	}
	return h
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

// recordView records the view c will hold if every datagram of tick S
// arrives, and which records each datagram carried, so that an ack naming
// only some of them ([Client.Ack]) yields the exact view.
func (e *Encoder) recordView(c *Client, S uint32, base *view, opt BuildOptions, info *BuildInfo) {
	var B uint32
	if base != nil {
		B = base.tick
	}
	nv := c.viewFor(S)
	nv.base = B
	nv.coding = defaultCoding
	if B != 0 {
		nv.coding = e.coding
	}
	nv.inputAck, nv.hasInputAck = opt.InputAck, opt.HasInputAck
	nv.parts = len(e.parts)
	c.shareMembers(nv, base) // (copied only if this tick changes them)
	nv.behind = shrunk(nv.behind)
	nv.recs = shrunk(nv.recs)
	multi := len(e.parts) > 1 // (a one-datagram tick is acked whole or not at all)
	acc := c.startAcc()
	if e.selAll && !multi {
		// Every candidate went out in one datagram (the common tick).
		for i := range e.cands {
			cd := &e.cands[i]
			e.tally(cd, info)
			if cd.kind == kindRemoval {
				c.setMember(nv, cd.slot, false)
			} else if !cd.mem {
				c.setMember(nv, cd.slot, true) // (members already has the others)
			}
		}
		if len(acc.old) > 0 { // (a client that never had to defer has none)
			acc.finish(c)
		}
		return
	}
	si, pi := 0, 0
	for i := range e.cands {
		cd := &e.cands[i]
		if e.selAll || (si < len(e.sel) && e.sel[si] == i) {
			for e.parts[pi].to <= si {
				pi++
			}
			si++
			e.tally(cd, info)
			if multi {
				nv.recs = append(nv.recs, sentRec{slot: cd.slot, src: cd.src, part: uint8(pi), kind: cd.kind, mem: cd.mem})
			}
			c.setMember(nv, cd.slot, cd.kind != kindRemoval)
			continue
		}
		info.Deferred++
		acc.keep(cd.slot, acc.take(cd.slot)+weight(opt.Weights, cd.slot))
		if cd.mem { // the client keeps its older value
			nv.behind = append(nv.behind, behindEntry{slot: cd.slot, src: cd.src})
		}
	}
	acc.finish(c)
}

// tally counts a sent record in info, and its residuals for the choice of
// the coding (as often as it is sent: see codeShard.flush).
func (e *Encoder) tally(cd *cand, info *BuildInfo) {
	switch cd.kind {
	case kindRemoval:
		info.Removals++
	case kindFull:
		info.Fulls++
	default:
		info.Deltas++
		ce := e.entry(cd)
		if ce.sends == 0 {
			e.shard.pending = append(e.shard.pending, cd.ent)
		}
		ce.sends++
		if ce.usePred {
			info.PredictedDeltas++
			info.predSaved += int(ce.saved)
		}
	}
}

// valueTick returns the tick of the value a view of tick v (with deferred
// entries behind) holds for a member slot.
func valueTick(v uint32, behind []behindEntry, slot uint32) uint32 {
	if len(behind) == 0 {
		return v
	}
	j := sort.Search(len(behind), func(j int) bool { return behind[j].slot >= slot })
	if j < len(behind) && behind[j].slot == slot {
		return behind[j].src
	}
	return v
}

// shrunk empties s for reuse, letting its array go if its last use (its
// length) took less than an eighth of it: a burst (a client's first
// ticks, a spawn wave) does not stay resident in every view.
func shrunk[T any](s []T) []T {
	if cap(s) > 256 && len(s) < cap(s)/8 {
		return nil
	}
	return s[:0]
}
