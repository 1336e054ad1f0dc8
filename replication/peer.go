package replication

import (
	"fmt"
	"math/bits"
	"time"
	"unsafe"

	"github.com/archenet/archenet/replication/internal/snapshot"
	"github.com/archenet/archenet/replication/schema"
)

// peer is the server's side of one client's channel, as a pure state
// machine (in the manner of etcd's raft): what it needs comes in with each
// call — the client's datagrams with the time they arrived ([peer.receive]),
// and once per net tick the tick's shared, read-only state ([peerTick]: the
// frame ring, the slot table, what changed layout, the weights, the time)
// with the client's own plan ([peerPlan]: its relevance, its datagram size,
// the input hooks' answers) — and what it produces goes out in [peer.out]:
// a spawn batch, the ready message, the snapshot datagrams, the counts. It
// holds no connection, no Server, no lock and starts no goroutine: the
// Server pumps the connection, computes relevance and calls the game's
// hooks, and peers of one tick run in parallel because each writes only
// itself and its worker's scratch.
type peer struct {
	id   ClientID
	snap snapshot.Client // (held inline: one block with the peer's own state)

	// spawned is what the client was told to spawn over the reliable
	// channel; each with the Meta of its slot at the last frame (what
	// changed since, peerTick.relayout says).
	spawned snapshot.Bitset
	ready   bool // the ready message went out
	// synced: spawned equalled relevant after the last spawnDiff
	synced bool

	sent   []sentRecord // ring by tick
	judged uint32       // next sent tick to judge for loss
	rtt    rttEstimator
	budget budgetController

	rx    []rxInput // input sections received this tick, for the Input hook
	rxErr error     // a protocol error in what the client sent this tick
	// acks received, taken in by the peer's next tick (in parallel with
	// the other peers') or, failing that, its next beginReceive
	acks []heardAck

	out    peerOutput // this tick's output, for the server to send
	msgBuf []byte     // the spawn batch's buffer
	msgLen int        // the last batch's length

	heard     time.Time // the last datagram from the client (or the Welcome)
	welcomed  time.Time
	firstSent time.Time // the first tick built for the client (JoinTimeout)

	snapBytes, spawnBytes uint64
	datagrams             uint64
}

// peerTick is what every peer of a net tick reads and none writes: the
// server's state after its sequential phase.
type peerTick struct {
	tick    uint32
	now     time.Time
	netRate int // net ticks per second (the budget's refill)
	world   *snapshot.World
	// slots is the slot table (slot → alive, generation, Meta, predicted
	// spawn key); relayout the slots whose generation, owner or component
	// set changed this tick, with their Meta before.
	slots    []slotInfo
	relayout []relaidOut
	plans    []*schema.Plan
	weights  []float32 // per-slot priority weights
}

// rxInput is the input section of one client datagram and the tick it
// acked.
type rxInput struct {
	ack     uint32
	section []byte
}

// heardAck is an ack and when it was received: the time first, so that
// it shares the Ack's first cache line (its header; Parts are read only
// for a tick that lost datagrams).
type heardAck struct {
	at  time.Time
	ack snapshot.Ack
}

// peerPlan is what the server decides for one peer before its tick: the
// answers of the user's hooks and the connection, which must not be called
// from several goroutines, and the client's relevance.
type peerPlan struct {
	mtu int
	opt snapshot.BuildOptions // input extension fields
	// relevant is the entities the client is to hold this tick;
	// relevanceChanged: it may differ from the last tick's (it was
	// recomputed, or an entity was spawned, despawned or changed its
	// components).
	relevant         snapshot.Bitset
	relevanceChanged bool
}

// peerOutput is what one tick of a peer produced.
type peerOutput struct {
	spawnMsg         []byte // spawn/despawn batch (nil: none)
	readyMsg         bool   // send the ready message after it
	spawns, despawns int
	pkts             snapshot.Packets
	info             snapshot.BuildInfo
	encoder          *snapshot.Encoder // the worker's, for its cache statistics
}

// minLossHorizon is the least time a snapshot datagram waits for its ack
// before it counts as lost (at least 4 smoothed RTTs).
const minLossHorizon = 300 * time.Millisecond

// sentRecord is what the server sent a client at one tick: 24 bytes, no
// pointer.
type sentRecord struct {
	at    int64 // when: the peer's clock (peer.clock)
	tick  uint32
	bytes uint32 // of its datagrams
	parts uint8  // datagrams (≤ snapshot.MaxParts)
	got   uint8  // of them, the client acked (valid once acked)
	acked bool
}

// sentWindow is how long a peer's ring of sentRecords reaches back: longer
// than the snapshot ring, so that RTT is still measured when a congested
// queue delays acks by seconds (an ack later than that finds its record
// gone: the path is in an outage, which the budget handles).
const sentWindow = 4 // seconds

// sentRing is the length of the ring at netRate ticks per second.
func sentRing(netRate int) int { return max(64, sentWindow*netRate) }

// clock returns now on the peer's clock: nanoseconds since its Welcome.
func (p *peer) clock(now time.Time) int64 { return int64(now.Sub(p.welcomed)) }

// sentAt returns when r was sent.
func (p *peer) sentAt(r *sentRecord, now time.Time) time.Time {
	return now.Add(-time.Duration(p.clock(now) - r.at))
}

// init makes p the state of client id, welcomed at now.
func (p *peer) init(id ClientID, cfg *ServerConfig, now time.Time) {
	*p = peer{id: id, sent: make([]sentRecord, sentRing(cfg.NetRate)), heard: now, welcomed: now}
	p.snap.Init(id, cfg.Depth)
	p.budget = newBudgetController(float64(cfg.MinBytesPerSecond), float64(cfg.MaxBytesPerSecond))
	p.snap.SetRate(int(p.budget.rate), p.burst(cfg.MTU))
}

// silent reports why the client is to be dropped for silence: no datagram
// for longer than timeout (> 0) before now, or no acknowledged snapshot
// joinTimeout (> 0) after the first was sent (a server whose Send does not
// run is not the client's fault); "" if it is alive. sender names what
// sends for the client (Client.Send, or an input helper's system).
func (p *peer) silent(now time.Time, timeout, joinTimeout time.Duration, sender string) string {
	if joinTimeout > 0 && p.snap.NewestAck == 0 && !p.firstSent.IsZero() && now.Sub(p.firstSent) > joinTimeout {
		if p.heard.Equal(p.welcomed) {
			return fmt.Sprintf("no datagram from the client in the %v since its Welcome (is it running Client.Receive and %s?); ServerConfig.JoinTimeout", joinTimeout, sender)
		}
		return fmt.Sprintf("the client acknowledged no snapshot in the %v since its Welcome (is it running Client.Receive?); ServerConfig.JoinTimeout", joinTimeout)
	}
	if timeout <= 0 || now.Sub(p.heard) <= timeout {
		return ""
	}
	if p.heard.Equal(p.welcomed) {
		return fmt.Sprintf("no datagram from the client in the %v since its Welcome (is it running Client.Receive and %s?)", timeout, sender)
	}
	return fmt.Sprintf("no datagram from the client for %v (dead link, or the client stopped running %s)", timeout, sender)
}

// memoryBytes returns the bytes the peer holds for its client (capacities;
// not the output it lends the server for the tick, which the worker's
// encoder owns).
func (p *peer) memoryBytes() int {
	n := int(unsafe.Sizeof(*p)) - int(unsafe.Sizeof(p.snap)) + p.snap.MemoryBytes()
	n += cap(p.spawned) * 8
	n += cap(p.sent)*int(unsafe.Sizeof(sentRecord{})) + cap(p.acks)*int(unsafe.Sizeof(heardAck{}))
	n += cap(p.rx)*int(unsafe.Sizeof(rxInput{})) + cap(p.msgBuf)
	return n
}

// burst is the token bucket's depth: an eighth of a second, at least two
// datagrams.
func (p *peer) burst(mtu int) int { return max(mtu*2, int(p.budget.rate)/8) }

// beginReceive starts a net tick's receiving: the last tick's input
// sections and error are forgotten, acks kept since are taken in.
func (p *peer) beginReceive() {
	p.rx, p.rxErr = p.rx[:0], nil
	p.takeAcks() // (kept since a Receive that no Send followed)
}

// receive takes one datagram from the client, which arrived at now:
// its ack is kept for the next tick and its input section for the Input
// hook (p.rx). After an error (p.rxErr, also returned) the client is to be
// dropped; the datagram's bytes are held until the next beginReceive.
func (p *peer) receive(d []byte, now time.Time, serverTick uint32) error {
	newest, input, err := p.onDatagram(d, now, serverTick)
	if err != nil {
		p.rxErr = err
		return err
	}
	if len(p.acks) >= maxKeptAcks {
		p.takeAcks() // (a flood of datagrams keeps no memory)
	}
	if len(input) > 0 {
		p.rx = append(p.rx, rxInput{ack: newest, section: input})
	}
	return nil
}

// maxKeptAcks bounds the acks a peer keeps for its tick.
const maxKeptAcks = 16

// onDatagram takes one datagram from the client: it keeps its ack for
// takeAcks and returns its input section, for the server's input hook.
// serverTick is the newest tick the server built; an ack of a later one is
// a protocol error.
func (p *peer) onDatagram(d []byte, now time.Time, serverTick uint32) (newest uint32, input []byte, err error) {
	if n := len(p.acks); n < cap(p.acks) {
		p.acks = p.acks[:n+1] // (parsed into in place: an Ack is 300 bytes)
	} else {
		p.acks = append(p.acks, heardAck{})
	}
	h := &p.acks[len(p.acks)-1]
	h.at = now
	ack := &h.ack
	if input, err = parseClientHeaderInto(ack, d); err != nil {
		p.acks = p.acks[:len(p.acks)-1]
		return 0, nil, err
	}
	if ack.Newest != 0 && int32(ack.Newest-serverTick) > 0 {
		p.acks = p.acks[:len(p.acks)-1]
		return 0, nil, fmt.Errorf("ack of tick %d from the future (server tick %d)", ack.Newest, serverTick)
	}
	p.heard = now
	return ack.Newest, input, nil
}

// takeAcks takes in the acks onDatagram kept, in the order they came.
func (p *peer) takeAcks() {
	for i := range p.acks {
		p.onAck(&p.acks[i].ack, p.acks[i].at)
	}
	p.acks = p.acks[:0]
}

func (p *peer) onAck(a *snapshot.Ack, now time.Time) {
	if a.Newest == 0 {
		return
	}
	if a.Newest != p.snap.NewestAck {
		p.budget.onAck(now)
	}
	fresh := p.snap.Ack(a)
	mark := func(t uint32, sample bool) {
		r := &p.sent[t%uint32(len(p.sent))]
		if r.tick != t || r.acked {
			return
		}
		r.acked = true
		held, _ := a.Holds(t)
		n := max(int(r.parts), 1)
		r.got = uint8(heldParts(held, n))
		if r.bytes > 0 {
			p.budget.onDelivered(float64(r.bytes) * float64(r.got) / float64(n))
		}
		if at := p.sentAt(r, now); sample && !at.Before(p.budget.ignoreBefore) {
			// (Datagrams sent before an outage ended measure the outage, or
			// the queues it filled, not the path.)
			p.rtt.sample(now.Sub(at), now)
		}
	}
	for f := fresh; f != 0; f &= f - 1 {
		if i := uint32(bits.TrailingZeros64(f)); a.Newest > i {
			mark(a.Newest-i, i == 0)
		}
	}
}

// judgeLoss hands the budget controller every sent record whose fate is
// known, oldest first: acked ones (an ack is final about which datagrams of
// its tick arrived), ones the client skipped (it acked a tick reorderThreshold
// or more later), and ones older than 4 smoothed RTTs (at least
// minLossHorizon) without an ack.
func (p *peer) judgeLoss(tick uint32, now time.Time) {
	horizon := max(4*p.rtt.srtt, minLossHorizon)
	if p.judged == 0 || int32(tick-p.judged) > int32(len(p.sent)) {
		p.judged = tick // first tick, or the ring lapped: nothing older to judge
	}
	newest := p.snap.NewestAck
	for ; int32(tick-p.judged) > 0; p.judged++ {
		r := &p.sent[p.judged%uint32(len(p.sent))]
		if r.tick != p.judged || r.bytes == 0 {
			continue
		}
		skipped := newest != 0 && int32(newest-r.tick) >= reorderThreshold && int32(newest-r.tick) < snapshot.AckWindow
		at := p.sentAt(r, now)
		if !r.acked && !skipped && now.Sub(at) < horizon {
			return
		}
		got := 0
		if r.acked {
			got = int(r.got)
		}
		p.budget.account(max(int(r.parts), 1), got, at)
	}
}

// reorderThreshold is how many later ticks a client may ack before an
// unacked tick counts as lost (datagrams overtaken by a few later ones are
// reordered, not lost).
const reorderThreshold = 3

// tick builds what the client gets this net tick into p.out: spawns and
// despawns for what entered or left its relevance (or changed layout), the
// ready message after the first batch, and the snapshot datagrams, built
// with the worker's encoder. It reads t and plan only and writes p and w.
func (p *peer) tick(t *peerTick, plan *peerPlan, w *worker) {
	p.takeAcks()
	p.judgeLoss(t.tick, t.now)
	if p.budget.update(t.now, &p.rtt) {
		p.snap.SetRate(int(p.budget.rate), p.burst(plan.mtu))
	}
	p.snap.Refill(1 / float64(t.netRate))
	p.out.encoder = w.enc
	p.spawnDiff(t, plan, &w.spawns)
	if !p.ready {
		p.ready, p.out.readyMsg = true, true
	}
	opt := plan.opt
	opt.Budget, opt.Relevant, opt.Weights = plan.mtu, p.spawned, t.weights
	p.out.info = w.enc.Build(&p.snap, opt, &p.out.pkts)
	if p.firstSent.IsZero() {
		p.firstSent = t.now
	}
	p.sent[t.tick%uint32(len(p.sent))] = sentRecord{tick: t.tick, at: p.clock(t.now), bytes: uint32(p.out.info.Bytes), parts: uint8(p.out.pkts.Len())}
	p.snapBytes += uint64(p.out.info.Bytes)
	p.datagrams += uint64(p.out.pkts.Len())
	p.spawnBytes += uint64(len(p.out.spawnMsg))
}

// spawnDiff writes the spawn/despawn batch that brings the client's mirrors
// in line with its interest: despawns of freed or reincarnated slots and
// spawns of component-set changes first (in the order the slots changed),
// then entries leaving interest, then entries entering it, each in slot
// order (so a client at its entity bound makes room before it is asked to
// take more). When the interest set did not change (changed is false) and
// the last diff left the spawned set equal to it, there is nothing to do.
func (p *peer) spawnDiff(t *peerTick, plan *peerPlan, sw *spawnWriter) {
	p.out.spawns, p.out.despawns = 0, 0
	p.out.spawnMsg = nil
	if !plan.relevanceChanged && p.synced && len(t.relayout) == 0 {
		return
	}
	f := t.world.Current()
	relevant := plan.relevant
	sw.reset()
	synced := true
	despawn := func(slot, gen uint32) {
		sw.add(t.plans, spawnEntry{Despawn: true, Slot: slot, Meta: snapshot.Meta{Gen: gen}}, false)
		p.spawned.Clear(slot)
		p.out.despawns++
	}
	spawn := func(slot uint32) {
		i := f.Lookup(slot)
		if i < 0 {
			synced = false // (retried next tick)
			return
		}
		m := f.Metas[i]
		si := &t.slots[slot]
		owner := p.id != 0 && m.Owner == p.id
		sw.add(t.plans, spawnEntry{Slot: slot, Meta: m, Lanes: f.EntityLanes(i),
			HasKey: owner && si.keyed && si.key.owner == p.id, Key: si.key.key}, owner)
		p.spawned.Set(slot)
		p.out.spawns++
	}
	for _, r := range t.relayout {
		if !p.spawned.Has(r.slot) {
			continue
		}
		// The client holds r.slot as it was at the last frame: r.was.
		si := &t.slots[r.slot]
		switch {
		case !si.alive || si.gen != r.was.Gen:
			despawn(r.slot, r.was.Gen)
		case si.meta.Set != r.was.Set && relevant.Has(r.slot):
			spawn(r.slot) // component set change: same slot and generation
		}
	}
	// (Two passes over the words where the sets differ: few, in a big world.)
	words := max(len(relevant), len(p.spawned))
	for wi := nextDiff(p.spawned, relevant, 0); wi < words; wi = nextDiff(p.spawned, relevant, wi+1) {
		for rem := p.spawned.Word(wi) &^ relevant.Word(wi); rem != 0; rem &= rem - 1 {
			slot := uint32(wi*64 + tz64(rem))
			despawn(slot, t.slots[slot].gen) // (a slot whose generation changed is gone already)
		}
	}
	for wi := nextDiff(p.spawned, relevant, 0); wi < words; wi = nextDiff(p.spawned, relevant, wi+1) {
		for add := relevant.Word(wi) &^ p.spawned.Word(wi); add != 0; add &= add - 1 {
			spawn(uint32(wi*64 + tz64(add)))
		}
	}
	p.synced = synced
	if cap(p.msgBuf) > 4096 && p.msgLen < cap(p.msgBuf)/8 {
		p.msgBuf = nil // (a burst of spawns is over)
	}
	p.msgLen = 0
	if msg := sw.bytes(t.tick, p.msgBuf); msg != nil {
		p.msgBuf, p.out.spawnMsg, p.msgLen = msg, msg, len(msg)
	}
}
