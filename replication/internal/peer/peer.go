package peer

import (
	"fmt"
	"math"
	"math/bits"
	"time"
	"unsafe"

	"github.com/archenet/archenet/replication/internal/baseline"
	"github.com/archenet/archenet/replication/internal/congestion"
	"github.com/archenet/archenet/replication/internal/encode"
	"github.com/archenet/archenet/replication/internal/entity"
	"github.com/archenet/archenet/replication/internal/slots"
	"github.com/archenet/archenet/replication/internal/store"
	"github.com/archenet/archenet/replication/internal/wire"
	"github.com/archenet/archenet/replication/schema"
)

// Peer is the server's side of one client's channel, as a pure state
// machine (in the manner of etcd's raft): what it needs comes in with each
// call — the client's datagrams with the time they arrived
// ([Peer.Receive]), and once per net tick the tick's shared, read-only
// state ([Tick]: the frame ring, the slot table, what changed layout, the
// weights, the time) with the client's own [Plan] (its relevance, its
// datagram size, the input hooks' answers) — and what it produces goes out
// in [Peer.Out]: a spawn batch, the ready message, the snapshot datagrams.
// It holds no connection, no Server, no lock and starts no goroutine: the
// Server pumps the connection, computes relevance and calls the game's
// hooks, and peers of one tick run in parallel because each writes only
// itself and its worker's Scratch.
//
// A Peer is the client's whole replication state on the server: its
// baselines (Tracker), its progress (what was sent when, and the acks),
// its rate control (RTT and Rate) and its counters.
type Peer struct {
	ID      uint8
	Tracker baseline.Tracker // (held inline: one block with the peer's own state)

	// Spawned is what the client was told to spawn over the reliable
	// channel; each with the Meta of its slot at the last frame (what
	// changed since, Tick.Relayout says).
	Spawned entity.Bitset
	// SpawnHeld are the spawned entities the client holds at their current
	// value without them being in a snapshot view: their spawn carried that
	// value and they have not changed since (a dormant board's tiles). The
	// snapshots leave them out until they change. spawnHeldAt is the tick
	// SpawnHeld is current to; spawnHeldAny: it may hold some.
	SpawnHeld    entity.Bitset
	spawnHeldAt  uint32
	spawnHeldAny bool
	// heldFrom is the acked view whose unchanged members went into
	// SpawnHeld when its frame left the ring (0: none yet).
	heldFrom uint32
	// inFlight are the full records of entities the client mirrors, by
	// tick sent, held (SpawnHeld) until each tick's fate is known: not
	// sent again in every tick before the ack comes back, but again if
	// that tick's datagram was lost (holdInFlight, settleInFlight).
	inFlight []inFlightSet
	Ready    bool // the ready message went out
	// synced: Spawned equalled the relevance after the last spawnDiff
	synced bool

	sent   []sentRecord // ring by tick
	judged uint32       // next sent tick to judge for loss
	RTT    congestion.RTT
	Rate   congestion.Controller

	// RX is the input sections received this tick, for the game's input
	// hook; RxErr a protocol error in what the client sent this tick.
	RX    []RxInput
	RxErr error
	// HeardTick is the newest tick the last datagram received acked.
	HeardTick uint32
	// Taken is the newest count of reliable messages the client said it
	// took (wire.FlagTaken); TakenNew: it grew since the server last
	// cleared it.
	Taken    uint32
	TakenNew bool
	// acks received, taken in by the peer's next tick (in parallel with
	// the other peers') or, failing that, its next BeginReceive
	acks []heardAck

	Out    Output // this tick's output, for the server to send
	msgBuf []byte // the spawn batch's buffer
	msgLen int    // the last batch's length
	secBuf []byte // the message section's

	heard     time.Time // the last datagram from the client (or the Welcome)
	welcomed  time.Time
	firstSent time.Time // the first tick built for the client (JoinTimeout)

	// Counters since the Welcome.
	Counters Counters
}

// Counters are a peer's cumulative counts.
type Counters struct {
	SnapshotBytes, SpawnBytes uint64
	Datagrams                 uint64
}

// Tick is what every peer of a net tick reads and none writes: the
// server's state after its sequential phase.
type Tick struct {
	Tick    uint32
	Now     time.Time
	NetRate int // net ticks per second (the budget's refill)
	Ring    *store.Ring
	// Slots is the slot table (slot → alive, generation, Meta, predicted
	// spawn key); Relayout the slots whose generation, owner or component
	// set changed this tick, with their Meta before.
	Slots    []slots.Info
	Relayout []slots.Relaid
	Plans    []*schema.Plan
	Weights  []float32 // per-slot priority weights
}

// RxInput is the input section of one client datagram and the tick it
// acked.
type RxInput struct {
	Ack     uint32
	Section []byte
}

// heardAck is an ack and when it was received: the time first, so that
// it shares the Ack's first cache line (its header; Parts are read only
// for a tick that lost datagrams).
type heardAck struct {
	at  time.Time
	ack wire.Ack
}

// Plan is what the server decides for one peer before its tick: the
// answers of the user's hooks and the connection, which must not be called
// from several goroutines, and the client's relevance.
type Plan struct {
	MTU int
	Opt encode.BuildOptions // input extension fields
	// Suspended: the client's connection is lost and its seat kept: the
	// tick builds its spawns, not its datagrams.
	Suspended bool
	// Relevant is the entities the client is to hold this tick;
	// RelevanceChanged: it may differ from the last tick's (it was
	// recomputed, or an entity was spawned, despawned or changed its
	// components).
	Relevant         entity.Bitset
	RelevanceChanged bool
	// Messages, if set, returns the tick's message section for p (after
	// its spawns), appended to dst with sw, with the count of messages in
	// it and of those left out for want of room: it rides at the end of
	// the tick's last datagram, inside the byte budget.
	Messages func(p *Peer, sw *wire.SectionWriter, dst []byte) (section []byte, n, left int)
}

// Output is what one tick of a peer produced.
type Output struct {
	// Messages counts the messages of the tick's section that went out,
	// MessagesLeft those that found no room (the section full, or no
	// datagram this tick).
	Messages, MessagesLeft int
	SectionBytes           int    // the section's bytes (in Info.Bytes)
	SpawnMsg               []byte // spawn/despawn batch (nil: none)
	ReadyMsg               bool   // send the ready message after it
	Spawns, Despawns       int
	Pkts                   encode.Packets
	Info                   encode.BuildInfo
	Encoder                *encode.Encoder // the worker's, for its cache statistics
}

// Scratch is one worker goroutine's for the peers it builds: its encoder
// (with its record cache) and its spawn batch writer.
type Scratch struct {
	Enc      *encode.Encoder
	Spawns   wire.SpawnWriter
	Sections wire.SectionWriter
}

// inFlightSet is the entities whose full records went out at tick, held
// until its fate is known.
type inFlightSet struct {
	tick  uint32
	slots entity.Bitset
	// keep: held while they change (a recovery's, see holdInFlight);
	// moved: some of them changed since tick (the views built meanwhile
	// lack them: thin)
	keep, moved bool
}

// maxInFlightSets bounds the ticks of full records held in flight (beyond
// it, a tick's are not held: they go again until acked).
const maxInFlightSets = 64

// Config is what a peer needs of the server's configuration.
type Config struct {
	Depth   int // snapshot ring depth
	NetRate int // net ticks per second
	// MinRate and MaxRate bound the client's byte rate; MTU is the
	// server's datagram size.
	MinRate, MaxRate, MTU int
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
	parts uint8  // datagrams (≤ wire.MaxParts)
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
func (p *Peer) clock(now time.Time) int64 { return int64(now.Sub(p.welcomed)) }

// sentAt returns when r was sent.
func (p *Peer) sentAt(r *sentRecord, now time.Time) time.Time {
	return now.Add(-time.Duration(p.clock(now) - r.at))
}

// Init makes p the state of client id, welcomed at now.
func (p *Peer) Init(id uint8, cfg Config, now time.Time) {
	*p = Peer{ID: id, sent: make([]sentRecord, sentRing(cfg.NetRate)), heard: now, welcomed: now}
	p.Tracker.Init(id, cfg.Depth)
	p.Rate = congestion.NewController(float64(cfg.MinRate), float64(cfg.MaxRate), cfg.MTU)
}

// Resume takes the client back on a new connection at now: what it holds
// (its baselines, its spawns) stays, and its path is new: liveness starts
// over, the rate controller starts afresh (keeping none of the dead path's
// losses), the acks kept are dropped, and the datagrams sent on the dead
// path are not judged.
func (p *Peer) Resume(cfg Config, now time.Time) {
	p.heard = now
	p.acks = p.acks[:0]
	p.RX, p.RxErr = p.RX[:0], nil
	p.Rate = congestion.NewController(float64(cfg.MinRate), float64(cfg.MaxRate), cfg.MTU)
	p.judged = 0 // (judgeLoss starts at the next tick)
}

// Silent reports why the client is to be dropped for silence: no datagram
// for longer than timeout (> 0) before now, or no acknowledged snapshot
// joinTimeout (> 0) after the first was sent (a server whose Send does not
// run is not the client's fault); "" if it is alive. sender names what
// sends for the client (Client.Send, or an input helper's system).
func (p *Peer) Silent(now time.Time, timeout, joinTimeout time.Duration, sender string) string {
	if joinTimeout > 0 && p.Tracker.NewestAck == 0 && !p.firstSent.IsZero() && now.Sub(p.firstSent) > joinTimeout {
		if p.heard.Equal(p.welcomed) {
			return fmt.Sprintf("no datagram from the client in the %v since its Welcome (is it running Client.Receive and %s?); ServerConfig.Limits.JoinTimeout", joinTimeout, sender)
		}
		return fmt.Sprintf("the client acknowledged no snapshot in the %v since its Welcome (is it running Client.Receive?); ServerConfig.Limits.JoinTimeout", joinTimeout)
	}
	if timeout <= 0 || now.Sub(p.heard) <= timeout {
		return ""
	}
	if p.heard.Equal(p.welcomed) {
		return fmt.Sprintf("no datagram from the client in the %v since its Welcome (is it running Client.Receive and %s?)", timeout, sender)
	}
	return fmt.Sprintf("no datagram from the client for %v (dead link, or the client stopped running %s)", timeout, sender)
}

// Joining reports whether the client has acknowledged no snapshot yet while
// the server has built it some, and how long ago the first (as JoinTimeout
// counts: a server whose Send did not run is not the client's fault).
func (p *Peer) Joining(now time.Time) (since time.Duration, ok bool) {
	if p.firstSent.IsZero() || p.Tracker.NewestAck != 0 {
		return 0, false
	}
	return now.Sub(p.firstSent), true
}

// MemoryBytes returns the bytes the peer holds for its client (capacities;
// not the output it lends the server for the tick, which the worker's
// encoder owns).
func (p *Peer) MemoryBytes() int {
	n := int(unsafe.Sizeof(*p)) - int(unsafe.Sizeof(p.Tracker)) + p.Tracker.MemoryBytes()
	n += (cap(p.Spawned) + cap(p.SpawnHeld)) * 8
	n += cap(p.sent)*int(unsafe.Sizeof(sentRecord{})) + cap(p.acks)*int(unsafe.Sizeof(heardAck{}))
	n += cap(p.RX)*int(unsafe.Sizeof(RxInput{})) + cap(p.msgBuf)
	return n
}

// BeginReceive starts a net tick's receiving: the last tick's input
// sections and error are forgotten, acks kept since are taken in.
func (p *Peer) BeginReceive() {
	p.RX, p.RxErr = p.RX[:0], nil
	p.takeAcks() // (kept since a Receive that no Send followed)
}

// Receive takes one datagram from the client, which arrived at now:
// its ack is kept for the next tick and its input section for the Input
// hook (p.RX). After an error (p.RxErr, also returned) the client is to be
// dropped; the datagram's bytes are held until the next beginReceive.
func (p *Peer) Receive(d []byte, now time.Time, serverTick uint32) error {
	newest, input, err := p.onDatagram(d, now, serverTick)
	if err != nil {
		p.RxErr = err
		return err
	}
	p.HeardTick = newest
	if len(p.acks) >= maxKeptAcks {
		p.takeAcks() // (a flood of datagrams keeps no memory)
	}
	if len(input) > 0 {
		p.RX = append(p.RX, RxInput{Ack: newest, Section: input})
	}
	return nil
}

// maxKeptAcks bounds the acks a peer keeps for its tick.
const maxKeptAcks = 16

// onDatagram takes one datagram from the client: it keeps its ack for
// takeAcks and returns its input section, for the server's input hook.
// serverTick is the newest tick the server built; an ack of a later one is
// a protocol error.
func (p *Peer) onDatagram(d []byte, now time.Time, serverTick uint32) (newest uint32, input []byte, err error) {
	if n := len(p.acks); n < cap(p.acks) {
		p.acks = p.acks[:n+1] // (parsed into in place: an Ack is 300 bytes)
	} else {
		p.acks = append(p.acks, heardAck{})
	}
	h := &p.acks[len(p.acks)-1]
	h.at = now
	ack := &h.ack
	var taken uint32
	var hasTaken bool
	if input, taken, hasTaken, err = wire.ParseClientHeaderTaken(ack, d); err != nil {
		p.acks = p.acks[:len(p.acks)-1]
		return 0, nil, err
	}
	if hasTaken && int32(taken-p.Taken) > 0 {
		p.Taken, p.TakenNew = taken, true
	}
	if ack.Newest != 0 && int32(ack.Newest-serverTick) > 0 {
		p.acks = p.acks[:len(p.acks)-1]
		return 0, nil, fmt.Errorf("ack of tick %d from the future (server tick %d)", ack.Newest, serverTick)
	}
	p.heard = now
	return ack.Newest, input, nil
}

// takeAcks takes in the acks onDatagram kept, in the order they came.
func (p *Peer) takeAcks() {
	for i := range p.acks {
		p.onAck(&p.acks[i].ack, p.acks[i].at)
	}
	p.acks = p.acks[:0]
}

func (p *Peer) onAck(a *wire.Ack, now time.Time) {
	if a.Newest == 0 {
		return
	}
	if a.Newest != p.Tracker.NewestAck {
		p.Rate.OnAck(now)
	}
	fresh := p.Tracker.Ack(a)
	mark := func(t uint32, sample bool) {
		r := &p.sent[t%uint32(len(p.sent))]
		if r.tick != t || r.acked {
			return
		}
		r.acked = true
		held, _ := a.Holds(t)
		n := max(int(r.parts), 1)
		r.got = uint8(congestion.HeldParts(held, n))
		if r.bytes > 0 {
			p.Rate.OnDelivered(float64(r.bytes) * float64(r.got) / float64(n))
		}
		if at := p.sentAt(r, now); sample && !at.Before(p.Rate.Outage()) {
			// (Datagrams sent before an outage ended measure the outage, or
			// the queues it filled, not the path.)
			p.RTT.Sample(now.Sub(at), now)
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
func (p *Peer) judgeLoss(tick uint32, now time.Time) {
	horizon := max(4*p.RTT.SRTT(), minLossHorizon)
	if p.judged == 0 || int32(tick-p.judged) > int32(len(p.sent)) {
		p.judged = tick // first tick, or the ring lapped: nothing older to judge
	}
	newest := p.Tracker.NewestAck
	for ; int32(tick-p.judged) > 0; p.judged++ {
		r := &p.sent[p.judged%uint32(len(p.sent))]
		if r.tick != p.judged || r.bytes == 0 {
			continue
		}
		skipped := newest != 0 && int32(newest-r.tick) >= reorderThreshold && int32(newest-r.tick) < wire.AckWindow
		at := p.sentAt(r, now)
		if !r.acked && !skipped && now.Sub(at) < horizon {
			return
		}
		got := 0
		if r.acked {
			got = int(r.got)
		}
		p.Rate.Account(max(int(r.parts), 1), got, at)
	}
}

// reorderThreshold is how many later ticks a client may ack before an
// unacked tick counts as lost (datagrams overtaken by a few later ones are
// reordered, not lost).
const reorderThreshold = 3

// Tick builds what the client gets this net tick into p.Out: spawns and
// despawns for what entered or left its relevance (or changed layout), the
// ready message after the first batch, and the snapshot datagrams, built
// with the worker's encoder. It reads t and plan only and writes p and w.
func (p *Peer) Tick(t *Tick, plan *Plan, w *Scratch) {
	p.takeAcks()
	p.judgeLoss(t.Tick, t.Now)
	p.Rate.Update(t.Now, &p.RTT, plan.MTU)
	p.Rate.Refill(1 / float64(t.NetRate))
	p.Out.Encoder = w.Enc
	p.refreshSpawnHeld(t)
	p.settleInFlight(t)
	p.holdLostBaseline(t)
	p.spawnDiff(t, plan, &w.Spawns)
	if !p.Ready {
		p.Ready, p.Out.ReadyMsg = true, true
	}
	p.secBuf, p.Out.Messages, p.Out.MessagesLeft, p.Out.SectionBytes = p.secBuf[:0], 0, 0, 0
	if plan.Suspended {
		// No datagram reaches a suspended client: only its spawns are built
		// (its seat keeps them for its resume).
		p.Out.Pkts.Reset()
		p.Out.Info = encode.BuildInfo{}
		return
	}
	if plan.Messages != nil {
		p.secBuf, p.Out.Messages, p.Out.MessagesLeft = plan.Messages(p, &w.Sections, p.secBuf)
	}
	opt := plan.Opt
	opt.Budget, opt.Relevant, opt.Weights = plan.MTU-len(p.secBuf), p.Spawned, t.Weights
	opt.SpawnHeld = nil
	if p.spawnHeldAny {
		opt.SpawnHeld = p.SpawnHeld
	}
	opt.Allowance, opt.Limited = p.Rate.Allowance(math.MaxInt32)
	if opt.Limited {
		opt.Allowance -= len(p.secBuf) // (the section comes first)
	}
	p.Out.Info = w.Enc.Build(&p.Tracker, opt, &p.Out.Pkts)
	p.holdInFlight(t)
	if len(p.secBuf) > 0 {
		if p.Out.Pkts.Len() > 0 {
			p.Out.Pkts.AppendToLast(p.secBuf, wire.FlagMessages)
			p.Out.Info.Bytes += len(p.secBuf)
			p.Out.SectionBytes = len(p.secBuf)
		} else {
			p.Out.MessagesLeft += p.Out.Messages
			p.Out.Messages = 0
		}
	}
	p.Rate.Spend(p.Out.Info.Bytes)
	if p.firstSent.IsZero() {
		p.firstSent = t.Now
	}
	p.sent[t.Tick%uint32(len(p.sent))] = sentRecord{tick: t.Tick, at: p.clock(t.Now), bytes: uint32(p.Out.Info.Bytes), parts: uint8(p.Out.Pkts.Len())}
	p.Counters.SnapshotBytes += uint64(p.Out.Info.Bytes)
	p.Counters.Datagrams += uint64(p.Out.Pkts.Len())
	p.Counters.SpawnBytes += uint64(len(p.Out.SpawnMsg))
}

// refreshSpawnHeld takes out of SpawnHeld the entities that changed since
// it was last current (all of them if that is older than the ring), except
// those of a kept set held in flight (holdInFlight), which it marks moved.
func (p *Peer) refreshSpawnHeld(t *Tick) {
	if p.spawnHeldAny && p.spawnHeldAt != t.Tick {
		changed, ok := t.Ring.ChangedSince(p.spawnHeldAt)
		if ok {
			p.SpawnHeld.AndNot(changed)
		} else {
			clear(p.SpawnHeld)
			p.spawnHeldAny = false
		}
		for i := range p.inFlight {
			if f := &p.inFlight[i]; f.keep {
				f.moved = f.moved || !ok || f.slots.Intersects(changed)
				p.SpawnHeld.Or(f.slots)
				p.spawnHeldAny = true
			}
		}
	}
	p.spawnHeldAt = t.Tick
}

// holdLostBaseline: when the client's newest acked view has become too old
// to code against (its frame left the ring: a stall longer than the ring),
// the members of that view that have not changed since are held by the
// client at their current value (its mirrors show that view or a newer
// one), so they go into SpawnHeld rather than being sent again; only what
// changed meanwhile is.
func (p *Peer) holdLostBaseline(t *Tick) {
	if p.Tracker.Baseline(t.Tick, t.Ring) != nil {
		return
	}
	v := p.Tracker.NewestAcked()
	if v == nil || v.Tick == p.heldFrom {
		return
	}
	p.heldFrom = v.Tick
	members, behind := p.Tracker.Members(v), p.Tracker.Behind(v)
	changedAt := t.Ring.ChangedAts()
	bi := 0
	for wi, w := range members {
		for ; w != 0; w &= w - 1 {
			slot := uint32(wi<<6 | bits.TrailingZeros64(w))
			src := v.Tick
			for bi < len(behind) && behind[bi].Slot < slot {
				bi++
			}
			if bi < len(behind) && behind[bi].Slot == slot {
				src = behind[bi].Src
			}
			if int(slot) < len(changedAt) && int32(changedAt[slot]-src) <= 0 && p.Spawned.Has(slot) && !p.owns(t, slot) {
				p.SpawnHeld.Set(slot)
				p.spawnHeldAny = true
			}
		}
	}
}

// holdInFlight holds the entities this tick sent in full records for a
// client that acked before (not the join, whose spawns hold): entities it
// mirrors whose state its baseline lacks (the recovery from a stall or a
// resume, or a record lost before). Until the tick's ack, or its loss,
// they are not sent again (a recovery would otherwise send each about as
// many times as ticks fit in a round trip). Deltas are not held. The
// client's own entities are not held.
//
// An entity that changes meanwhile is let go and sent (refreshSpawnHeld),
// unless its set is kept: a recovery's, built with no baseline left (a
// resume, or a stall longer than the ring) that sent every candidate,
// with no other set in flight. Its entities are held while they change:
// the client, which showed them seconds old, shows them at the recovery's
// value until the first delta after its ack, a round trip later, rather
// than getting each in full again in every tick of that round trip. The
// views built while a kept entity has changed lack it, so they are thin
// (Tracker.SetThin): the baseline after the ack is the recovery's view,
// which has it. A second set in flight ends the keeping (letKeptGo): the
// entities of two sets are in no one view but the newest.
func (p *Peer) holdInFlight(t *Tick) {
	v := p.Tracker.At(t.Tick)
	if v == nil {
		return
	}
	for _, f := range p.inFlight {
		if f.keep && f.moved {
			p.Tracker.SetThin(v)
			break
		}
	}
	if p.Tracker.NewestAck == 0 || len(p.inFlight) >= maxInFlightSets {
		return
	}
	var base entity.Bitset
	if v.Base != 0 {
		b := p.Tracker.At(v.Base)
		if b == nil {
			return
		}
		base = p.Tracker.Members(b)
	}
	members := p.Tracker.Members(v)
	var set inFlightSet
	for wi, w := range members {
		for w &^= base.Word(wi) | p.SpawnHeld.Word(wi); w != 0; w &= w - 1 {
			if slot := uint32(wi<<6 | bits.TrailingZeros64(w)); !p.owns(t, slot) {
				set.slots.Set(slot)
			}
		}
	}
	if set.slots == nil {
		return
	}
	set.tick = t.Tick
	set.keep = v.Base == 0 && len(p.inFlight) == 0 && p.Out.Info.Deferred == 0
	p.letKeptGo(t)
	p.SpawnHeld.Or(set.slots)
	p.spawnHeldAny = true
	p.inFlight = append(p.inFlight, set)
}

// letKeptGo ends the keeping of the sets held in flight: their entities
// that changed since their tick are sent again.
func (p *Peer) letKeptGo(t *Tick) {
	for i := range p.inFlight {
		if f := &p.inFlight[i]; f.keep {
			f.keep = false
			p.unholdMoved(t, f)
		}
	}
}

// unholdMoved takes out of SpawnHeld the entities of f that changed since
// its tick (all of them if that is older than the ring).
func (p *Peer) unholdMoved(t *Tick, f *inFlightSet) {
	if !f.moved {
		return
	}
	f.moved = false
	changed, ok := t.Ring.ChangedSince(f.tick)
	if !ok {
		p.SpawnHeld.AndNot(f.slots)
		return
	}
	for i, w := range f.slots {
		if i < len(p.SpawnHeld) {
			p.SpawnHeld[i] &^= w & changed.Word(i)
		}
	}
}

// settleInFlight lets go of the entities held in flight whose tick's fate
// is known: those its ack says the client did not get (lost parts), or all
// of them if the tick was judged lost (or its view is gone); they are sent
// again. Of a kept set's entities that the client got, those that changed
// since are let go too (coded against the kept tick's view).
func (p *Peer) settleInFlight(t *Tick) {
	keep := p.inFlight[:0]
	for _, f := range p.inFlight {
		v := p.Tracker.At(f.tick)
		switch {
		case v != nil && v.Acked():
			p.unholdMoved(t, &f)
			f.slots.AndNot(p.Tracker.Members(v))
			p.SpawnHeld.AndNot(f.slots)
		case v == nil || int32(p.judged-f.tick) > 0:
			p.SpawnHeld.AndNot(f.slots)
		default:
			keep = append(keep, f)
			continue
		}
	}
	clear(p.inFlight[len(keep):])
	p.inFlight = keep
}

// owns reports whether the client owns slot (its entities are predicted
// and reconciled from the snapshots: never held).
func (p *Peer) owns(t *Tick, slot uint32) bool {
	return p.ID != 0 && int(slot) < len(t.Slots) && t.Slots[slot].Meta.Owner == p.ID
}

// spawnDiff writes the spawn/despawn batch that brings the client's mirrors
// in line with its interest: despawns of freed or reincarnated slots and
// spawns of component-set changes first (in the order the slots changed),
// then entries leaving interest, then entries entering it, each in slot
// order (so a client at its entity bound makes room before it is asked to
// take more). When the interest set did not change (changed is false) and
// the last diff left the spawned set equal to it, there is nothing to do.
func (p *Peer) spawnDiff(t *Tick, plan *Plan, sw *wire.SpawnWriter) {
	p.Out.Spawns, p.Out.Despawns = 0, 0
	p.Out.SpawnMsg = nil
	if !plan.RelevanceChanged && p.synced && len(t.Relayout) == 0 {
		return
	}
	f := t.Ring.Current()
	relevant := plan.Relevant
	sw.Reset()
	synced := true
	despawn := func(slot, gen uint32) {
		sw.Add(t.Plans, wire.SpawnEntry{Despawn: true, Slot: slot, Meta: entity.Meta{Gen: gen}}, false)
		p.Spawned.Clear(slot)
		p.SpawnHeld.Clear(slot)
		p.Out.Despawns++
	}
	spawn := func(slot uint32) {
		i := f.Lookup(slot)
		if i < 0 {
			synced = false // (retried next tick)
			return
		}
		m := f.Metas[i]
		si := &t.Slots[slot]
		owner := p.ID != 0 && m.Owner == p.ID
		sw.Add(t.Plans, wire.SpawnEntry{Slot: slot, Meta: m, Lanes: f.EntityLanes(i),
			HasKey: owner && si.Keyed && si.Key.Owner == p.ID, Key: si.Key.Key, Target: si.Target, HasTarget: si.HasTarget}, owner)
		p.Spawned.Set(slot)
		if !owner {
			p.SpawnHeld.Set(slot) // (the entry carries its state of this tick)
			p.spawnHeldAny = true
		} else {
			p.SpawnHeld.Clear(slot)
		}
		p.Out.Spawns++
	}
	for _, r := range t.Relayout {
		if !p.Spawned.Has(r.Slot) {
			continue
		}
		// The client holds r.Slot as it was at the last frame: r.Was.
		si := &t.Slots[r.Slot]
		switch {
		case !si.Alive || si.Gen != r.Was.Gen:
			despawn(r.Slot, r.Was.Gen)
		case (si.Meta.Set != r.Was.Set || si.Meta.Owner != r.Was.Owner || si.Target != r.WasTarget || si.HasTarget != r.WasHasTarget) && relevant.Has(r.Slot):
			spawn(r.Slot) // component set, owner or relation target change: same slot and generation
		}
	}
	// (Two passes over the words where the sets differ: few, in a big world.)
	words := max(len(relevant), len(p.Spawned))
	for wi := entity.NextDiff(p.Spawned, relevant, 0); wi < words; wi = entity.NextDiff(p.Spawned, relevant, wi+1) {
		for rem := p.Spawned.Word(wi) &^ relevant.Word(wi); rem != 0; rem &= rem - 1 {
			slot := uint32(wi*64 + bits.TrailingZeros64(rem))
			despawn(slot, t.Slots[slot].Gen) // (a slot whose generation changed is gone already)
		}
	}
	for wi := entity.NextDiff(p.Spawned, relevant, 0); wi < words; wi = entity.NextDiff(p.Spawned, relevant, wi+1) {
		for add := relevant.Word(wi) &^ p.Spawned.Word(wi); add != 0; add &= add - 1 {
			spawn(uint32(wi*64 + bits.TrailingZeros64(add)))
		}
	}
	p.synced = synced
	if cap(p.msgBuf) > 4096 && p.msgLen < cap(p.msgBuf)/8 {
		p.msgBuf = nil // (a burst of spawns is over)
	}
	p.msgLen = 0
	if msg := sw.Bytes(t.Tick, p.msgBuf); msg != nil {
		p.msgBuf, p.Out.SpawnMsg, p.msgLen = msg, msg, len(msg)
	}
}
