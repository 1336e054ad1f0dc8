package snapshot

import (
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

	// The encoder's parts, each with its own state: the tick's encoded
	// records (cache.go), one client's candidate records (collect.go), the
	// candidates its budget keeps and the datagrams they are packed into
	// (pack.go). Build runs them in that order.
	recordCache
	candidates
	selection
	packer

	pc predCtx // the client's prediction context (setupPrediction)

	// coding is the residual coding of the current tick's records; quad:
	// its packets extrapolate positions quadratically through a third
	// view where they can. Both are the World's choice for the tick, from
	// what the records its encoders sent showed (shard: this encoder's
	// count, see coding.go).
	coding Coding
	// orders is coding's order of a predicted lane by class and context
	// (Coding.orderCtx, looked up), ordersMask+1 entries per class so that
	// a masked context needs no bounds check
	orders [numClasses][ordersMask + 1]uint8
	quad   bool
	shard  *codeShard
	ops    []planOps // per component: its plan as the delta encoder reads it

	// Compression, when set, zstd-compresses each datagram body that it
	// strictly shrinks (see [Compressor]). Nil: never compress.
	Compression *Compressor
	// NoPrediction turns the linear-extrapolation predictor off (it is on by
	// default: each record uses it only when it is shorter).
	NoPrediction bool

	acct *bitAccount // nil: accounting off (account.go)

	// Pre-encoding (pre.go): this encoder's arena of the World's
	// pre-encoded records; which of the Build's common keys is the
	// pre-encoded one; sends of pre-encoded records by slot (and the slots
	// with some) for the coding's counts; the tick's Builds by common key.
	preArena   int
	preKi      [3]bool
	preSends   []uint32
	prePending []uint32
	census     [maxCensus]censusEntry
	censusN    int
	preEncoded int
	// PreHits counts candidates whose record was pre-encoded, since the
	// World's last EndPreencode.
	PreHits int
}

// NewEncoder returns an encoder over w.
func NewEncoder(w *World) *Encoder {
	e := &Encoder{w: w, plans: w.reg.Plans(), coding: defaultCoding}
	e.touchAt, e.keyIDs = touchEntities, map[recKey]uint32{}
	e.shard = w.codes.newShard(e)
	e.preArena = len(w.pre.arenas)
	w.pre.arenas = append(w.pre.arenas, bitio.Writer{})
	w.pre.bytes = append(w.pre.bytes, nil)
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

// ownerView reports whether c sees slot (in frame f) with its owner-only
// fields.
func (e *Encoder) ownerView(c *Client, f *Frame, slot uint32) bool {
	if c.ID == 0 || e.ownerComps == 0 {
		return false
	}
	m := f.Metas[f.Lookup(slot)]
	return m.Owner == c.ID && m.Set&e.ownerComps != 0
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
	// clock (from the server's input log): the newest input tick the server holds
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
		B, baseMembers, behind = base.tick, c.membersOf(base), c.behindOf(base)
	}
	info.Baseline = B
	e.setupPrediction(c, base, S)
	e.pc.setKeys(B)
	e.setTags()
	e.setPre(S)
	if B != 0 {
		ki := 0
		if e.pc.on {
			ki = 1
			if e.pc.B3 != 0 {
				ki = 2
			}
		}
		e.noteCensus(e.pc.keys[ki])
	}
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
		e.pc = predCtx{on: true, B: B, B2: B2, members: c.membersOf(v2), behind: c.behindOf(v2)}
		B3 := B2 - (B - B2)
		if v3 := &c.views[B3%uint32(len(c.views))]; B3 != 0 && int32(B2-B3) > 0 && v3.used && v3.tick == B3 && v3.acked && int32(S-B3) < int32(len(c.views)) {
			e.pc.B3, e.pc.quad = B3, e.quad
			e.pc.members3, e.pc.behind3 = c.membersOf(v3), c.behindOf(v3)
		}
	}
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
	nv.parts = uint8(len(e.parts)) // (≤ MaxParts)
	c.shareMembers(nv, base)       // (copied only if this tick changes them)
	// (viewFor emptied nv's lists, giving its record list back to the pool)
	multi := len(e.parts) > 1 // (a one-datagram tick is acked whole or not at all)
	if !multi {
		c.dropSpareRecs()
	}
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
				c.addRec(nv, sentRec{slot: cd.slot, src: cd.src, part: uint8(pi), kind: cd.kind, mem: cd.mem})
			}
			c.setMember(nv, cd.slot, cd.kind != kindRemoval)
			continue
		}
		info.Deferred++
		acc.keep(cd.slot, acc.take(cd.slot)+weight(opt.Weights, cd.slot))
		if cd.mem { // the client keeps its older value
			c.addBehind(nv, behindEntry{slot: cd.slot, src: cd.src})
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
		if cd.ent&preBit != 0 {
			e.preSend(cd.ent &^ preBit)
		} else {
			if ce.sends == 0 {
				e.shard.pending = append(e.shard.pending, cd.ent)
			}
			ce.sends++
		}
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
	if cap(s) > 32 && len(s) < cap(s)/8 {
		return nil
	}
	return s[:0]
}
