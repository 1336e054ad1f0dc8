package snapshot

import (
	"math"
	"math/bits"
	"slices"
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

	tick    uint32 // tick the cache belongs to
	arena   bitio.Writer
	cache   []cacheSlot
	present Bitset // slots present in the current frame

	// baseAck/baseHasAck: the input ack of this Build's baseline view.
	baseAck    uint32
	baseHasAck bool

	// scratch, reused by Build
	scratch, scratch2, scratch3 bitio.Writer
	pred                        []uint64
	pc                          predCtx
	cands                       []cand
	sel                         []int
	members                     Bitset
	gapBuf                      []uint64

	// Compression, when set, zstd-compresses each datagram body that it
	// strictly shrinks (see [Compressor]). Nil: never compress.
	Compression *Compressor

	// Cache statistics since the last Begin.
	CacheHits, CacheMisses int
	// Predicted counts records (since the last Begin) whose residuals are
	// against the linear extrapolation, because that was shorter.
	Predicted int
	// NoPrediction turns the linear-extrapolation predictor off (it is on by
	// default: each record uses it only when it is shorter).
	NoPrediction bool
}

type cacheEntry struct {
	tick     uint32 // frame tick the entry is valid for
	src      uint32 // baseline tick of the record (0 = full)
	pb, pb2  uint32 // prediction views (baseline, its baseline); 0 = off
	src2     uint32 // value tick of the entity in view pb2 (0 = none)
	owner    bool
	usePred  bool   // the body's residuals are against the extrapolation
	saved    uint16 // bits that prediction saved against the plain residuals
	kind     uint8  // kindDelta, kindFull, or kindNone (nothing changed)
	maskBits uint16
	mask     uint64 // mask bits when maskBits ≤ 64
	maskOff  uint32 // arena offset of the mask when maskBits > 64
	bodyOff  uint32 // arena byte offset of the body
	bodyBits uint32
}

const kindNone = 3

type cacheSlot struct {
	e    [2]cacheEntry
	next uint8
}

type cand struct {
	slot uint32
	src  uint32 // baseline tick of the client's value (0 = none)
	kind uint8  // kindDelta, kindFull, kindRemoval
	way  uint8  // cache way of the record (in e.cache[slot])
	pri  float32
	bits int
	mem  bool // member of the baseline view
}

// NewEncoder returns an encoder over w.
func NewEncoder(w *World) *Encoder {
	e := &Encoder{w: w, plans: w.reg.Plans()}
	for _, p := range e.plans {
		if p.OwnerOnlyMask() != 0 {
			e.ownerComps |= 1 << p.ID
		}
	}
	return e
}

// World returns the encoder's world.
func (e *Encoder) World() *World { return e.w }

// begin prepares the per-tick cache for the newest frame.
func (e *Encoder) begin() {
	f := e.w.Current()
	if f == nil || f.Tick == e.tick {
		return
	}
	e.tick = f.Tick
	e.arena.Reset(e.arena.Bytes())
	e.CacheHits, e.CacheMisses, e.Predicted = 0, 0, 0
	if n := len(e.w.changedAt); len(e.cache) < n {
		e.cache = append(e.cache, make([]cacheSlot, n-len(e.cache))...)
	}
	e.present.Reset()
	for _, s := range f.Slots {
		e.present.Set(s)
	}
}

func (e *Encoder) ownerView(c *Client, m Meta) bool {
	return c.ID != 0 && m.Owner == c.ID && m.Set&e.ownerComps != 0
}

// entry returns the cache entry of a candidate. Candidates hold a way index,
// not a pointer, so appending them needs no GC write barrier.
func (e *Encoder) entry(cd *cand) *cacheEntry { return &e.cache[cd.slot].e[cd.way] }

func (e *Encoder) wayOf(slot uint32, ce *cacheEntry) uint8 {
	if ce == &e.cache[slot].e[0] {
		return 0
	}
	return 1
}

// predCtx is a packet's prediction context: the baseline view B and its
// own baseline B2 (both held by the client), and for the current record the
// tick whose value the client's view B2 holds for the entity (src2, 0 =
// not in B2). With on, every delta record starts with a bit that says
// whether its residuals are against the linear extrapolation through B2 and
// B (1) or against B alone (0).
type predCtx struct {
	on      bool
	B, B2   uint32
	src2    uint32
	members Bitset
	behind  []behindEntry
}

// record returns the cached record of slot (entry i of frame f) for a
// client whose value is from baseline tick src (0 = none: full record).
func (e *Encoder) record(f *Frame, i int, src uint32, owner bool, pc *predCtx) *cacheEntry {
	slot := f.Slots[i]
	var pb, pb2, src2 uint32
	if pc.on && src != 0 {
		pb, pb2, src2 = pc.B, pc.B2, pc.src2
	}
	cs := &e.cache[slot]
	for k := range cs.e {
		ce := &cs.e[k]
		if ce.tick == f.Tick && ce.src == src && ce.owner == owner && ce.pb == pb && ce.pb2 == pb2 && ce.src2 == src2 {
			e.CacheHits++
			return ce
		}
	}
	e.CacheMisses++
	ce := &cs.e[cs.next]
	cs.next ^= 1
	*ce = cacheEntry{tick: f.Tick, src: src, owner: owner, pb: pb, pb2: pb2, src2: src2}
	m := f.Metas[i]
	cur := f.EntityLanes(i)
	if src != 0 {
		bf := e.w.Frame(src)
		bi := -1
		if bf != nil {
			bi = bf.Lookup(slot)
		}
		if bi >= 0 && bf.Metas[bi] == m {
			base := bf.EntityLanes(bi)
			e.arena.Bytes() // align to a byte boundary
			start := e.arena.BitLen()
			if !writeDeltaMask(&e.arena, e.plans, m.Set, base, cur, owner) {
				e.arena.Bytes()
				ce.kind = kindNone
				return ce
			}
			maskBits := e.arena.BitLen() - start
			buf := e.arena.Bytes()
			ce.maskOff = uint32(start / 8)
			ce.maskBits = uint16(maskBits)
			if maskBits <= 64 {
				var r bitio.Reader
				r.Reset(buf[start/8:])
				ce.mask = r.ReadBits(uint(maskBits))
			}
			// Plain residuals (against the baseline value) …
			e.scratch.Reset(e.scratch.Bytes())
			if pb != 0 {
				e.scratch.WriteBits(0, 1)
			}
			ok := writeDeltaBody(&e.scratch, e.plans, m.Set, base, base, cur, owner)
			body := &e.scratch
			// … or against the extrapolation through the older view, if shorter.
			if ok && pb != 0 && src2 != 0 {
				if pf := e.w.Frame(src2); pf != nil {
					if pi := pf.Lookup(slot); pi >= 0 && pf.Metas[pi] == m {
						e.pred = append(e.pred[:0], base...)
						predict(e.plans, m.Set, base, pf.EntityLanes(pi), int64(f.Tick-pb), int64(pb-pb2), e.pred)
						e.scratch2.Reset(e.scratch2.Bytes())
						e.scratch2.WriteBits(1, 1)
						if writeDeltaBody(&e.scratch2, e.plans, m.Set, base, e.pred, cur, owner) && e.scratch2.BitLen() < e.scratch.BitLen() {
							ce.saved = uint16(min(e.scratch.BitLen()-e.scratch2.BitLen(), math.MaxUint16))
							body = &e.scratch2
							ce.usePred = true
							e.Predicted++
						}
					}
				}
			}
			bodyBits := body.BitLen()
			if ok && (maskBits+bodyBits < e.minFullBits(m.Set) || maskBits+bodyBits < e.fullBits(m, cur, owner)) {
				e.arena.Bytes()
				bodyStart := e.arena.BitLen()
				e.arena.AppendBits(body.Bytes(), bodyBits)
				e.arena.Bytes()
				ce.kind = kindDelta
				ce.bodyOff = uint32(bodyStart / 8)
				ce.bodyBits = uint32(bodyBits)
				return ce
			}
		}
	}
	// Full record.
	e.arena.Bytes()
	start := e.arena.BitLen()
	writeFull(&e.arena, e.plans, m, cur, owner)
	ce.kind = kindFull
	ce.maskBits = 0
	ce.bodyOff = uint32(start / 8)
	ce.bodyBits = uint32(e.arena.BitLen() - start)
	e.arena.Bytes()
	return ce
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

// BuildOptions selects what one datagram carries.
type BuildOptions struct {
	// Budget is the largest datagram in bytes; 0 means DefaultMTU. The
	// highest-priority records that fit are sent; the rest stay changed
	// against the baseline and gain priority.
	Budget int
	// Relevant is the client's interest set; nil means every entity.
	Relevant Bitset
	// Weights is the relevance weight per slot added to the client's priority
	// accumulator each tick a changed entity waits; nil or a missing slot
	// means 1.
	Weights []float32
	// InputAck, when HasInputAck is set, tells the client the newest input
	// tick the server has applied for it (the reconciliation point of its
	// predicted entities); it rides in the datagram header.
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

// BuildInfo reports what a datagram carries.
type BuildInfo struct {
	Tick, Baseline uint32 // Baseline 0 = against an empty world
	Deltas, Fulls  int
	// PredictedDeltas counts deltas coded against the extrapolation.
	PredictedDeltas int
	predSaved       int
	Removals        int
	Deferred        int // changed records left for later by the budget
	Bytes           int
	Compressed      bool
	Starved         bool // the client's byte rate left no budget: nothing built
}

// MinBudget is the smallest datagram budget worth building; with less the
// tick is skipped for that client (its changes wait with rising priority).
const MinBudget = 48

// Build writes the snapshot datagram of the newest frame for client c into
// dst[:0] and returns it. It picks c's baseline (the newest acked view still
// in the ring; none → full state against an empty world), selects changed,
// new and removed entities by priority within the budget, and records what
// c will hold if the datagram arrives, for use as a later baseline.
// Allocation-free in steady state.
func (e *Encoder) Build(c *Client, opt BuildOptions, dst []byte) ([]byte, BuildInfo) {
	e.begin()
	f := e.w.Current()
	info := BuildInfo{}
	if f == nil {
		return dst[:0], info
	}
	S := f.Tick
	info.Tick = S
	budget := opt.Budget
	if budget <= 0 {
		budget = DefaultMTU
	}
	budget = c.budget(budget)
	if budget < MinBudget {
		info.Starved = true
		return dst[:0], info // nothing worth sending this tick
	}
	c.grow(len(e.w.changedAt))

	// Baseline: newest acked view whose frame is still in the ring.
	var base *view
	for i := range c.views {
		v := &c.views[i]
		if v.used && v.acked && v.tick != S && int32(S-v.tick) > 0 && e.w.Frame(v.tick) != nil {
			if base == nil || int32(v.tick-base.tick) > 0 {
				base = v
			}
		}
	}
	var B uint32
	var changed Bitset
	var baseMembers Bitset
	var behind []behindEntry
	if base != nil {
		B = base.tick
		var ok bool
		changed, ok = e.w.ChangedSince(B)
		if !ok {
			base, B = nil, 0
		} else {
			baseMembers = base.members
			behind = base.behind
		}
	}
	info.Baseline = B

	// Prediction: the client also holds the view its baseline was decoded
	// against (B2), as long as no newer tick can have replaced it in its ring.
	e.pc = predCtx{}
	// A client whose recent packets gained nothing from prediction (random
	// motion) gets it only on every 16th packet, as a probe: it saves the
	// per-record prediction bit.
	if base != nil && !e.NoPrediction && base.base != 0 && (!c.predOff || c.Sent%16 == 0) {
		B2 := base.base
		v2 := &c.views[B2%uint32(len(c.views))]
		if v2.used && v2.tick == B2 && int32(B-B2) > 0 && int32(S-B2) < int32(len(c.views)) {
			e.pc = predCtx{on: true, B: B, B2: B2, members: v2.members, behind: v2.behind}
		}
	}

	// Relevant = interest ∩ present.
	rel := e.present
	if opt.Relevant != nil {
		n := len(e.present)
		e.members = append(e.members[:0], make(Bitset, n)...)
		for i := 0; i < n; i++ {
			e.members[i] = e.present[i] & opt.Relevant.word(i)
		}
		rel = e.members
	}

	// Candidates, word by word: changed since the baseline and relevant or
	// held by the client, entering or leaving the client's view, and
	// entries deferred earlier ("behind"). O(words + candidates).
	e.cands = e.cands[:0]
	words := max(len(rel), len(baseMembers))
	bi := 0
	for wi := 0; wi < words || bi < len(behind); wi++ {
		r, m := rel.word(wi), baseMembers.word(wi)
		cw := changed.word(wi)&(r|m) | (r ^ m)
		bj := bi
		for bi < len(behind) && int(behind[bi].slot>>6) == wi {
			cw |= 1 << (behind[bi].slot & 63)
			bi++
		}
		for ; cw != 0; cw &= cw - 1 {
			slot := uint32(wi<<6 | bits.TrailingZeros64(cw))
			src := B
			for bj < bi && behind[bj].slot < slot {
				bj++
			}
			if bj < bi && behind[bj].slot == slot {
				src = behind[bj].src
			}
			e.classify(c, f, slot, src, m>>(slot&63)&1 != 0, r>>(slot&63)&1 != 0, opt.Weights)
		}
	}

	// Select by priority within the budget. Estimates use the gap to the
	// previous candidate; the exact size is checked after selection and the
	// lowest-priority records are dropped until the datagram fits.
	budgetBits := (budget-1)*8 - headerBits
	total := 0
	prevSlot := int64(-1)
	for i := range e.cands {
		cd := &e.cands[i]
		cd.bits += egLen(uint64(int64(cd.slot)-prevSlot-1), 1)
		prevSlot = int64(cd.slot)
		total += cd.bits
	}
	e.sel = e.sel[:0]
	for i := range e.cands {
		e.sel = append(e.sel, i)
	}
	if total > budgetBits {
		e.byPriority()
		used, n := 0, 0
		for _, i := range e.sel {
			if used+e.cands[i].bits <= budgetBits {
				used += e.cands[i].bits
				e.sel[n] = i
				n++
			}
		}
		e.sel = e.sel[:n]
		slices.Sort(e.sel)
		for iter := 0; iter < 16; iter++ {
			over := e.exactBits() - budgetBits
			if over <= 0 {
				break
			}
			e.dropLowest(over)
		}
	}
	e.baseAck, e.baseHasAck = 0, false
	if base != nil {
		e.baseAck, e.baseHasAck = base.inputAck, base.hasInputAck
	}
	out := e.stitch(dst, S, B, budget, &info, opt)
	if e.Compression != nil && len(out) > 1 {
		if z := e.Compression.compress(out[1:]); z != nil {
			out = append(out[:1], z...)
			out[0] |= FlagCompressed
			info.Compressed = true
		}
	}

	// Record the view the client will hold if this datagram arrives.
	nv := c.viewFor(S)
	nv.base = B
	nv.inputAck, nv.hasInputAck = opt.InputAck, opt.HasInputAck
	nv.members = append(nv.members[:0], baseMembers...)
	nv.behind = nv.behind[:0]
	si := 0
	for i := range e.cands {
		cd := &e.cands[i]
		sent := si < len(e.sel) && e.sel[si] == i
		if sent {
			si++
			c.acc[cd.slot] = 0
			if cd.kind == kindRemoval {
				nv.members.Clear(cd.slot)
			} else {
				nv.members.Set(cd.slot)
			}
			continue
		}
		info.Deferred++
		c.acc[cd.slot] += weight(opt.Weights, cd.slot)
		if cd.mem { // the client keeps its older value
			nv.behind = append(nv.behind, behindEntry{slot: cd.slot, src: cd.src})
		}
	}
	info.Bytes = len(out)
	if e.pc.on && info.Deltas >= 8 {
		// Prediction pays if the bits it saved exceed the one bit per delta
		// record it costs.
		c.predOff = info.predSaved <= info.Deltas
	}
	c.spend(len(out))
	c.Sent++
	return out, info
}

// headerBits is an upper bound of the header after the kind byte: tick (32),
// baseline distance (≤ 11), prediction flag and distance (≤ 12), record
// count (≤ 29), gap parameter (3),
// extension flag (1), input ack (32).
const headerBits = 32 + 11 + 1 + 11 + 29 + 3 + 1 + 32

func (e *Encoder) byPriority() {
	slices.SortFunc(e.sel, func(a, b int) int {
		pa, pb := e.cands[a].pri, e.cands[b].pri
		switch {
		case pa > pb:
			return -1
		case pa < pb:
			return 1
		}
		return int(e.cands[a].slot) - int(e.cands[b].slot)
	})
}

// dropLowest removes the lowest-priority selected records whose estimated
// sizes add up to at least over bits (keeping slot order).
func (e *Encoder) dropLowest(over int) {
	for over > 0 && len(e.sel) > 0 {
		low := 0
		for j, i := range e.sel {
			if e.cands[i].pri < e.cands[e.sel[low]].pri {
				low = j
			}
		}
		over -= e.cands[e.sel[low]].bits
		e.sel = append(e.sel[:low], e.sel[low+1:]...)
	}
}

// exactBits returns the size in bits of the selected records as stitch
// will write them (with the best gap parameter), excluding the header.
func (e *Encoder) exactBits() int {
	e.gapBuf = e.gapBuf[:0]
	prev := int64(-1)
	body := 0
	var prevMask uint64
	prevMaskBits := -1
	for _, i := range e.sel {
		cd := &e.cands[i]
		s := int64(cd.slot)
		e.gapBuf = append(e.gapBuf, uint64(s-prev-1))
		prev = s
		switch cd.kind {
		case kindRemoval:
			body += 2
		case kindFull:
			body += 2 + int(e.entry(cd).bodyBits)
		default:
			ce := e.entry(cd)
			body += 2 + int(ce.bodyBits)
			if !(int(ce.maskBits) <= 64 && int(ce.maskBits) == prevMaskBits && ce.mask == prevMask) {
				body += int(ce.maskBits)
				prevMaskBits, prevMask = int(ce.maskBits), ce.mask
				if ce.maskBits > 64 {
					prevMaskBits = -1
				}
			}
		}
	}
	_, gapBits := bestGapK(e.gapBuf)
	return body + gapBits
}

// bestGapK returns the exp-Golomb order (0..7) that codes gaps in the
// fewest bits, and that number of bits.
func bestGapK(gaps []uint64) (uint, int) {
	// egLen(v, k) = 2·Len(v + 2^k) − k − 1. With m = Len(v) and a the
	// length of v below its leading run of ones (a = Len(^v mod 2^m)),
	// Len(v + 2^k) is m for k < a, m + 1 for a ≤ k < m (the carry runs
	// through the ones), and k + 1 for k ≥ m. So Σ Len(v_i + 2^k) =
	// Σ m_i + #{a_i ≤ k} + Σ_{m_i ≤ k} (k − m_i): one pass over the gaps
	// fills small histograms, and every order's total follows from them.
	var cntA, cntM [8]int
	sumM := 0
	for _, g := range gaps {
		m := bits.Len64(g)
		a := bits.Len64(^g & (1<<m - 1))
		sumM += m
		if a < 8 {
			cntA[a]++
		}
		if m < 8 {
			cntM[m]++
		}
	}
	N := len(gaps)
	bestK, best := uint(0), 0
	A, CM, SM := 0, 0, 0
	for k := 0; k < 8; k++ {
		A += cntA[k]
		CM += cntM[k]
		SM += k * cntM[k]
		n := 2*(sumM+A+k*CM-SM) - (k+1)*N
		if k == 0 || n < best {
			bestK, best = uint(k), n
		}
	}
	return bestK, best
}

func weight(ws []float32, slot uint32) float32 {
	if int(slot) < len(ws) {
		return ws[slot]
	}
	return 1
}

// classify adds slot to the candidates if the client's value differs from
// the newest frame.
func (e *Encoder) classify(c *Client, f *Frame, slot, src uint32, inB, inS bool, ws []float32) {
	w := weight(ws, slot)
	switch {
	case inB && !inS:
		e.cands = append(e.cands, cand{slot: slot, src: src, kind: kindRemoval, pri: float32(math.Inf(1)), bits: 2, mem: true})
	case !inB && inS:
		i := f.Lookup(slot)
		ce := e.record(f, i, 0, e.ownerView(c, f.Metas[i]), &e.pc)
		e.cands = append(e.cands, cand{slot: slot, kind: kindFull, way: e.wayOf(slot, ce), pri: c.acc[slot] + w, bits: int(ce.bodyBits) + 2})
	case inB && inS:
		if e.w.changedAt[slot] <= src && e.w.layoutAt[slot] <= src {
			return // unchanged since the client's value
		}
		i := f.Lookup(slot)
		s := src
		if e.w.layoutAt[slot] > src {
			s = 0 // new incarnation or layout: full
		}
		e.pc.src2 = 0
		if s != 0 && e.pc.on && e.pc.members.Has(slot) {
			e.pc.src2 = e.pc.B2
			bh := e.pc.behind
			j := sort.Search(len(bh), func(j int) bool { return bh[j].slot >= slot })
			if j < len(bh) && bh[j].slot == slot {
				e.pc.src2 = bh[j].src
			}
		}
		ce := e.record(f, i, s, e.ownerView(c, f.Metas[i]), &e.pc)
		if ce.kind == kindNone {
			return // changed and changed back
		}
		b := int(ce.bodyBits) + 2
		if ce.kind == kindDelta {
			b += int(ce.maskBits)
		}
		e.cands = append(e.cands, cand{slot: slot, src: src, kind: ce.kind, way: e.wayOf(slot, ce), pri: c.acc[slot] + w, bits: b, mem: true})
	}
}

// stitch writes the header and the selected records.
func (e *Encoder) stitch(dst []byte, S, B uint32, budget int, info *BuildInfo, opt BuildOptions) []byte {
	// Choose the gap code parameter that minimizes the gap bits.
	e.gapBuf = e.gapBuf[:0]
	prev := int64(-1)
	for _, i := range e.sel {
		s := int64(e.cands[i].slot)
		e.gapBuf = append(e.gapBuf, uint64(s-prev-1))
		prev = s
	}
	bestK, _ := bestGapK(e.gapBuf)
	var w bitio.Writer
	w.Reset(dst[:0])
	w.WriteBits(uint64(KindSnapshot), 8)
	w.WriteBits(uint64(S), 32)
	if B == 0 {
		w.WriteExpGolomb(0, 0)
	} else {
		w.WriteExpGolomb(uint64(S-B), 0)
		w.WriteBool(e.pc.on)
		if e.pc.on {
			w.WriteExpGolomb(uint64(e.pc.B-e.pc.B2-1), 0)
		}
	}
	w.WriteExpGolomb(uint64(len(e.sel)), 0)
	w.WriteBits(uint64(bestK), 3)
	if opt.HasInputAck {
		w.WriteBits(1, 1) // extension: the input ack, and maybe the feedback
		// The ack moves by a few ticks per packet: relative to the one the
		// baseline view carried when there is one, else in full.
		if d := int64(int32(opt.InputAck - e.baseAck)); B != 0 && e.baseHasAck && d >= -MaxInputLead && d <= MaxInputLead {
			w.WriteBool(true)
			w.WriteExpGolomb(bitio.ZigZag(d), 2)
		} else {
			w.WriteBool(false)
			w.WriteBits(uint64(opt.InputAck), 32)
		}
		w.WriteBool(opt.HasInputFeedback)
		if opt.HasInputFeedback {
			lead := max(-MaxInputLead, min(MaxInputLead, int64(int32(opt.InputHeld-opt.InputAck))))
			w.WriteExpGolomb(bitio.ZigZag(lead), 2)
			w.WriteExpGolomb(bitio.ZigZag(int64(max(-MaxInputDepth, min(MaxInputDepth, opt.InputDepth)))), 2)
		}
	} else {
		w.WriteBits(0, 1)
	}
	arena := e.arena.Bytes()
	var prevMask uint64
	prevMaskBits := -1
	for n, i := range e.sel {
		cd := &e.cands[i]
		w.WriteExpGolomb(e.gapBuf[n], bestK)
		switch cd.kind {
		case kindRemoval:
			w.WriteBits(0b11, 2)
			info.Removals++
		case kindFull:
			w.WriteBits(0b01, 2)
			ce := e.entry(cd)
			w.AppendBits(arena[ce.bodyOff:], int(ce.bodyBits))
			info.Fulls++
		default:
			w.WriteBits(0, 1)
			ce := e.entry(cd)
			if int(ce.maskBits) <= 64 && int(ce.maskBits) == prevMaskBits && ce.mask == prevMask {
				w.WriteBits(1, 1) // same field masks as the previous delta
			} else {
				w.WriteBits(0, 1)
				if ce.maskBits <= 64 {
					w.WriteBits(ce.mask, uint(ce.maskBits))
				} else {
					w.AppendBits(arena[ce.maskOff:], int(ce.maskBits))
				}
				prevMaskBits, prevMask = int(ce.maskBits), ce.mask
				if ce.maskBits > 64 {
					prevMaskBits = -1
				}
			}
			w.AppendBits(arena[ce.bodyOff:], int(ce.bodyBits))
			info.Deltas++
			if ce.usePred {
				info.PredictedDeltas++
				info.predSaved += int(ce.saved)
			}
		}
	}
	return w.Bytes()
}
