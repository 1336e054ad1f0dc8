package replication

import (
	"fmt"

	"github.com/archenet/archenet/components"
	"math/bits"
	"slices"
	"sync/atomic"
	"time"

	"github.com/archenet/archenet/replication/snapshot"
	"github.com/archenet/archenet/transport"
)

// peer is the server's side of one client's channel, as a state machine: the
// client's datagrams (acks, input sections) and the server's frames go in
// with the time, and what to send the client comes out — a spawn batch, the
// ready message, the tick's snapshot datagrams ([peer.out]). It does no I/O
// and starts no goroutine: the Server pumps its input from the client's
// connection and its output to it. Within one net tick [peer.tick] only
// reads the server's shared state (frame ring, slot table, interest grid),
// so the peers of a tick are built in parallel.
type peer struct {
	id   ClientID
	conn transport.Conn // the Server's pump's, never used here
	snap *snapshot.Client

	relevant     snapshot.Bitset // interest this tick
	relevantNext snapshot.Bitset // spare buffer
	focusX       float64         // x of the interest focus at the last relevance update (orders peers for the workers)
	spawned      snapshot.Bitset // told to spawn over the reliable channel
	spawnedGen   []uint32
	spawnedSet   []uint64
	ready        bool // the ready message went out
	// synced: spawned equalled relevant after the last spawnDiff
	synced bool

	sent   []sentRecord // ring by tick
	judged uint32       // next sent tick to judge for loss
	rtt    rttEstimator
	budget budgetController

	rx    []rxInput // input sections received this tick, for the Input hook
	rxErr error     // a protocol error in what the client sent this tick
	// acks received, taken in by the peer's next tick (in parallel with
	// the other peers') or, failing that, its next Receive
	acks []heardAck

	plan   peerPlan    // this tick's inputs from the server's sequential phase
	out    peerOutput  // this tick's output, for the server to send
	built  atomic.Bool // out is this tick's (sendPeers)
	msgBuf []byte      // the spawn batch's buffer

	heard     time.Time // the last datagram from the client (or the Welcome)
	welcomed  time.Time
	firstSent time.Time // the first tick built for the client (JoinTimeout)

	snapBytes, spawnBytes uint64
	datagrams             uint64
}

// rxInput is the input section of one client datagram and the tick it
// acked.
type rxInput struct {
	ack     uint32
	section []byte
}

// heardAck is an ack and when it was received.
type heardAck struct {
	ack snapshot.Ack
	at  time.Time
}

// peerPlan is what the server decides for a peer before the parallel phase:
// values from user hooks and the connection, which must not be called from
// several goroutines.
type peerPlan struct {
	mtu int
	opt snapshot.BuildOptions // input extension fields
	// focus is the game's Interest.Focus for the client, asked when
	// relevance is recomputed this tick (hasFocus: it named one)
	focus    components.Vec3
	hasFocus bool
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

// sentRecord is what the server sent a client at one tick.
type sentRecord struct {
	tick  uint32
	at    time.Time
	acked bool
	bytes int
	parts int    // datagrams
	held  uint64 // parts the client acked (valid once acked)
}

func newPeer(id ClientID, conn transport.Conn, cfg *ServerConfig) *peer {
	// The sent ring is longer than the snapshot ring so that RTT is still
	// measured when a congested queue delays acks by seconds.
	p := &peer{id: id, conn: conn, snap: snapshot.NewClient(id, cfg.Depth), sent: make([]sentRecord, 512)}
	p.budget = newBudgetController(float64(cfg.MinBytesPerSecond), float64(cfg.MaxBytesPerSecond))
	p.snap.SetRate(int(p.budget.rate), p.burst(cfg.MTU))
	return p
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

// burst is the token bucket's depth: an eighth of a second, at least two
// datagrams.
func (p *peer) burst(mtu int) int { return max(mtu*2, int(p.budget.rate)/8) }

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
	fresh := p.snap.Ack(*a)
	mark := func(t uint32, sample bool) {
		r := &p.sent[t%uint32(len(p.sent))]
		if r.tick != t || r.acked {
			return
		}
		r.acked = true
		r.held, _ = a.Holds(t)
		if n := max(r.parts, 1); r.bytes > 0 {
			p.budget.onDelivered(float64(r.bytes) * float64(heldParts(r.held, n)) / float64(n))
		}
		if sample && !r.at.Before(p.budget.ignoreBefore) {
			// (Datagrams sent before an outage ended measure the outage, or
			// the queues it filled, not the path.)
			p.rtt.sample(now.Sub(r.at), now)
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
		if !r.acked && !skipped && now.Sub(r.at) < horizon {
			return
		}
		p.budget.account(r)
	}
}

// reorderThreshold is how many later ticks a client may ack before an
// unacked tick counts as lost (datagrams overtaken by a few later ones are
// reordered, not lost).
const reorderThreshold = 3

// prepare starts a peer's tick: loss judging, the budget and the byte
// allowance of the tick.
func (p *peer) prepare(tick uint32, now time.Time, netRate int) {
	p.judgeLoss(tick, now)
	if p.budget.update(now, &p.rtt) {
		p.snap.SetRate(int(p.budget.rate), p.burst(p.plan.mtu))
	}
	p.snap.Refill(1 / float64(netRate))
}

// tick builds what the client gets this net tick into p.out: spawns and
// despawns for what entered or left its interest (or changed layout), the
// ready message after the first batch, and the snapshot datagrams. It reads
// the server's shared state only and writes p and the worker's scratch, so
// peers run in parallel.
func (p *peer) tick(s *Server, w *worker, now time.Time) {
	p.takeAcks()
	p.prepare(s.tick, now, s.cfg.NetRate)
	p.out.encoder = w.enc
	changed := p.updateRelevance(s)
	p.spawnDiff(s, w, changed)
	if !p.ready {
		p.ready, p.out.readyMsg = true, true
	}
	opt := p.plan.opt
	opt.Budget, opt.Relevant, opt.Weights = p.plan.mtu, p.spawned, s.weights
	p.out.info = w.enc.Build(p.snap, opt, &p.out.pkts)
	if p.firstSent.IsZero() {
		p.firstSent = now
	}
	p.sent[s.tick%uint32(len(p.sent))] = sentRecord{tick: s.tick, at: now, bytes: p.out.info.Bytes, parts: p.out.pkts.Len()}
}

// updateRelevance sets p.relevant for this tick and reports whether it
// may differ from the last tick's: it was recomputed, or an entity was
// spawned, despawned or changed its components (s.relayout: the only
// changes of the alive set).
func (p *peer) updateRelevance(s *Server) (changed bool) {
	switch {
	case s.interest == nil:
		p.relevant = append(p.relevant[:0], s.alive...)
	case s.interest.due(s.tick) || p.relevant == nil:
		s.interest.relevantFor(s, p)
		return true
	default:
		s.interest.effective(s, p)
	}
	return len(s.relayout) > 0
}

// spawnDiff writes the spawn/despawn batch that brings the client's mirrors
// in line with its interest: despawns of freed or reincarnated slots and
// spawns of component-set changes first (in the order the slots changed),
// then entries leaving interest, then entries entering it, each in slot
// order (so a client at its entity bound makes room before it is asked to
// take more). When the interest set did not change (changed is false) and
// the last diff left the spawned set equal to it, there is nothing to do.
func (p *peer) spawnDiff(s *Server, w *worker, changed bool) {
	p.out.spawns, p.out.despawns = 0, 0
	p.out.spawnMsg = nil
	if !changed && p.synced && len(s.relayout) == 0 {
		return
	}
	f := s.snap.Current()
	sw := &w.spawns
	sw.reset()
	if n, old := len(s.slots), len(p.spawnedGen); old < n { // (one growth, not one append per slot)
		p.spawnedGen = slices.Grow(p.spawnedGen, n-old)[:n]
		p.spawnedSet = slices.Grow(p.spawnedSet, n-old)[:n]
		clear(p.spawnedGen[old:])
		clear(p.spawnedSet[old:])
	}
	synced := true
	despawn := func(slot uint32) {
		sw.add(s.plans, spawnEntry{Despawn: true, Slot: slot, Meta: snapshot.Meta{Gen: p.spawnedGen[slot]}}, false)
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
		si := &s.slots[slot]
		owner := p.id != 0 && m.Owner == p.id
		sw.add(s.plans, spawnEntry{Slot: slot, Meta: m, Lanes: f.EntityLanes(i),
			HasKey: owner && si.keyed && si.key.owner == p.id, Key: si.key.key}, owner)
		p.spawned.Set(slot)
		p.spawnedGen[slot], p.spawnedSet[slot] = m.Gen, m.Set
		p.out.spawns++
	}
	for _, slot := range s.relayout {
		if !p.spawned.Has(slot) {
			continue
		}
		si := &s.slots[slot]
		switch {
		case !si.alive || si.gen != p.spawnedGen[slot]:
			despawn(slot)
		case si.meta.Set != p.spawnedSet[slot] && p.relevant.Has(slot):
			spawn(slot) // component set change: same slot and generation
		}
	}
	words := max(len(p.relevant), len(p.spawned))
	for wi := range words {
		for rem := p.spawned.Word(wi) &^ p.relevant.Word(wi); rem != 0; rem &= rem - 1 {
			despawn(uint32(wi*64 + tz64(rem)))
		}
	}
	for wi := range words {
		for add := p.relevant.Word(wi) &^ p.spawned.Word(wi); add != 0; add &= add - 1 {
			spawn(uint32(wi*64 + tz64(add)))
		}
	}
	p.synced = synced
	if msg := sw.bytes(s.tick, p.msgBuf); msg != nil {
		p.msgBuf, p.out.spawnMsg = msg, msg
	}
}
