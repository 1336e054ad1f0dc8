package encode

import (
	"github.com/archenet/archenet/replication/internal/baseline"
	"github.com/archenet/archenet/replication/internal/codec"
	"github.com/archenet/archenet/replication/internal/entity"
	"github.com/archenet/archenet/replication/internal/lanes"
	"github.com/archenet/archenet/replication/internal/store"
	"github.com/archenet/archenet/replication/internal/wire"
	"github.com/archenet/archenet/replication/schema"
)

// DefaultMTU is the default maximum datagram size in bytes: safe on every
// path (QUIC guarantees 1200-byte UDP payloads before path MTU discovery).
const DefaultMTU = 1200

// MinBudget is the smallest datagram budget worth building; with less the
// tick is skipped for that client (its changes wait with rising priority).
const MinBudget = 48

// Encoder builds snapshot datagrams for many clients from one ring. It
// caches each encoded record per (entity, baseline tick, owner view) for the
// current tick, so clients that acked the same baseline cost only selection
// and bit copies ("encode once, copy many"). Not safe for concurrent use:
// one Encoder per goroutine, all of a [Group].
//
// A Build runs its parts in order: the prediction context (predict.go),
// the candidates (collect.go), whose records come from the pre-encoded
// table (pre.go), the cache (cache.go) or the lane coder (lanes.go); the
// selection within the client's budget (select.go); the packer
// (pack.go); and the view the client will hold, recorded in its tracker.
type Encoder struct {
	g          *Group
	r          *store.Ring
	plans      []*schema.Plan
	ownerComps uint64 // components that have owner-only groups

	cache  recordCache // the tick's encoded records
	coder  lanes.Coder // the record kernels, and the arena they write to
	cands  candidates  // one Build's candidate records
	sel    selection   // the candidates its budget keeps
	packer packer      // the datagrams they are packed into
	pre    preState    // this encoder's part in pre-encoding
	pc     predCtx     // the Build's prediction context
	share  shareState  // the last Build later ones may repeat (share.go)
	// sharedN counts the Builds that repeated another's
	sharedN int
	// candsN counts the Builds that took another's candidates (and did
	// not patch its datagrams); subs: the candidates such a Build has
	// records of its own for
	candsN int
	subs   []subst
	remake []uint32 // repeatCands' slots
	// pcCandsN counts the Builds that took another's candidates with
	// deferred entries in either's prediction views (tests)
	pcCandsN int
	shard    *codeShard  // its counts for the coding choice
	acct     *bitAccount // nil: accounting off (account.go)

	// Compression, when set, zstd-compresses each datagram body that it
	// strictly shrinks (see codec.Compressor). Nil: never compress.
	Compression *codec.Compressor
	// NoPrediction turns the linear-extrapolation predictor off (it is on by
	// default: each record uses it only when it is shorter).
	NoPrediction bool
	// NoShare: every Build encodes its client's datagrams itself, none
	// repeats another client's (share.go; the bytes are the same).
	NoShare bool
	// PreHits counts candidates whose record was pre-encoded, since the
	// Group's last EndPreencode.
	PreHits int
}

// NewEncoder returns an encoder of the group (one per goroutine that
// builds datagrams).
func (g *Group) NewEncoder() *Encoder {
	plans := g.r.Registry().Plans()
	e := &Encoder{g: g, r: g.r, plans: plans, coder: lanes.New(plans)}
	e.cache.keyIDs = map[recKey]uint32{}
	e.cands.touchAt = touchEntities
	e.shard = g.codes.newShard(e)
	e.pre.index = len(g.pre.bytes)
	g.pre.bytes = append(g.pre.bytes, nil)
	for _, p := range plans {
		if p.OwnerOnlyMask() != 0 {
			e.ownerComps |= 1 << p.ID
		}
	}
	g.encs = append(g.encs, e)
	return e
}

// Ring returns the encoder's ring.
func (e *Encoder) Ring() *store.Ring { return e.r }

// CacheStats returns the record cache's counts since the tick began: hits,
// misses, and records coded against the extrapolation.
func (e *Encoder) CacheStats() (hits, misses, predicted int) {
	return e.cache.CacheHits, e.cache.CacheMisses, e.cache.Predicted
}

// EndTick counts the residuals of the records e sent this tick for the
// Group's choice of the next ticks' coding, while they are still in this
// goroutine's cache; the Group's BeginTick does it otherwise. Call it after
// the tick's last Build on e (not concurrently with it).
func (e *Encoder) EndTick() { e.shard.flush() }

// begin prepares the encoder for the newest frame, once per tick.
func (e *Encoder) begin() {
	f := e.r.Current()
	if f == nil || f.Tick == e.cache.tick {
		return
	}
	e.g.BeginTick() // (once per tick, whichever encoder comes first)
	e.cache.begin(f, e.r.Slots(), e.ownerComps)
	e.coder.Arena.Reset(e.coder.Arena.Bytes())
	if e.acct != nil {
		e.acct.begin()
	}
	e.coder.SetCoding(e.g.codes.coding, e.g.codes.quad)
}

// ownerView reports whether t's client sees slot (in frame f) with its
// owner-only fields.
func (e *Encoder) ownerView(t *baseline.Tracker, f *store.Frame, slot uint32) bool {
	if t.ID == 0 || e.ownerComps == 0 {
		return false
	}
	m := f.Metas[f.Lookup(slot)]
	return m.Owner == t.ID && m.Set&e.ownerComps != 0
}

// BuildOptions selects what one tick's datagrams carry.
type BuildOptions struct {
	// Budget is the largest datagram in bytes; 0 means DefaultMTU.
	Budget int
	// MaxParts bounds the datagrams of the tick; 0 means wire.MaxParts.
	MaxParts int
	// Allowance, when Limited, is the most bytes the tick's datagrams may
	// take together: the client's byte budget (its rate control's). The
	// highest-priority records that fit are sent; the rest stay changed
	// against the baseline and gain priority. Below MinBudget nothing is
	// built (BuildInfo.Starved).
	Allowance int
	Limited   bool
	// Relevant is the client's interest set; nil means every entity.
	Relevant entity.Bitset
	// SpawnHeld are entities the client holds at their current value
	// without them being in a view of its (its spawn carried the value and
	// they have not changed since): unless the baseline view holds them,
	// they are not sent. Nil: none.
	SpawnHeld entity.Bitset
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
	// InputHeld is sent relative to InputAck and clamped to
	// ±wire.MaxInputLead of it; InputDepth is clamped to ±wire.MaxInputDepth.
	InputHeld        uint32
	InputDepth       int
	HasInputFeedback bool
}

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
	Starved    bool // the client's byte allowance left no budget: nothing built
	// Shared: the datagrams are another client's Build's, with this
	// client's headers (share.go)
	Shared bool
	// SharedCands: the candidates were another client's Build's, with this
	// client's records of the entities with owner-only fields
	// (repeatCands); the datagrams were written for this client
	SharedCands bool
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

// AppendToLast appends b to the last datagram and sets flag in its kind
// byte (a message section: wire.FlagMessages). There must be one.
func (p *Packets) AppendToLast(b []byte, flag byte) {
	start := 0
	if n := len(p.ends); n > 1 {
		start = p.ends[n-2]
	}
	p.buf = append(p.buf, b...)
	p.buf[start] |= flag
	p.ends[len(p.ends)-1] = len(p.buf)
}

// Build writes the snapshot datagrams of the newest frame for the client
// that t tracks into out (reset first) and reports what they carry. It
// picks the client's baseline (the newest acked view still in the ring;
// none → full state against an empty world), selects changed, new and
// removed entities by priority within the client's byte allowance, packs
// them in slot order into as few datagrams of at most opt.Budget bytes as
// they need, and records in t what the client will hold depending on which
// datagrams arrive, for use as a later baseline once it acks them. Every
// datagram is decodable on its own. Allocation-free in steady state.
func (e *Encoder) Build(t *baseline.Tracker, opt BuildOptions, out *Packets) BuildInfo {
	out.Reset()
	e.begin()
	f := e.r.Current()
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
	if maxParts <= 0 || maxParts > wire.MaxParts {
		maxParts = wire.MaxParts
	}
	total := maxParts * mtu
	if opt.Limited {
		total = min(total, opt.Allowance)
	}
	if total < MinBudget || mtu < MinBudget {
		info.Starved = true
		return info // nothing worth sending this tick
	}

	base, changed := e.pickBaseline(t, S)
	var B uint32
	var baseMembers entity.Bitset
	var behind []baseline.Behind
	if base != nil {
		B, baseMembers, behind = base.Tick, t.Members(base), t.Behind(base)
	}
	info.Baseline = B
	e.setupPrediction(t, base, S)
	e.pc.setKeys(B)
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
	hdr := e.header(S, B, base, opt)
	share := e.canShare(t, behind)
	var sk shareKey
	var rel entity.Bitset
	if share {
		sk = shareKey{tick: S, B: B, pcOn: e.pc.on, B2: e.pc.B2, B3: e.pc.B3, quad: e.pc.quad, mtu: mtu, parts: maxParts, hdrBits: hdr.BitLen()}
		rel = e.cands.relevant(opt.Relevant, e.cache.present)
		if !e.ownRecords(t) && e.tryRepeat(t, &sk, base, baseMembers, rel, opt.SpawnHeld, total, &opt, &hdr, out, &info) {
			return info
		}
	}
	e.flushShare() // (the kept one's repeats counted before this Build's records)
	if share {
		e.noteAccount()
	}
	preHits := e.PreHits
	e.cache.setTags(&e.pc.keys, &e.pc.tags)
	e.setPre(S)
	e.cands.touchOn = len(f.Slots) >= e.cands.touchAt
	if e.cands.touchOn {
		e.cands.touchFrames = [4]*store.Frame{f, e.r.Frame(B)}
		if e.pc.on {
			e.cands.touchFrames[2], e.cands.touchFrames[3] = e.r.Frame(e.pc.B2), e.r.Frame(e.pc.B3)
		}
	}
	if !share {
		rel = e.cands.relevant(opt.Relevant, e.cache.present)
	}
	cands := share && e.repeatCands(t, f, &sk, baseMembers, rel, opt.SpawnHeld)
	if !cands {
		e.collect(&candSource{t: t, f: f, rel: rel, base: baseMembers, behind: behind, changed: changed, B: B,
			held: opt.SpawnHeld})
	}

	e.sel.choose(&e.cands, t.Acc(), opt.Weights, total, mtu, &hdr)
	patched := false // (the kept Build's datagrams, patched: its view)
	if cands && e.sel.all && e.canPatch() {
		patched = e.emitPatched(out, mtu, maxParts, total, &hdr, &info)
	} else {
		e.emit(out, mtu, maxParts, total, &hdr, &info)
	}
	switch {
	case patched:
		e.repeatView(t, S, base, &opt, &info)
		e.sharedN++
	case cands:
		e.recordView(t, S, base, opt, &info)
		info.SharedCands = true
		e.candsN++
	default:
		e.recordView(t, S, base, opt, &info)
	}
	info.Bytes = out.Bytes()
	e.endView(t, &info)
	if share {
		e.keepShare(t, &sk, baseMembers, rel, opt.SpawnHeld, out, &info, e.PreHits-preHits)
	}
	return info
}

// pickBaseline returns t's newest acked view whose frame is still in the
// ring and the slots changed since it; nil if there is none.
func (e *Encoder) pickBaseline(t *baseline.Tracker, S uint32) (*baseline.View, entity.Bitset) {
	base := t.Baseline(S, e.r)
	if base == nil {
		return nil, nil
	}
	changed, ok := e.r.ChangedSince(base.Tick)
	if !ok {
		return nil, nil
	}
	return base, changed
}

// header returns the fields every datagram of the tick shares.
func (e *Encoder) header(S, B uint32, base *baseline.View, opt BuildOptions) wire.Header {
	h := wire.Header{Tick: S, Parts: 1, Coding: wire.DefaultCoding, Quad: e.pc.on && e.pc.quad}
	if B != 0 {
		h.Coding, _ = e.coder.Coding()
		h.CodingInherited = base.Coding == h.Coding
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
		if base != nil && base.HasInputAck {
			if d := int64(int32(opt.InputAck - base.InputAck)); d >= -wire.MaxInputLead && d <= wire.MaxInputLead {
				h.InputAckRelative, h.InputAck = true, uint32(int32(d))
			}
		}
		if opt.HasInputFeedback {
			h.HasInputFeedback = true
			h.InputLead = max(-wire.MaxInputLead, min(wire.MaxInputLead, int64(int32(opt.InputHeld-opt.InputAck))))
			h.InputDepth = int64(max(-wire.MaxInputDepth, min(wire.MaxInputDepth, opt.InputDepth)))
		}
	}
	return h
}

// recordView records the view t's client will hold if every datagram of
// tick S arrives, and which records each datagram carried, so that an ack
// naming only some of them (baseline.Tracker.Ack) yields the exact view.
func (e *Encoder) recordView(t *baseline.Tracker, S uint32, base *baseline.View, opt BuildOptions, info *BuildInfo) {
	parts := e.packer.parts
	nv := e.beginView(t, S, base, &opt, len(parts))
	// (Begin emptied nv's lists, giving its record list back to the pool)
	multi := len(parts) > 1 // (a one-datagram tick is acked whole or not at all)
	if !multi {
		t.DropSpareRecs()
	}
	acc := t.StartAcc()
	cands := e.cands.list
	if e.sel.all && !multi {
		// Every candidate went out in one datagram (the common tick).
		for i := range cands {
			cd := &cands[i]
			e.tally(cd, info)
			if cd.kind == kindRemoval {
				t.SetMember(nv, cd.slot, false)
			} else if !cd.mem {
				t.SetMember(nv, cd.slot, true) // (members already has the others)
			}
		}
		if acc.Pending() { // (a client that never had to defer has none)
			acc.Finish(t)
		}
		return
	}
	sel := e.sel.idx
	si, pi := 0, 0
	for i := range cands {
		cd := &cands[i]
		if e.sel.all || (si < len(sel) && sel[si] == i) {
			for parts[pi].to <= si {
				pi++
			}
			si++
			e.tally(cd, info)
			if multi {
				t.AddRec(nv, baseline.Rec{Slot: cd.slot, Src: cd.src, Part: uint8(pi), Kind: cd.kind, Mem: cd.mem})
			}
			t.SetMember(nv, cd.slot, cd.kind != kindRemoval)
			continue
		}
		info.Deferred++
		acc.Keep(cd.slot, acc.Take(cd.slot)+weight(opt.Weights, cd.slot))
		if cd.mem { // the client keeps its older value
			t.AddBehind(nv, baseline.Behind{Slot: cd.slot, Src: cd.src})
		}
	}
	acc.Finish(t)
}

// beginView starts the view of tick S in t, sent in parts datagrams
// against base, holding base's members (copied only if this tick changes
// them).
func (e *Encoder) beginView(t *baseline.Tracker, S uint32, base *baseline.View, opt *BuildOptions, parts int) *baseline.View {
	var B uint32
	if base != nil {
		B = base.Tick
	}
	nv := t.Begin(S)
	nv.Base = B
	nv.Coding = wire.DefaultCoding
	if B != 0 {
		nv.Coding, _ = e.coder.Coding()
	}
	nv.InputAck, nv.HasInputAck = opt.InputAck, opt.HasInputAck
	nv.Parts = uint8(parts) // (≤ MaxParts)
	t.ShareMembers(nv, base)
	return nv
}

// endView ends a Build of t's view: whether prediction paid (it saved
// bits) in the datagrams it reported in info, and the count of ticks sent.
func (e *Encoder) endView(t *baseline.Tracker, info *BuildInfo) {
	if e.pc.on && info.Deltas >= 8 {
		t.PredOff = info.predSaved <= 0
	}
	t.Sent++
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
