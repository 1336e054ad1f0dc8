package encode

import (
	"encoding/binary"

	"github.com/archenet/archenet/replication/bitio"
	"github.com/archenet/archenet/replication/internal/codec"
	"github.com/archenet/archenet/replication/internal/wire"
)

// packer writes the selected records into datagrams.
type packer struct {
	partW bitio.Writer
	// partHdrBits: the kind byte and header bits of the part in partW
	partHdrBits int
	packed      []int
	parts       []part
	// need is the least byte allowance with which the tick's packing comes
	// out the same (noShare: none more than the Build's own); hdrBits the
	// kind byte and header bits of each part written
	need    int
	hdrBits []int
	// single: the bits of emit's attempt at one datagram (−1: none made)
	single int
	// passes: pack's passes, each with the parts it made (in passParts)
	passes    []packPass
	passParts []part
}

// packPass is one pass of pack: the parts count it assumed, and the parts
// it made (passParts[from:to]).
type packPass struct {
	assume, from, to int
}

// recordBits is the exact size of candidate cd in a datagram: gap code (order
// k, after slot prev), kind and body, with the field masks repeated if run
// allows. It notes cd's masks in run.
func (e *Encoder) recordBits(cd *cand, prev int64, k uint, run *codec.MaskRun) int {
	n := bitio.ExpGolombLen(uint64(int64(cd.slot)-prev-1), k)
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
		case run.Repeats(ce.mask, int(ce.maskBits)):
			n += 2
		default:
			n += 3 + int(ce.maskBits)
			run.Note(ce.mask, int(ce.maskBits))
		}
	}
	return n
}

// addedBits is what candidate cd adds to a datagram that holds count
// records, the last of slot prev: its record (recordBits) and the growth of
// the header's record count.
func (e *Encoder) addedBits(cd *cand, prev int64, k uint, run *codec.MaskRun, count int) int {
	return e.recordBits(cd, prev, k, run) + bitio.ExpGolombLen(uint64(count+1), 0) - bitio.ExpGolombLen(uint64(count), 0)
}

// part is one datagram of the tick: the records e.sel.idx[from:to].
type part struct {
	from, to int
	k        uint8
}

// pack splits the selected records, in slot order, into datagrams of at most
// mtu bytes (at most maxParts of them, at most total bytes together). Records
// that do not fit are deselected (they wait, gaining priority). Each part's
// gap order is then the best for its own gaps, which never makes it longer
// than packed.
func (e *Encoder) pack(mtu, maxParts, total int, h *wire.Header, k0 uint) {
	// Header sizes depend on the number of parts: pack assuming one, and
	// again with more while the packing needs more (a header only shrinks
	// when fewer parts are needed than assumed).
	e.packer.passes, e.packer.passParts = e.packer.passes[:0], e.packer.passParts[:0]
	for assume, iter := 1, 0; ; iter++ {
		n := e.packWith(mtu, maxParts, total, h, assume, k0)
		from := len(e.packer.passParts)
		e.packer.passParts = append(e.packer.passParts, e.packer.parts...)
		e.packer.passes = append(e.packer.passes, packPass{assume: assume, from: from, to: len(e.packer.passParts)})
		if n <= assume || iter == 8 {
			break
		}
		assume = n
	}
	e.sel.idx = append(e.sel.idx[:0], e.packer.packed...)
	if len(e.packer.parts) == 0 {
		// Nothing to send still sends the header: it moves the client's
		// views on and carries the input ack.
		e.packer.parts = append(e.packer.parts, part{})
	}
	for pi := range e.packer.parts {
		pt := &e.packer.parts[pi]
		pt.k = uint8(e.gapOrder(e.sel.idx[pt.from:pt.to]))
	}
}

// packWith packs e.sel.idx into e.packer.packed and e.packer.parts, assuming the tick has
// `assume` parts (for header sizes) and gap order k. It returns the number
// of parts.
func (e *Encoder) packWith(mtu, maxParts, total int, h *wire.Header, assume int, k uint) int {
	e.packer.packed, e.packer.parts = e.packer.packed[:0], e.packer.parts[:0]
	capBits := (mtu - 1) * 8 // the kind byte aside
	spentBytes := 0          // of the parts closed so far
	hp := *h
	hp.Parts, hp.GapOrder = max(assume, 1), 7
	var cur part
	var bitsNow int
	var prev int64
	var run codec.MaskRun
	open := func() {
		cur = part{from: len(e.packer.packed)}
		hp.Part, hp.Count = len(e.packer.parts), 0
		bitsNow, prev, run = hp.BitLen(), -1, codec.NewMaskRun()
	}
	// fits reports whether candidate i fits the open part; if so it adds it.
	fits := func(i int) bool {
		cd := &e.cands.list[i]
		r := run
		b := e.addedBits(cd, prev, k, &r, hp.Count)
		if bitsNow+b > capBits {
			return false
		}
		if need := spentBytes + 1 + (bitsNow+b+7)/8; need > total {
			return false
		} else if need > e.packer.need {
			e.packer.need = need
		}
		bitsNow += b
		hp.Count++
		prev, run = int64(cd.slot), r
		e.packer.packed = append(e.packer.packed, i)
		return true
	}
	closePart := func() {
		if cur.to = len(e.packer.packed); cur.to > cur.from {
			e.packer.parts = append(e.packer.parts, cur)
			spentBytes += 1 + (bitsNow+7)/8
		}
	}
	open()
	for _, i := range e.sel.idx {
		if fits(i) {
			continue
		}
		if hp.Count == 0 {
			continue // too large even for an empty datagram: it waits
		}
		closePart()
		if len(e.packer.parts) >= maxParts {
			return len(e.packer.parts) // the rest wait
		}
		open()
		fits(i) // a record that fits no empty datagram waits
	}
	closePart()
	return len(e.packer.parts)
}

// emit packs the selected records into the tick's datagrams and writes
// them to out. Most ticks fit one datagram: it is written at once and kept
// if it fits, which is exactly what packing would have produced; otherwise
// (and with bit accounting on) the records are packed first.
func (e *Encoder) emit(out *Packets, mtu, maxParts, total int, h *wire.Header, info *BuildInfo) {
	k0 := e.cands.gapK // the order for all candidates: right unless some wait
	n := len(e.cands.list)
	if !e.sel.all {
		k0, n = e.gapOrder(e.sel.idx), len(e.sel.idx)
	}
	e.packer.need = e.sel.allBytes
	e.packer.hdrBits = e.packer.hdrBits[:0]
	e.packer.single = -1
	e.packer.passes = e.packer.passes[:0]
	if e.acct == nil {
		e.packer.parts = append(e.packer.parts[:0], part{from: 0, to: n, k: uint8(k0)})
		hp := *h
		hp.Parts = 1
		bits := e.writePart(&hp, 0)
		e.packer.single = bits
		if bits <= mtu*8 {
			if (bits+7)/8 <= total {
				e.packer.need = max(e.packer.need, (bits+7)/8)
				e.packer.hdrBits = append(e.packer.hdrBits, e.packer.partHdrBits)
				e.appendPart(out, info)
				info.Parts = 1
				return
			}
			e.packer.need = noShare // (with more allowance, one datagram)
		}
	}
	if e.sel.all {
		e.sel.fill(&e.cands)
		e.sel.all = false
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
		s := int64(e.cands.list[i].slot)
		h.add(uint64(s - prev - 1))
		prev = s
	}
	k, _ := h.best()
	return k
}

// stitch writes each packed part to out.
func (e *Encoder) stitch(out *Packets, h *wire.Header, info *BuildInfo) {
	hp := *h
	hp.Parts = len(e.packer.parts)
	e.packer.hdrBits = e.packer.hdrBits[:0]
	for pi := range e.packer.parts {
		e.writePart(&hp, pi)
		e.packer.hdrBits = append(e.packer.hdrBits, e.packer.partHdrBits)
		e.appendPart(out, info)
	}
	info.Parts = len(e.packer.parts)
}

// writePart writes part pi into e.packer.partW: kind byte, header, records (bit
// copies of the cached encodings). It returns the part's size in bits.
func (e *Encoder) writePart(hp *wire.Header, pi int) int {
	pt := &e.packer.parts[pi]
	hp.Part, hp.Count, hp.GapOrder = pi, pt.to-pt.from, pt.k
	w := &e.packer.partW
	w.Reset(w.Bytes())
	w.WriteBits(uint64(wire.KindSnapshot), 8)
	hp.AppendBits(w)
	e.packer.partHdrBits = w.BitLen()
	prev := int64(-1)
	run := codec.NewMaskRun()
	for j := pt.from; j < pt.to; j++ {
		i := j
		if !e.sel.all {
			i = e.sel.idx[j]
		}
		cd := &e.cands.list[i]
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
			case run.Repeats(ce.mask, int(ce.maskBits)):
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
				run.Note(ce.mask, int(ce.maskBits))
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

// appendPart appends the part in e.packer.partW to out, zstd-compressing its body
// where that strictly wins.
func (e *Encoder) appendPart(out *Packets, info *BuildInfo) {
	w := &e.packer.partW
	info.HeaderBits += e.packer.partHdrBits
	if e.acct != nil {
		e.acct.Headers += uint64(e.packer.partHdrBits)
	}
	start := len(out.buf)
	out.buf = append(out.buf, w.Bytes()...)
	if e.Compression != nil && len(out.buf)-start > 1 {
		if z := e.Compression.Compress(out.buf[start+1:]); z != nil {
			out.buf = append(out.buf[:start+1], z...)
			out.buf[start] |= wire.FlagCompressed
			info.Compressed++
		}
	}
	out.ends = append(out.ends, len(out.buf))
}
