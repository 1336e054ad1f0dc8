package encode

import (
	"math/bits"

	"github.com/archenet/archenet/replication/bitio"
	"github.com/archenet/archenet/replication/internal/entity"
	"github.com/archenet/archenet/replication/internal/gang"
	"github.com/archenet/archenet/replication/internal/store"
)

// Pre-encoding. A server with many clients encodes most delta records for
// one key: the clients ack at the same pace, so their baselines and
// prediction views are the same ticks. Each worker's encoder would encode
// such a record when one of its clients first needs it — once per worker,
// and from frames the clients' own work has pushed out of the CPU's caches
// since the last tick. Instead, right after the frame is built, the
// encoders encode the records of that key once, in parallel over disjoint
// slots ([Group.BeginPreencode], [Encoder.Preencode]), into the Group's
// table, which the Builds then only read. The key is the one most Builds
// of the last tick shared, a tick on ([Group.EndPreencode]). A record's
// bytes depend only on the entity, the key and the tick's coding, so the
// datagrams are the same as without.

// preBit marks a candidate's entry index (cand.ent) as a slot of the
// Group's pre-encoded records, not an index of the encoder's own cache.
const preBit = 1 << 31

// preTable is the Group's table of pre-encoded records. Each encoder
// writes the entries of its share of slots, and the bits of its records
// into an arena of its own (preState.arena); the table keeps only the
// bytes each arena held at the end of Preencode, which every Build reads.
type preTable struct {
	on      bool   // records of key are pre-encoded for frame tick
	tick    uint32 // (0: none)
	key     recKey
	changed entity.Bitset // the slots to encode: changed since key.src
	// wanted is the slots some client held or was to hold last tick (nil:
	// every slot): records of the others would be encoded for nobody
	wanted  entity.Bitset
	has     entity.Bitset // slots whose record is in entries
	entries []cacheEntry
	// bytes is each encoder's pre-encoding arena as Preencode left it,
	// by Encoder.preArena (cacheEntry.arena says which)
	bytes [][]byte

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

// preState is one encoder's part in pre-encoding: the arena its
// pre-encoded records' bits go to, which of the Build's common keys is the
// pre-encoded one, the sends of pre-encoded records by slot (and the slots
// with some) for the coding's counts, and the tick's Builds by common key.
type preState struct {
	arena   bitio.Writer
	index   int // this encoder's arena in preTable.bytes
	ki      [3]bool
	sends   []uint32
	pending []uint32
	census  [maxCensus]censusEntry
	censusN int
	encoded int
}

// censusEntry counts the Builds of a tick that coded against one key.
type censusEntry struct {
	key recKey
	n   int
}

// maxCensus bounds the keys an encoder counts per tick.
const maxCensus = 4

// BeginPreencode readies the pre-encoding of the current frame's records
// (after BeginTick, before the tick's Builds) and returns how many words of
// the slot set the encoders are to share out ([Encoder.Preencode] on
// disjoint ranges of [0, n)); 0: none this tick.
func (g *Group) BeginPreencode() int {
	g.BeginTick() // (the tick's quad choice names the key)
	p := &g.pre
	p.on = false
	f := g.r.Current()
	if f == nil || !p.nextOK {
		return 0
	}
	if p.idle > 0 {
		p.idle--
		return 0
	}
	k := p.next
	if k.src == 0 || k.src == f.Tick || int32(f.Tick-k.src) < 0 || g.r.Frame(k.src) == nil {
		return 0
	}
	if k.pb3 != 0 {
		k.quad = g.codes.quad // (a client's third view is extrapolated through when the tick says so)
	}
	changed, ok := g.r.ChangedSince(k.src)
	if !ok || len(changed) == 0 {
		return 0
	}
	p.on, p.tick, p.key, p.changed = true, f.Tick, k, changed
	p.has = p.has[:0]
	for len(p.has) < len(changed) {
		p.has = append(p.has, 0)
	}
	clear(p.has)
	if n := g.r.Slots(); len(p.entries) < n {
		p.entries = append(p.entries, make([]cacheEntry, n-len(p.entries))...)
	}
	clear(p.bytes)
	return len(changed)
}

// Preencode pre-encodes the tick's records on gg's goroutines (encoder i
// of the group on goroutine i, as a server makes them: one per worker), in
// shares of whole 64-slot words, about preencodeWords each: BeginPreencode,
// then each share's [Encoder.Preencode].
func (g *Group) Preencode(gg *gang.Gang) {
	n := g.BeginPreencode()
	if n == 0 {
		return
	}
	ps := &g.preShares
	ps.words, ps.shares = n, min(max(n/preencodeWords, 1), maxPreShares)
	if ps.run == nil {
		ps.run = g.preencodeShare // (once: a method value is a closure)
	}
	gg.EachOn(ps.shares, ps.run)
}

// preShares is the state of a Preencode on the workers: the words of the
// slot set and how many shares they are cut into.
type preShares struct {
	words, shares int
	run           func(wi, c int) // preencodeShare, made once
}

// preencodeShare pre-encodes share c on goroutine wi.
func (g *Group) preencodeShare(wi, c int) {
	n, k := g.preShares.words, g.preShares.shares
	g.encs[wi].Preencode(c*n/k, (c+1)*n/k)
}

// preencodeWords is about how many 64-slot words of the world a goroutine
// takes at a time when the workers pre-encode records together;
// maxPreShares bounds the shares.
const (
	preencodeWords = 2
	maxPreShares   = 64
)

// Preencode encodes the pre-encoded records of the slots in words
// [lo, hi) of the set BeginPreencode readied: present in the frame and
// changed since the key's baseline, in it with the same layout. Encoders
// may run it in parallel on disjoint ranges; none may Build meanwhile.
func (e *Encoder) Preencode(lo, hi int) {
	p := &e.g.pre
	if !p.on || e.acct != nil {
		return
	}
	e.begin()
	f := e.r.Current()
	hi = min(hi, len(p.changed), len(e.cache.present))
	// The records' bits go to this encoder's pre-encoding arena (the
	// coder writes into its arena: the two are swapped meanwhile).
	if e.pre.arena.BitLen() != 0 && p.bytes[e.pre.index] == nil {
		e.pre.arena.Reset(e.pre.arena.Bytes()) // (the arena's first share of the tick)
	}
	e.coder.Arena, e.pre.arena = e.pre.arena, e.coder.Arena
	// In a large world the records' lanes in the key's views are far
	// apart: each word's are read ahead while the word before is encoded
	// (see touch).
	ahead := len(f.Slots) >= e.cands.touchAt
	if ahead {
		e.cands.touchFrames = [4]*store.Frame{f, e.r.Frame(p.key.src), e.r.Frame(p.key.src2), e.r.Frame(p.key.src3)}
	}
	layoutAt := e.r.LayoutAts()
	for wi := lo; wi < hi; wi++ {
		word := p.preWord(e, wi)
		if ahead && wi+1 < hi {
			e.touchPre(p.preWord(e, wi+1), wi+1)
		}
		for ; word != 0; word &= word - 1 {
			slot := uint32(wi<<6 | bits.TrailingZeros64(word))
			if layoutAt[slot] > p.key.src {
				continue // a new incarnation or layout: a full record, of another key
			}
			ce := &p.entries[slot]
			*ce = cacheEntry{}
			e.encodeInto(ce, f, slot, -1, p.key)
			ce.arena = uint8(e.pre.index)
			p.has[wi] |= 1 << (slot & 63)
			e.pre.encoded++
		}
	}
	e.coder.Arena, e.pre.arena = e.pre.arena, e.coder.Arena
	p.bytes[e.pre.index] = e.pre.arena.Bytes()
}

// preWord returns the slots of word wi Preencode encodes (before it checks
// their layout).
func (p *preTable) preWord(e *Encoder, wi int) uint64 {
	word := p.changed[wi] & e.cache.present[wi]
	if p.wanted != nil {
		word &= p.wanted.Word(wi)
	}
	return word
}

// touchPre reads the memory Preencode reads and writes for the slots of
// word wi: their lanes in the key's views (touchFrames) and their entries.
func (e *Encoder) touchPre(word uint64, wi int) {
	p := &e.g.pre
	var sum uint64
	for w := word; w != 0; w &= w - 1 {
		slot := wi<<6 | bits.TrailingZeros64(w)
		if slot < len(p.entries) {
			sum += uint64(p.entries[slot].bodyBits)
		}
		sum += e.cands.touchLanes(slot)
	}
	e.cands.touched += sum
}

// end ends a tick's Builds on encs: the key most of them shared, a tick
// on, is the one the next tick pre-encodes, when at least minShare Builds
// shared it, for the slots in wanted. Pre-encoding pauses for a while when
// this tick's records were used less than once for every two.
func (p *preTable) end(encs []*Encoder, wanted entity.Bitset) {
	var all [maxCensus * 8]censusEntry
	merged := all[:0]
	hits, encoded := 0, 0
	for _, e := range encs {
		for _, c := range e.pre.census[:e.pre.censusN] {
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
		hits, encoded = hits+e.PreHits, encoded+e.pre.encoded
		e.pre.censusN, e.PreHits, e.pre.encoded = 0, 0, 0
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
	ps := &e.pre
	for i := range ps.census[:ps.censusN] {
		if ps.census[i].key == k {
			ps.census[i].n++
			return
		}
	}
	if ps.censusN < maxCensus {
		ps.census[ps.censusN] = censusEntry{key: k, n: 1}
		ps.censusN++
	}
}

// setPre notes which of the Build's common keys is the pre-encoded one.
func (e *Encoder) setPre(S uint32) {
	e.pre.ki = [3]bool{}
	p := &e.g.pre
	if !p.on || p.tick != S || e.acct != nil {
		return
	}
	for i, k := range e.pc.keys {
		e.pre.ki[i] = k == p.key
	}
}

// preRecord returns the pre-encoded record of slot for key k, if there is
// one. It looks only when one of the Build's common keys is the
// pre-encoded one (setPre): other keys of the Build (a deferred entity's
// older value) rarely are, and missing one costs an encode, not a byte.
func (e *Encoder) preRecord(slot uint32, k *recKey) (*cacheEntry, bool) {
	p := &e.g.pre
	if e.pre.ki == [3]bool{} || !p.has.Has(slot) || *k != p.key {
		return nil, false
	}
	e.PreHits++
	return &p.entries[slot], true
}

// preSend counts a send of slot's pre-encoded record (for the choice of
// the coding; see codeShard.flush).
func (e *Encoder) preSend(slot uint32) { e.preSendN(slot, 1) }

// preSendN counts n sends of slot's pre-encoded record.
func (e *Encoder) preSendN(slot, n uint32) {
	ps := &e.pre
	if int(slot) >= len(ps.sends) {
		ps.sends = append(ps.sends, make([]uint32, int(slot)+1-len(ps.sends))...)
	}
	if ps.sends[slot] == 0 {
		ps.pending = append(ps.pending, slot)
	}
	ps.sends[slot] += n
}

// arenaOf returns the bytes that candidate cd's record (ce) points into.
func (e *Encoder) arenaOf(cd *cand, ce *cacheEntry) []byte {
	if cd.ent&preBit != 0 {
		return e.g.pre.bytes[ce.arena]
	}
	return e.coder.Arena.Bytes()
}
