package snapshot

import (
	"math/bits"
	"unsafe"
)

// Client is the server's replication state for one client: the views it
// was sent (what it holds after each datagram, used as baselines once
// acked), its ack state and its per-entity priority accumulators.
type Client struct {
	// ID is the client's owner id: owner-only fields of entities whose
	// Meta.Owner equals ID are sent to this client only. 0 = owns nothing.
	ID uint8

	views []view
	lists []viewLists // per view, at the same index
	// sets holds the views' member sets: views whose members are the same
	// share one (most ticks change no membership), copied when one of them
	// changes (setMember). freeSets lists the unused ones.
	sets     []memberSet
	freeSets []int32
	// acc is the priority each entity deferred last tick accumulated
	// since it was last sent (sorted by slot); accNext the spare list the
	// next tick's is built in. An entity that stops being a candidate (it
	// left the client's interest unsent, or its value came back to the
	// client's) loses its accumulated priority.
	acc, accNext []accEntry

	undoBuf, mergeBuf []behindEntry
	// recsPool holds the record lists of acked views for the next ones.
	recsPool [][]sentRec

	// bestAck is the newest tick whose view was acked (0 = none): the
	// baseline, while its view and frame are kept.
	bestAck uint32

	// cover is what Acks have named so far, bit i being tick coverNewest−i.
	cover       uint64
	coverNewest uint32

	// Counters.
	Sent, Acked uint64
	// AckedPartial counts acked ticks of which some datagrams were lost.
	AckedPartial uint64
	// NewestAck is the newest tick the client acknowledged (0 = none).
	NewestAck uint32

	rate, burst, tokens float64 // byte budget per second (0 = unlimited)
	predOff             bool    // prediction did not pay off lately
}

// SetRate limits the client to bytesPerSecond of snapshot datagrams with
// bursts up to burst bytes (a token bucket refilled by [Client.Refill]).
// 0 removes the limit.
func (c *Client) SetRate(bytesPerSecond, burst int) {
	c.rate, c.burst = float64(bytesPerSecond), float64(max(burst, 0))
	if c.tokens > c.burst {
		c.tokens = c.burst
	}
}

// Rate returns the byte budget per second (0 = unlimited).
func (c *Client) Rate() int { return int(c.rate) }

// Refill adds seconds × rate bytes to the budget, up to the burst size. The
// server calls it once per net tick with the tick interval.
func (c *Client) Refill(seconds float64) {
	if c.rate > 0 {
		c.tokens = min(c.burst, c.tokens+c.rate*seconds)
	}
}

// budget returns the byte budget for the next datagram.
func (c *Client) budget(limit int) int {
	if c.rate <= 0 {
		return limit
	}
	return min(limit, int(c.tokens))
}

func (c *Client) spend(n int) {
	if c.rate > 0 {
		c.tokens -= float64(n)
	}
}

// view is what a client holds after decoding the datagram of tick: the
// member entities, each at the newest frame's value except the "behind"
// ones, which hold the value of an older frame (deferred by the budget).
//
// A view is 32 bytes, with no pointer: a Build reads the few views around
// its baseline, two to a cache line. Its lists (viewLists) are apart, in
// Client.lists at the same index, read only when hasBehind or hasRecs says
// they hold something.
type view struct {
	tick uint32
	base uint32 // the baseline tick the view was built against (0 = none)
	// inputAck, if hasInputAck, is the input ack the view's datagram
	// carried: later datagrams built on this view send theirs relative to it.
	inputAck uint32
	members  int32  // its member set: an index of Client.sets (−1: none, empty)
	coding   Coding // the residual coding of the view's records
	// parts is how many datagrams the tick was sent in (≤ MaxParts)
	parts       uint8
	used        bool
	acked       bool
	hasInputAck bool
	// hasBehind: the view has deferred entries (viewLists.behind);
	// behindArr: viewLists.behind keeps an array (for reuse); hasRecs: its
	// datagrams' records are listed (viewLists.recs)
	hasBehind, behindArr, hasRecs bool
}

// viewLists is what a view lists besides its scalars: its deferred
// entries, sorted by slot, and, for a tick sent in more than one datagram
// whose ack is still to come, which records each datagram carried (slot
// order): what an ack naming only some parts undoes. Empty lists keep
// their arrays for reuse.
type viewLists struct {
	behind []behindEntry
	recs   []sentRec
}

type behindEntry struct{ slot, src uint32 }

// sentRec is one record of a view's datagrams.
type sentRec struct {
	slot, src uint32 // src: tick of the value the client held before (0: none)
	part      uint8
	kind      uint8
	mem       bool // the client held the entity before
}

// NewClient returns the state of a client with owner id id, keeping depth
// views (0 = DefaultDepth; use the World's depth).
func NewClient(id uint8, depth int) *Client {
	c := &Client{}
	c.Init(id, depth)
	return c
}

// Init makes c the state of a new client (as NewClient), in place: a
// server keeps it inside its own per-client state.
func (c *Client) Init(id uint8, depth int) {
	if depth <= 0 {
		depth = DefaultDepth
	}
	*c = Client{ID: id, views: make([]view, depth), lists: make([]viewLists, depth)}
	for i := range c.views {
		c.views[i].members = -1
	}
}

// spareSets is how many unused member sets keep their arrays for reuse.
const spareSets = 2

// memberSet is a set of entities one or more views hold.
type memberSet struct {
	bits Bitset
	refs int32 // views holding it
}

// membersOf returns the entities v holds (read-only: change them with
// setMember).
func (c *Client) membersOf(v *view) Bitset {
	if v.members < 0 {
		return nil
	}
	return c.sets[v.members].bits
}

// shareMembers makes v hold the member set of from (nil: none).
func (c *Client) shareMembers(v, from *view) {
	c.releaseMembers(v)
	if from != nil && from.members >= 0 {
		v.members = from.members
		c.sets[v.members].refs++
	}
}

// releaseMembers lets go of v's member set.
func (c *Client) releaseMembers(v *view) {
	if v.members < 0 {
		return
	}
	s := &c.sets[v.members]
	if s.refs--; s.refs == 0 {
		if len(c.freeSets) >= spareSets {
			s.bits = nil // (a burst of distinct sets is over: not kept resident)
		}
		c.freeSets = append(c.freeSets, v.members)
	}
	v.members = -1
}

// setMember adds slot to v's members (in) or takes it out, copying the
// set first if other views share it; a set it does not change is not
// copied.
func (c *Client) setMember(v *view, slot uint32, in bool) {
	if c.membersOf(v).Has(slot) == in {
		return
	}
	if v.members < 0 || c.sets[v.members].refs > 1 {
		var i int32
		if n := len(c.freeSets); n > 0 {
			i, c.freeSets = c.freeSets[n-1], c.freeSets[:n-1]
		} else {
			c.sets = append(c.sets, memberSet{})
			i = int32(len(c.sets) - 1)
		}
		s := &c.sets[i]
		s.bits = append(s.bits[:0], c.membersOf(v)...)
		s.refs = 1
		c.releaseMembers(v)
		v.members = i
	}
	if s := &c.sets[v.members]; in {
		s.bits.Set(slot)
	} else {
		s.bits.Clear(slot)
	}
}

// accEntry is the priority a deferred entity accumulated.
type accEntry struct {
	slot uint32
	acc  float32
}

// accMerge rebuilds a client's accumulators from the candidates of a tick,
// which come in slot order: take returns a candidate's accumulated
// priority, keep lists a candidate deferred again with its new one.
type accMerge struct {
	old, next []accEntry
	j         int
}

func (c *Client) startAcc() accMerge { return accMerge{old: c.acc, next: c.accNext[:0]} }

// take returns slot's accumulated priority (0: none).
func (m *accMerge) take(slot uint32) float32 {
	for m.j < len(m.old) && m.old[m.j].slot < slot {
		m.j++
	}
	if m.j < len(m.old) && m.old[m.j].slot == slot {
		return m.old[m.j].acc
	}
	return 0
}

// keep gives slot the accumulated priority a.
func (m *accMerge) keep(slot uint32, a float32) {
	m.next = append(m.next, accEntry{slot: slot, acc: a})
}

// finish installs the new list in c. Lists grown by a burst of deferrals
// are let go once a tick needs far less.
func (m *accMerge) finish(c *Client) {
	if cap(m.old) > 512 && len(m.next) < cap(m.old)/8 {
		m.old = nil
	}
	if cap(m.next) > 512 && len(m.next) < cap(m.next)/8 {
		m.next = append([]accEntry(nil), m.next...)
	}
	c.acc, c.accNext = m.next, m.old[:0]
}

// viewFor returns the view of tick, emptied: no members, no deferred
// entries, no records.
func (c *Client) viewFor(tick uint32) *view {
	v := &c.views[tick%uint32(len(c.views))]
	c.releaseMembers(v)
	c.releaseRecs(v)
	if v.behindArr {
		// (an array a burst of deferrals grew is let go: shrunk)
		l := c.listsOf(v)
		l.behind = shrunk(l.behind)
		v.behindArr = l.behind != nil
	}
	v.hasBehind = false
	v.tick = tick
	v.used = true
	v.acked = false
	return v
}

// listsOf returns the lists of v, one of c.views.
func (c *Client) listsOf(v *view) *viewLists {
	i := (uintptr(unsafe.Pointer(v)) - uintptr(unsafe.Pointer(unsafe.SliceData(c.views)))) / unsafe.Sizeof(view{})
	return &c.lists[i]
}

// behindOf returns v's deferred entries (nil: none), sorted by slot.
func (c *Client) behindOf(v *view) []behindEntry {
	if !v.hasBehind {
		return nil
	}
	return c.listsOf(v).behind
}

// addBehind appends a deferred entry to v's (in slot order).
func (c *Client) addBehind(v *view, b behindEntry) {
	l := c.listsOf(v)
	if !v.hasBehind {
		l.behind = l.behind[:0]
	}
	l.behind = append(l.behind, b)
	v.hasBehind, v.behindArr = true, true
}

// addRec appends a sent record to v's list (in slot order).
func (c *Client) addRec(v *view, r sentRec) {
	l := c.listsOf(v)
	if !v.hasRecs {
		l.recs = c.takeRecs()
		v.hasRecs = true
	}
	l.recs = append(l.recs, r)
}

// Ack records the client's acknowledgement (see [Ack]): the views it names
// become baselines the server may code against, each exactly as the client
// holds it: the records of parts the client lacks are undone (their entities
// keep the values they had before, or are absent if they were new). Acks for
// ticks that were never sent, or whose views were overwritten, are ignored,
// and parts that were never sent are ignored, so a hostile ack can make the
// server use only baselines built from what it sent that client.
//
// It returns the ticks the Ack acknowledged for the first time: bit i is
// tick a.Newest−i. Ticks an earlier Ack named are skipped at the cost of a
// shift, so a client's steady stream of Acks costs one tick each.
func (c *Client) Ack(a *Ack) (fresh uint64) {
	if a.Newest == 0 {
		return 0
	}
	named := uint64(1) | uint64(a.Mask)<<1
	// What earlier Acks named, as seen from a.Newest.
	var seen uint64
	if c.coverNewest != 0 {
		switch d := int32(a.Newest - c.coverNewest); {
		case d >= 0 && d < 64:
			seen = c.cover << uint(d)
		case d < 0 && d > -64:
			seen = c.cover >> uint(-d)
		}
	}
	fresh = named &^ seen
	for f := fresh; f != 0; f &= f - 1 {
		i := uint32(bits.TrailingZeros64(f))
		if a.Newest > i {
			c.ackOne(a.Newest-i, a)
		}
	}
	if c.coverNewest == 0 || int32(a.Newest-c.coverNewest) >= 0 {
		c.cover, c.coverNewest = seen|named, a.Newest
	} else {
		c.cover |= named << uint(c.coverNewest-a.Newest)
	}
	if c.NewestAck == 0 || int32(a.Newest-c.NewestAck) > 0 {
		c.NewestAck = a.Newest
	}
	return fresh
}

func (c *Client) ackOne(t uint32, a *Ack) {
	v := &c.views[t%uint32(len(c.views))]
	if !v.used || v.tick != t || v.acked {
		return
	}
	held, all := a.Holds(t)
	sent := uint64(1)<<v.parts - 1
	partial := !all && held&sent != sent
	if partial && v.parts <= 1 {
		// The tick's only datagram did not arrive (an honest client
		// does not ack that): the view is not one the client holds.
		return
	}
	v.acked = true
	c.Acked++
	if c.bestAck == 0 || int32(t-c.bestAck) > 0 {
		c.bestAck = t
	}
	if partial {
		c.AckedPartial++
		c.undo(v, held)
	}
	c.releaseRecs(v) // (needed only to undo what an ack says was lost)
}

// releaseRecs gives v's per-datagram record list back to the client's
// pool: only views whose ack is still to come hold one.
func (c *Client) releaseRecs(v *view) {
	if !v.hasRecs {
		return
	}
	l := c.listsOf(v)
	if r := shrunk(l.recs); r != nil && len(c.recsPool) < spareRecs {
		c.recsPool = append(c.recsPool, r) // (a burst's long list is let go: shrunk)
	}
	l.recs = nil
	v.hasRecs = false
}

// spareRecs is how many unused record lists a client keeps for reuse.
const spareRecs = 4

// dropSpareRecs lets one pooled record list go: a tick of one datagram
// calls it, so that the lists of a burst of multi-datagram ticks do not stay
// resident.
func (c *Client) dropSpareRecs() {
	if n := len(c.recsPool); n > 0 {
		c.recsPool[n-1] = nil
		c.recsPool = c.recsPool[:n-1]
	}
}

// takeRecs returns an empty record list from the pool (nil if none).
func (c *Client) takeRecs() []sentRec {
	n := len(c.recsPool)
	if n == 0 {
		return nil
	}
	r := c.recsPool[n-1]
	c.recsPool[n-1] = nil
	c.recsPool = c.recsPool[:n-1]
	return r
}

// undo takes the records of the parts not in held out of view v.
func (c *Client) undo(v *view, held uint64) {
	c.undoBuf = c.undoBuf[:0]
	l := c.listsOf(v)
	for _, r := range l.recs {
		if held>>r.part&1 != 0 {
			continue
		}
		switch {
		case r.mem:
			// The client keeps the value it had (a removal did not happen).
			c.setMember(v, r.slot, true)
			c.undoBuf = append(c.undoBuf, behindEntry{slot: r.slot, src: r.src})
		default:
			c.setMember(v, r.slot, false) // a spawn that did not arrive
		}
	}
	if len(c.undoBuf) == 0 {
		return
	}
	// Merge the two sorted, disjoint lists.
	behind := c.behindOf(v)
	merged := c.mergeBuf[:0]
	i, j := 0, 0
	for i < len(behind) || j < len(c.undoBuf) {
		if j == len(c.undoBuf) || (i < len(behind) && behind[i].slot < c.undoBuf[j].slot) {
			merged = append(merged, behind[i])
			i++
		} else {
			merged = append(merged, c.undoBuf[j])
			j++
		}
	}
	c.mergeBuf, l.behind = l.behind, merged
	v.hasBehind, v.behindArr = true, true
}

// Reset forgets every view (after a reconnect the client starts empty).
func (c *Client) Reset() {
	for i := range c.views {
		c.views[i].used = false
		c.views[i].acked = false
		c.views[i].hasBehind = false
		c.releaseMembers(&c.views[i])
		c.releaseRecs(&c.views[i])
	}
	c.acc = c.acc[:0]
	c.NewestAck, c.bestAck = 0, 0
	c.cover, c.coverNewest = 0, 0
}

// MemoryBytes returns the bytes the client's state holds (capacities, not
// lengths): its views and their member sets, deferred entries and records,
// and its priority accumulators.
func (c *Client) MemoryBytes() int {
	n := int(unsafe.Sizeof(*c)) + (cap(c.acc)+cap(c.accNext))*int(unsafe.Sizeof(accEntry{})) + (cap(c.undoBuf)+cap(c.mergeBuf))*int(unsafe.Sizeof(behindEntry{}))
	for i := range c.views {
		l := &c.lists[i]
		n += int(unsafe.Sizeof(c.views[i])) + int(unsafe.Sizeof(*l)) + cap(l.behind)*int(unsafe.Sizeof(behindEntry{})) + cap(l.recs)*int(unsafe.Sizeof(sentRec{}))
	}
	for _, r := range c.recsPool {
		n += int(unsafe.Sizeof(r)) + cap(r)*int(unsafe.Sizeof(sentRec{}))
	}
	for i := range c.sets {
		n += int(unsafe.Sizeof(c.sets[i])) + cap(c.sets[i].bits)*8
	}
	n += cap(c.freeSets) * 4
	return n
}
