package snapshot

import (
	"encoding/binary"
	"math"
	"math/bits"
	"slices"

	"github.com/archenet/archenet/replication/bitio"
)

// partOverheadBits estimates a datagram's fixed cost for selection: the kind
// byte, the header and the padding to a byte.
func partOverheadBits(h *Header) int { return 8 + h.BitLen() + 7 + 2*egLen(MaxParts, 0) }

// selection is the candidates a client's byte budget keeps.
type selection struct {
	sel    []int // selected candidates, slot order (unless selAll)
	selAll bool  // every candidate is selected (sel is not filled)
}

// packer writes the selected records into datagrams.
type packer struct {
	scratch3 bitio.Writer
	partW    bitio.Writer
	// partHdrBits: the kind byte and header bits of the part in partW
	partHdrBits int
	packed      []int
	parts       []part
}

// selectRecords keeps the candidates that fit total bytes (in datagrams of
// at most mtu bytes), by priority. e.sel lists them in slot order.
func (e *Encoder) selectRecords(c *Client, ws []float32, total, mtu int, h *Header) {
	e.sel = e.sel[:0]
	sum := e.candBits
	over := partOverheadBits(h)
	partBits := mtu*8 - over
	budgetBits := total * 8
	if e.selAll = sum+(sum/partBits+1)*over <= budgetBits; e.selAll {
		return // (e.sel is filled when needed: fillSel)
	}
	e.fillSel()
	acc, j := c.acc, 0 // (sorted by slot, as the candidates are)
	for i := range e.cands {
		cd := &e.cands[i]
		if cd.kind == kindRemoval {
			cd.pri = float32(math.Inf(1))
			continue
		}
		var a float32
		for j < len(acc) && acc[j].slot < cd.slot {
			j++
		}
		if j < len(acc) && acc[j].slot == cd.slot {
			a = acc[j].acc
		}
		cd.pri = a + weight(ws, cd.slot)
	}
	e.byPriority()
	used, n := 0, 0
	for _, i := range e.sel {
		b := int(e.cands[i].bits)
		if u := used + b; u+(u/partBits+1)*over <= budgetBits {
			used = u
			e.sel[n] = i
			n++
		}
	}
	e.sel = e.sel[:n]
	slices.Sort(e.sel)
}

// fillSel lists every candidate in e.sel (after selectRecords kept all).
func (e *Encoder) fillSel() {
	e.sel = e.sel[:0]
	for i := range e.cands {
		e.sel = append(e.sel, i)
	}
}

// recordBits is the exact size of candidate cd in a datagram: gap code (order
// k, after slot prev), kind and body, with the field masks repeated if run
// allows. It notes cd's masks in run.
func (e *Encoder) recordBits(cd *cand, prev int64, k uint, run *maskRun) int {
	n := egLen(uint64(int64(cd.slot)-prev-1), k)
	switch cd.kind {
	case kindRemoval:
		n += 4
	case kindFull:
		n += int(e.entry(cd).bodyBits)
		if cd.mem {
			n += 4
		}
	default:
		ce := e.entry(cd)
		n += int(ce.bodyBits)
		switch {
		case ce.maskPred:
			n++
		case run.repeats(ce.mask, int(ce.maskBits)):
			n += 2
		default:
			n += 3 + int(ce.maskBits)
			run.note(ce.mask, int(ce.maskBits))
		}
	}
	return n
}

// part is one datagram of the tick: the records e.sel[from:to].
type part struct {
	from, to int
	k        uint8
}

// pack splits the selected records, in slot order, into datagrams of at most
// mtu bytes (at most maxParts of them, at most total bytes together). Records
// that do not fit are deselected (they wait, gaining priority). Each part's
// gap order is then the best for its own gaps, which never makes it longer
// than packed.
func (e *Encoder) pack(mtu, maxParts, total int, h *Header, k0 uint) {
	// Header sizes depend on the number of parts: pack assuming one, and
	// again with more while the packing needs more (a header only shrinks
	// when fewer parts are needed than assumed).
	for assume, iter := 1, 0; ; iter++ {
		n := e.packWith(mtu, maxParts, total, h, assume, k0)
		if n <= assume || iter == 8 {
			break
		}
		assume = n
	}
	e.sel = append(e.sel[:0], e.packed...)
	if len(e.parts) == 0 {
		// Nothing to send still sends the header: it moves the client's
		// views on and carries the input ack.
		e.parts = append(e.parts, part{})
	}
	for pi := range e.parts {
		pt := &e.parts[pi]
		pt.k = uint8(e.gapOrder(e.sel[pt.from:pt.to]))
	}
}

// packWith packs e.sel into e.packed and e.parts, assuming the tick has
// `assume` parts (for header sizes) and gap order k. It returns the number
// of parts.
func (e *Encoder) packWith(mtu, maxParts, total int, h *Header, assume int, k uint) int {
	e.packed, e.parts = e.packed[:0], e.parts[:0]
	capBits := (mtu - 1) * 8 // the kind byte aside
	spentBytes := 0          // of the parts closed so far
	hp := *h
	hp.Parts, hp.GapOrder = max(assume, 1), 7
	var cur part
	var bitsNow int
	var prev int64
	var run maskRun
	open := func() {
		cur = part{from: len(e.packed)}
		hp.Part, hp.Count = len(e.parts), 0
		bitsNow, prev, run = hp.BitLen(), -1, newMaskRun()
	}
	// fits reports whether candidate i fits the open part; if so it adds it.
	fits := func(i int) bool {
		cd := &e.cands[i]
		r := run
		b := e.recordBits(cd, prev, k, &r) + egLen(uint64(hp.Count+1), 0) - egLen(uint64(hp.Count), 0)
		if bitsNow+b > capBits || spentBytes+1+(bitsNow+b+7)/8 > total {
			return false
		}
		bitsNow += b
		hp.Count++
		prev, run = int64(cd.slot), r
		e.packed = append(e.packed, i)
		return true
	}
	closePart := func() {
		if cur.to = len(e.packed); cur.to > cur.from {
			e.parts = append(e.parts, cur)
			spentBytes += 1 + (bitsNow+7)/8
		}
	}
	open()
	for _, i := range e.sel {
		if fits(i) {
			continue
		}
		if hp.Count == 0 {
			continue // too large even for an empty datagram: it waits
		}
		closePart()
		if len(e.parts) >= maxParts {
			return len(e.parts) // the rest wait
		}
		open()
		fits(i) // a record that fits no empty datagram waits
	}
	closePart()
	return len(e.parts)
}

// byPriority sorts e.sel by descending priority (ties by slot).
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

// bestGapK returns the exp-Golomb order (0..7) that codes gaps in the
// fewest bits, and that number of bits.
func bestGapK(gaps []uint64) (uint, int) {
	var h gapHist
	for _, g := range gaps {
		h.add(g)
	}
	return h.best()
}

// gapHist gathers what bestGapK needs of a list of gaps, one at a time.
//
// egLen(v, k) = 2·Len(v + 2^k) − k − 1. With m = Len(v) and a the length
// of v below its leading run of ones (a = Len(^v mod 2^m)), Len(v + 2^k) is
// m for k < a, m + 1 for a ≤ k < m (the carry runs through the ones), and
// k + 1 for k ≥ m. So Σ Len(v_i + 2^k) = Σ m_i + #{a_i ≤ k} +
// Σ_{m_i ≤ k} (k − m_i): one pass over the gaps fills small histograms,
// and every order's total follows from them.
type gapHist struct {
	cntA, cntM [8]int32
	sumM, n    int
}

func (h *gapHist) add(g uint64) {
	m := bits.Len64(g)
	a := bits.Len64(^g & (1<<m - 1))
	h.sumM += m
	h.n++
	if a < 8 {
		h.cntA[a]++
	}
	if m < 8 {
		h.cntM[m]++
	}
}

// best returns the order that codes the gaps in the fewest bits, and that
// number of bits.
func (h *gapHist) best() (uint, int) {
	bestK, best := uint(0), 0
	A, CM, SM := 0, 0, 0
	for k := 0; k < 8; k++ {
		A += int(h.cntA[k])
		CM += int(h.cntM[k])
		SM += k * int(h.cntM[k])
		n := 2*(h.sumM+A+k*CM-SM) - (k+1)*h.n
		if k == 0 || n < best {
			bestK, best = uint(k), n
		}
	}
	return bestK, best
}

// emit packs the selected records into the tick's datagrams and writes
// them to out. Most ticks fit one datagram: it is written at once and kept
// if it fits, which is exactly what packing would have produced; otherwise
// (and with bit accounting on) the records are packed first.
func (e *Encoder) emit(out *Packets, mtu, maxParts, total int, h *Header, info *BuildInfo) {
	k0 := e.candGapK // the order for all candidates: right unless some wait
	n := len(e.cands)
	if !e.selAll {
		k0, n = e.gapOrder(e.sel), len(e.sel)
	}
	if e.acct == nil {
		e.parts = append(e.parts[:0], part{from: 0, to: n, k: uint8(k0)})
		hp := *h
		hp.Parts = 1
		if bits := e.writePart(&hp, 0); bits <= mtu*8 && (bits+7)/8 <= total {
			e.appendPart(out, info)
			info.Parts = 1
			return
		}
	}
	if e.selAll {
		e.fillSel()
		e.selAll = false
	}
	e.pack(mtu, maxParts, total, h, k0)
	e.stitch(out, h, info)
}

// gapOrder returns the best exp-Golomb order for the slot gaps of the
// candidates sel (in slot order).
func (e *Encoder) gapOrder(sel []int) uint {
	var h gapHist
	prev := int64(-1)
	for _, i := range sel {
		s := int64(e.cands[i].slot)
		h.add(uint64(s - prev - 1))
		prev = s
	}
	k, _ := h.best()
	return k
}

// stitch writes each packed part to out.
func (e *Encoder) stitch(out *Packets, h *Header, info *BuildInfo) {
	hp := *h
	hp.Parts = len(e.parts)
	for pi := range e.parts {
		e.writePart(&hp, pi)
		e.appendPart(out, info)
	}
	info.Parts = len(e.parts)
}

// writePart writes part pi into e.partW: kind byte, header, records (bit
// copies of the cached encodings). It returns the part's size in bits.
func (e *Encoder) writePart(hp *Header, pi int) int {
	pt := &e.parts[pi]
	hp.Part, hp.Count, hp.GapOrder = pi, pt.to-pt.from, pt.k
	w := &e.partW
	w.Reset(w.Bytes())
	w.WriteBits(uint64(KindSnapshot), 8)
	hp.AppendBits(w)
	e.partHdrBits = w.BitLen()
	prev := int64(-1)
	run := newMaskRun()
	for j := pt.from; j < pt.to; j++ {
		i := j
		if !e.selAll {
			i = e.sel[j]
		}
		cd := &e.cands[i]
		b0, maskSent := w.BitLen(), false
		// The gap code, the kind and mask prefix and (when they fit) the
		// body go out as one field.
		v, n := bitio.ExpGolombCode(uint64(int64(cd.slot)-prev-1), uint(pt.k)) // (gaps below 2^24, k ≤ 7: n < 64)
		prev = int64(cd.slot)
		var ce *cacheEntry
		switch cd.kind {
		case kindRemoval:
			n += 4 // 0000
		case kindFull:
			if cd.mem {
				v |= 0b1000 << n
				n += 4
			}
			ce = e.entry(cd)
		default:
			ce = e.entry(cd)
			switch {
			case ce.maskPred:
				v |= 1 << n
				n++
			case run.repeats(ce.mask, int(ce.maskBits)):
				v |= 0b10 << n
				n += 2
			default:
				v |= 0b100 << n
				n += 3
				maskSent = true
				w.WriteBits(v, n)
				v, n = 0, 0
				if ce.maskBits <= 64 {
					w.WriteBits(ce.mask, uint(ce.maskBits))
				} else {
					w.AppendBits(e.arenaOf(cd, ce)[ce.maskOff:], int(ce.maskBits))
				}
				run.note(ce.mask, int(ce.maskBits))
			}
		}
		// (v holds n < 64 bits: PutBits, which inlines.)
		switch {
		case ce == nil:
			w.PutBits(v, n)
		case ce.hasShort && n+uint(ce.bodyBits) < 64:
			w.PutBits(v|ce.short<<n, n+uint(ce.bodyBits))
		default:
			arena := e.arenaOf(cd, ce)
			if n+uint(ce.bodyBits) < 64 && int(ce.bodyOff)+8 <= len(arena) {
				body := binary.LittleEndian.Uint64(arena[ce.bodyOff:]) & (1<<ce.bodyBits - 1)
				w.PutBits(v|body<<n, n+uint(ce.bodyBits))
			} else {
				w.WriteBits(v, n)
				w.AppendBits(arena[ce.bodyOff:], int(ce.bodyBits))
			}
		}
		if e.acct != nil {
			e.acct.sent(e, cd, w.BitLen()-b0, maskSent)
		}
	}
	return w.BitLen()
}

// appendPart appends the part in e.partW to out, zstd-compressing its body
// where that strictly wins.
func (e *Encoder) appendPart(out *Packets, info *BuildInfo) {
	w := &e.partW
	info.HeaderBits += e.partHdrBits
	if e.acct != nil {
		e.acct.Headers += uint64(e.partHdrBits)
	}
	start := len(out.buf)
	out.buf = append(out.buf, w.Bytes()...)
	if e.Compression != nil && len(out.buf)-start > 1 {
		if z := e.Compression.compress(out.buf[start+1:]); z != nil {
			out.buf = append(out.buf[:start+1], z...)
			out.buf[start] |= FlagCompressed
			info.Compressed++
		}
	}
	out.ends = append(out.ends, len(out.buf))
}
