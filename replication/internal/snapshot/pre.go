package snapshot

import (
	"math/bits"

	"github.com/archenet/archenet/replication/bitio"
)

// Pre-encoding. A server with many clients encodes most delta records for
// one key: the clients ack at the same pace, so their baselines and
// prediction views are the same ticks. Each worker's encoder would encode
// such a record when one of its clients first needs it — once per worker,
// and from frames the clients' own work has pushed out of the CPU's caches
// since the last tick. Instead, right after the frame is built, the
// encoders encode the records of that key once, in parallel over disjoint
// slots ([World.BeginPreencode], [Encoder.Preencode]), into a table the
// Builds then only read. The key is the one most Builds of the last tick
// shared, a tick on ([World.EndPreencode]). A record's bytes depend only on
// the entity, the key and the tick's coding, so the datagrams are the
// same as without.

// preBit marks a candidate's entry index (cand.ent) as a slot of the
// World's pre-encoded records, not an index of the encoder's own cache.
const preBit = 1 << 31

// preRecords is the World's table of pre-encoded records.
type preRecords struct {
	on      bool   // records of key are pre-encoded for frame tick
	tick    uint32 // (0: none)
	key     recKey
	changed Bitset // the slots to encode: changed since key.src
	// wanted is the slots some client held or was to hold last tick (nil:
	// every slot): records of the others would be encoded for nobody
	wanted  Bitset
	has     Bitset // slots whose record is in entries
	entries []cacheEntry
	// arenas holds the records' bits, one per encoder
	// (Encoder.preArena; cacheEntry.arena says which); bytes each one's
	// bytes as its encoder left them (Writer.Bytes writes: the Builds,
	// on several goroutines, read these)
	arenas []bitio.Writer
	bytes  [][]byte

	// next is the key the next tick pre-encodes (nextOK); minShare is how
	// many Builds must have shared it (2; tests lower it).
	next     recKey
	nextOK   bool
	minShare int
	// idle counts ticks left without pre-encoding: fewer than half of the
	// records of a tick were used (clients that see few of the changed
	// entities, or that coded against other keys).
	idle int
}

// preIdle is how long pre-encoding pauses after a tick whose pre-encoded
// records were used fewer than once for every two encoded.
const preIdle = 16

// censusEntry counts the Builds of a tick that coded against one key.
type censusEntry struct {
	key recKey
	n   int
}

// maxCensus bounds the keys an encoder counts per tick.
const maxCensus = 4

// BeginPreencode readies the pre-encoding of the current frame's records
// (after Commit, before the tick's Builds) and returns how many words of
// the slot set the encoders are to share out ([Encoder.Preencode] on
// disjoint ranges of [0, n)); 0: none this tick.
func (w *World) BeginPreencode() int {
	p := &w.pre
	p.on = false
	f := w.Current()
	if f == nil || !p.nextOK {
		return 0
	}
	if p.idle > 0 {
		p.idle--
		return 0
	}
	k := p.next
	if k.src == 0 || k.src == f.Tick || int32(f.Tick-k.src) < 0 || w.Frame(k.src) == nil {
		return 0
	}
	if k.pb3 != 0 {
		k.quad = w.codes.quad // (a client's third view is extrapolated through when the tick says so)
	}
	changed, ok := w.ChangedSince(k.src)
	if !ok || len(changed) == 0 {
		return 0
	}
	p.on, p.tick, p.key, p.changed = true, f.Tick, k, changed
	p.has = p.has[:0]
	for len(p.has) < len(changed) {
		p.has = append(p.has, 0)
	}
	clear(p.has)
	if n := len(w.changedAt); len(p.entries) < n {
		p.entries = append(p.entries, make([]cacheEntry, n-len(p.entries))...)
	}
	for i := range p.arenas {
		p.arenas[i].Reset(p.arenas[i].Bytes())
		p.bytes[i] = nil
	}
	return len(changed)
}

// Preencode encodes the pre-encoded records of the slots in words
// [lo, hi) of the set BeginPreencode readied: present in the frame and
// changed since the key's baseline, in it with the same layout. Encoders
// may run it in parallel on disjoint ranges; none may Build meanwhile.
func (e *Encoder) Preencode(lo, hi int) {
	p := &e.w.pre
	if !p.on || e.acct != nil {
		return
	}
	e.begin()
	f := e.w.Current()
	hi = min(hi, len(p.changed), len(e.present))
	// The records' bits go to this encoder's pre-encoding arena.
	e.arena, p.arenas[e.preArena] = p.arenas[e.preArena], e.arena
	// In a large world the records' lanes in the key's views are far
	// apart: each word's are read ahead while the word before is encoded
	// (see touch).
	ahead := len(f.Slots) >= e.touchAt
	if ahead {
		e.touchFrames = [4]*Frame{f, e.w.Frame(p.key.src), e.w.Frame(p.key.src2), e.w.Frame(p.key.src3)}
	}
	for wi := lo; wi < hi; wi++ {
		word := p.preWord(e, wi)
		if ahead && wi+1 < hi {
			e.touchPre(p.preWord(e, wi+1), wi+1)
		}
		for ; word != 0; word &= word - 1 {
			slot := uint32(wi<<6 | bits.TrailingZeros64(word))
			if e.w.layoutAt[slot] > p.key.src {
				continue // a new incarnation or layout: a full record, of another key
			}
			ce := &p.entries[slot]
			*ce = cacheEntry{}
			e.encodeInto(ce, f, slot, -1, p.key)
			ce.arena = uint8(e.preArena)
			p.has[wi] |= 1 << (slot & 63)
			e.preEncoded++
		}
	}
	e.arena, p.arenas[e.preArena] = p.arenas[e.preArena], e.arena
	p.bytes[e.preArena] = p.arenas[e.preArena].Bytes()
}

// preWord returns the slots of word wi Preencode encodes (before it checks
// their layout).
func (p *preRecords) preWord(e *Encoder, wi int) uint64 {
	word := p.changed[wi] & e.present[wi]
	if p.wanted != nil {
		word &= p.wanted.word(wi)
	}
	return word
}

// touchPre reads the memory Preencode reads and writes for the slots of
// word wi: their lanes in the key's views (e.touchFrames) and their
// entries.
func (e *Encoder) touchPre(word uint64, wi int) {
	p := &e.w.pre
	var sum uint64
	for w := word; w != 0; w &= w - 1 {
		slot := wi<<6 | bits.TrailingZeros64(w)
		if slot < len(p.entries) {
			sum += uint64(p.entries[slot].bodyBits)
		}
		sum += e.touchLanes(slot)
	}
	e.touched += sum
}

// EndPreencode ends a tick's Builds on encs (every encoder of the World
// that built this tick): the key most of them shared, a tick on, is the
// one the next tick pre-encodes, when at least two Builds shared it, for
// the slots in wanted (nil: all; the entities the clients hold or are to
// hold: others would be encoded for nobody). Pre-encoding pauses for a
// while when this tick's records were used less than once for every two.
func (w *World) EndPreencode(encs []*Encoder, wanted Bitset) {
	p := &w.pre
	var all [maxCensus * 8]censusEntry
	merged := all[:0]
	hits, encoded := 0, 0
	for _, e := range encs {
		for _, c := range e.census[:e.censusN] {
			found := false
			for i := range merged {
				if merged[i].key == c.key {
					merged[i].n += c.n
					found = true
					break
				}
			}
			if !found && len(merged) < cap(merged) {
				merged = append(merged, c)
			}
		}
		hits, encoded = hits+e.PreHits, encoded+e.preEncoded
		e.censusN, e.PreHits, e.preEncoded = 0, 0, 0
	}
	if p.on && encoded > 0 && 2*hits < encoded {
		p.idle = preIdle
	}
	if wanted == nil {
		p.wanted = nil
	} else {
		p.wanted = append(p.wanted[:0], wanted...)
	}
	p.on = false
	best := -1
	for i := range merged {
		if best < 0 || merged[i].n > merged[best].n {
			best = i
		}
	}
	p.nextOK = best >= 0 && merged[best].n >= max(p.minShare, 1)
	if p.nextOK {
		p.next = merged[best].key.advanced()
	}
}

// advanced returns k a tick later: every view it names one tick newer (a
// client that acks every tick codes against that next).
func (k recKey) advanced() recKey {
	for _, t := range []*uint32{&k.src, &k.pb, &k.pb2, &k.src2, &k.pb3, &k.src3} {
		if *t != 0 {
			*t++
		}
	}
	return k
}

// noteCensus counts a Build's common key (the one most of its delta
// records are coded for).
func (e *Encoder) noteCensus(k recKey) {
	for i := range e.census[:e.censusN] {
		if e.census[i].key == k {
			e.census[i].n++
			return
		}
	}
	if e.censusN < maxCensus {
		e.census[e.censusN] = censusEntry{key: k, n: 1}
		e.censusN++
	}
}

// setPre notes which of the Build's common keys is the pre-encoded one.
func (e *Encoder) setPre(S uint32) {
	e.preKi = [3]bool{}
	p := &e.w.pre
	if !p.on || p.tick != S || e.acct != nil {
		return
	}
	for i, k := range e.pc.keys {
		e.preKi[i] = k == p.key
	}
}

// preRecord returns the pre-encoded record of slot for key k, if there is
// one. It looks only when one of the Build's common keys is the
// pre-encoded one (setPre): other keys of the Build (a deferred entity's
// older value) rarely are, and missing one costs an encode, not a byte.
func (e *Encoder) preRecord(slot uint32, k *recKey) (*cacheEntry, bool) {
	p := &e.w.pre
	if e.preKi == [3]bool{} || !p.has.Has(slot) || *k != p.key {
		return nil, false
	}
	e.PreHits++
	return &p.entries[slot], true
}

// preSend counts a send of slot's pre-encoded record (for the choice of
// the coding; see codeShard.flush).
func (e *Encoder) preSend(slot uint32) {
	if int(slot) >= len(e.preSends) {
		e.preSends = append(e.preSends, make([]uint32, int(slot)+1-len(e.preSends))...)
	}
	if e.preSends[slot] == 0 {
		e.prePending = append(e.prePending, slot)
	}
	e.preSends[slot]++
}

// arenaOf returns the bytes that candidate cd's record (ce) points into.
func (e *Encoder) arenaOf(cd *cand, ce *cacheEntry) []byte {
	if cd.ent&preBit != 0 {
		return e.w.pre.bytes[ce.arena]
	}
	return e.arena.Bytes()
}
