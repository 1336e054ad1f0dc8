package encode

import (
	"math/bits"

	"github.com/archenet/archenet/replication/bitio"
	"github.com/archenet/archenet/replication/internal/entity"
	"github.com/archenet/archenet/replication/schema"
)

// Account attributes the bits of the snapshot datagrams an [Encoder] built
// to what they carry: each component type's data, the per-record framing
// and the per-datagram headers. It counts exact bits as written, before
// compression (a zstd-compressed datagram is smaller on the wire than its
// account) and without the padding of each datagram to whole bytes.
type Account struct {
	// Components holds, per component ID (registry order), the bits of that
	// component's data: its lanes in full records; its field-mask bits and
	// residuals in delta records.
	Components []uint64
	// Records is the per-record framing: slot gap codes, record kinds,
	// mask-repeat flags, the prediction flag of a delta record, and a full
	// record's generation, owner and component set; removal records are
	// only framing.
	Records uint64
	// Headers is the datagrams' kind bytes and headers.
	Headers uint64
	// Unattributed is the bits of records the encoder had cached before
	// accounting was turned on (only in the tick it was turned on).
	Unattributed uint64
}

// Add adds b's counts to a.
func (a *Account) Add(b *Account) {
	for len(a.Components) < len(b.Components) {
		a.Components = append(a.Components, 0)
	}
	for i, v := range b.Components {
		a.Components[i] += v
	}
	a.Records += b.Records
	a.Headers += b.Headers
	a.Unattributed += b.Unattributed
}

// set makes a a copy of b (keeping a's array).
func (a *Account) set(b *Account) {
	a.Components = append(a.Components[:0], b.Components...)
	a.Records, a.Headers, a.Unattributed = b.Records, b.Headers, b.Unattributed
}

// sub takes b's counts from a (b counted no more of any than a).
func (a *Account) sub(b *Account) {
	for i := range min(len(a.Components), len(b.Components)) {
		a.Components[i] -= b.Components[i]
	}
	a.Records -= b.Records
	a.Headers -= b.Headers
	a.Unattributed -= b.Unattributed
}

// Total returns every bit counted.
func (a *Account) Total() uint64 {
	n := a.Records + a.Headers + a.Unattributed
	for _, v := range a.Components {
		n += v
	}
	return n
}

// SetAccounting turns bit accounting ([Encoder.Account]) on or off. Turning
// it on starts from zero counts. Off (the default), building costs one nil
// check per record. Call it between builds, not during one.
func (e *Encoder) SetAccounting(on bool) {
	if !on {
		e.acct, e.coder.Account = nil, false
		return
	}
	e.coder.Account = true
	e.acct = &bitAccount{}
	e.acct.Components = make([]uint64, len(e.plans))
}

// Account returns the bit accounting since it was last turned on (nil when
// it is off). The Account is the encoder's own and changes with every build:
// copy it ([Account.Add]) to keep it.
func (e *Encoder) Account() *Account {
	if e.acct == nil {
		return nil
	}
	return &e.acct.Account
}

// bitAccount is an encoder's accounting state: the counts, and for each
// cache entry encoded since accounting was turned on, its bits per
// component (noted when the record is encoded, added when it is sent).
type bitAccount struct {
	Account
	notes   []recNote // per cache slot·2 + way
	vals    []uint32  // this tick's notes' values: mask bits, body bits per component
	scratch bitio.Writer
}

// recNote is the per-component split of one cache entry's record.
type recNote struct {
	tick uint32 // frame tick of the entry (0: none)
	off  uint32 // into vals
	set  uint64 // component set
}

// begin starts a new tick's notes.
func (a *bitAccount) begin() { a.vals = a.vals[:0] }

func (a *bitAccount) note(e *Encoder, slot uint32, ce *cacheEntry, set uint64) *recNote {
	i := int(e.cache.indexOf(slot, ce))
	for len(a.notes) <= i {
		a.notes = append(a.notes, recNote{})
	}
	n := &a.notes[i]
	*n = recNote{tick: e.cache.entryTick(uint32(i)), off: uint32(len(a.vals)), set: set}
	return n
}

// noteFull notes a full record's bits per component.
func (a *bitAccount) noteFull(e *Encoder, slot uint32, ce *cacheEntry, m entity.Meta, lanes []uint64, owner bool) {
	a.note(e, slot, ce, m.Set)
	off := 0
	for s := m.Set; s != 0; s &= s - 1 {
		p := e.plans[bits.TrailingZeros64(s)]
		n := p.NumLanes()
		w := &a.scratch
		w.Reset(w.Bytes())
		p.Write(w, lanes[off:off+n], owner)
		a.vals = append(a.vals, 0, uint32(w.BitLen()))
		off += n
	}
}

// noteDelta notes a delta record's mask and body bits per component, from
// the masks and body sizes the encoder left (e.coder.GroupMasks(), e.coder.CompBody()).
func (a *bitAccount) noteDelta(e *Encoder, slot uint32, ce *cacheEntry, set uint64, owner bool) {
	a.note(e, slot, ce, set)
	for ci, s := 0, set; s != 0; ci, s = ci+1, s&(s-1) {
		p := e.plans[bits.TrailingZeros64(s)]
		mask := 1 // the component's "changed" bit
		if gm := e.coder.GroupMasks()[ci]; gm != 0 {
			mask += visibleGroups(p, owner)
		}
		a.vals = append(a.vals, uint32(mask), e.coder.CompBody()[ci])
	}
}

func visibleGroups(p *schema.Plan, owner bool) int {
	n := 0
	for _, g := range p.Groups() {
		if owner || !g.OwnerOnly {
			n++
		}
	}
	return n
}

// sent adds a record of recBits bits, as stitched into a datagram, to the
// counts; maskSent says whether a delta's field masks were written (not
// repeated).
func (a *bitAccount) sent(e *Encoder, cd *cand, recBits int, maskSent bool) {
	if cd.kind == kindRemoval {
		a.Records += uint64(recBits)
		return
	}
	i := int(cd.ent)
	if t := e.cache.entryTick(cd.ent); i >= len(a.notes) || a.notes[i].tick != t || t == 0 {
		a.Unattributed += uint64(recBits)
		return
	}
	n := &a.notes[i]
	rest := recBits
	v := a.vals[n.off:]
	for j, s := 0, n.set; s != 0; j, s = j+1, s&(s-1) {
		b := int(v[2*j+1])
		if maskSent {
			b += int(v[2*j])
		}
		a.Components[bits.TrailingZeros64(s)] += uint64(b)
		rest -= b
	}
	a.Records += uint64(rest)
}
