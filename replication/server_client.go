package replication

import (
	"time"

	"github.com/archenet/archenet/replication/snapshot"
	"github.com/archenet/archenet/transport"
)

// serverClient is the server's state of one connected client.
type serverClient struct {
	id   ClientID
	conn transport.Conn
	snap *snapshot.Client

	relevant     snapshot.Bitset // interest this tick
	relevantNext snapshot.Bitset // spare buffer
	spawned      snapshot.Bitset // told to spawn over the reliable channel
	spawnedGen   []uint32
	spawnedSet   []uint64
	ready        bool

	sent   []sentRecord // ring by tick
	judged uint32       // next sent tick to judge for loss
	rtt    rttEstimator
	budget budgetController

	snapBytes, spawnBytes uint64
	datagrams             uint64
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

func newServerClient(id ClientID, conn transport.Conn, s *Server) *serverClient {
	// The sent ring is longer than the snapshot ring so that RTT is still
	// measured when a congested queue delays acks by seconds.
	c := &serverClient{id: id, conn: conn, snap: snapshot.NewClient(id, s.cfg.Depth), sent: make([]sentRecord, 512)}
	c.budget = newBudgetController(float64(s.cfg.MinBytesPerSecond), float64(s.cfg.MaxBytesPerSecond))
	c.snap.SetRate(int(c.budget.rate), c.burst(s))
	return c
}

// judgeLoss hands the budget controller every sent record whose fate is
// known, oldest first: acked ones (an ack is final about which datagrams of
// its tick arrived), ones the client skipped (it acked a tick reorderThreshold
// or more later), and ones older than 4 smoothed RTTs (at least
// minLossHorizon) without an ack.
func (c *serverClient) judgeLoss(tick uint32, now time.Time) {
	horizon := max(4*c.rtt.srtt, minLossHorizon)
	if c.judged == 0 || int32(tick-c.judged) > int32(len(c.sent)) {
		c.judged = tick // first tick, or the ring lapped: nothing older to judge
	}
	newest := c.snap.NewestAck
	for ; int32(tick-c.judged) > 0; c.judged++ {
		r := &c.sent[c.judged%uint32(len(c.sent))]
		if r.tick != c.judged || r.bytes == 0 {
			continue
		}
		skipped := newest != 0 && int32(newest-r.tick) >= reorderThreshold && int32(newest-r.tick) < snapshot.AckWindow
		if !r.acked && !skipped && now.Sub(r.at) < horizon {
			return
		}
		c.budget.account(r)
	}
}

// reorderThreshold is how many later ticks a client may ack before an
// unacked tick counts as lost (datagrams overtaken by a few later ones are
// reordered, not lost).
const reorderThreshold = 3

func (c *serverClient) burst(s *Server) int {
	return max(s.cfg.MTU*2, int(c.budget.rate)/8)
}

func (c *serverClient) onAck(a *snapshot.Ack, now time.Time) {
	if a.Newest == 0 {
		return
	}
	if a.Newest != c.snap.NewestAck {
		c.budget.onAck(now)
	}
	c.snap.Ack(*a)
	mark := func(t uint32, sample bool) {
		r := &c.sent[t%uint32(len(c.sent))]
		if r.tick != t || r.acked {
			return
		}
		r.acked = true
		r.held, _ = a.Holds(t)
		if n := max(r.parts, 1); r.bytes > 0 {
			c.budget.onDelivered(float64(r.bytes) * float64(heldParts(r.held, n)) / float64(n))
		}
		if sample && !r.at.Before(c.budget.ignoreBefore) {
			// (Datagrams sent before an outage ended measure the outage, or
			// the queues it filled, not the path.)
			c.rtt.sample(now.Sub(r.at), now)
		}
	}
	mark(a.Newest, true)
	for i := uint32(0); i < 32; i++ {
		if a.Mask>>i&1 != 0 && a.Newest > i+1 {
			mark(a.Newest-1-i, false)
		}
	}
}

func (s *Server) sendClient(c *serverClient, now time.Time) error {
	f := s.snap.Current()
	// Interest.
	if s.interest != nil {
		if s.interest.due(s.tick) || c.relevant == nil {
			s.interest.relevantFor(s, c)
		} else {
			s.interest.effective(s, c)
		}
	} else {
		c.relevant = append(c.relevant[:0], s.alive...)
	}
	// Reliable spawns and despawns.
	s.spawnW.reset()
	for len(c.spawnedGen) < len(s.slots) {
		c.spawnedGen = append(c.spawnedGen, 0)
		c.spawnedSet = append(c.spawnedSet, 0)
	}
	spawns, despawns := 0, 0
	despawn := func(slot uint32) {
		s.spawnW.add(s.plans, spawnEntry{Despawn: true, Slot: slot, Meta: snapshot.Meta{Gen: c.spawnedGen[slot]}}, false)
		c.spawned.Clear(slot)
		despawns++
	}
	spawn := func(slot uint32) {
		i := f.Lookup(slot)
		if i < 0 {
			return
		}
		m := f.Metas[i]
		s.spawnW.add(s.plans, spawnEntry{Slot: slot, Meta: m, Lanes: f.EntityLanes(i)}, c.id != 0 && m.Owner == c.id)
		c.spawned.Set(slot)
		c.spawnedGen[slot], c.spawnedSet[slot] = m.Gen, m.Set
		spawns++
	}
	for _, slot := range s.relayout {
		if !c.spawned.Has(slot) {
			continue
		}
		si := &s.slots[slot]
		switch {
		case !si.alive || si.gen != c.spawnedGen[slot]:
			despawn(slot)
		case si.meta.Set != c.spawnedSet[slot] && c.relevant.Has(slot):
			spawn(slot) // component set change: same slot and generation
		}
	}
	words := max(len(c.relevant), len(c.spawned))
	for wi := 0; wi < words; wi++ {
		var r, sp uint64
		if wi < len(c.relevant) {
			r = c.relevant[wi]
		}
		if wi < len(c.spawned) {
			sp = c.spawned[wi]
		}
		for add := r &^ sp; add != 0; add &= add - 1 {
			spawn(uint32(wi*64 + tz64(add)))
		}
		for rem := sp &^ r; rem != 0; rem &= rem - 1 {
			despawn(uint32(wi*64 + tz64(rem)))
		}
	}
	if msg := s.spawnW.bytes(s.tick, s.msgBuf); msg != nil {
		s.msgBuf = msg
		if err := c.conn.SendMessage(msg); err != nil {
			return err
		}
		c.spawnBytes += uint64(len(msg))
		s.Stats.SpawnBytes += uint64(len(msg))
		s.Stats.Spawns += uint64(spawns)
		s.Stats.Despawns += uint64(despawns)
	}
	if !c.ready {
		c.ready = true
		if err := c.conn.SendMessage(appendReady(nil, s.tick)); err != nil {
			return err
		}
	}

	// Adaptive budget, then the snapshot datagrams.
	c.judgeLoss(s.tick, now)
	rec := &c.sent[s.tick%uint32(len(c.sent))]
	if c.budget.update(now, &c.rtt) {
		c.snap.SetRate(int(c.budget.rate), c.burst(s))
	}
	c.snap.Refill(1 / float64(s.cfg.NetRate))
	opt := snapshot.BuildOptions{Budget: min(s.cfg.MTU, c.conn.MaxDatagramSize()), Relevant: c.spawned, Weights: s.weights}
	if s.cfg.InputAck != nil {
		opt.InputAck, opt.HasInputAck = s.cfg.InputAck(c.id)
		if opt.HasInputAck && s.cfg.InputFeedback != nil {
			opt.InputHeld, opt.InputDepth, opt.HasInputFeedback = s.cfg.InputFeedback(c.id)
		}
	}
	info := s.enc.Build(c.snap, opt, &s.pkts)
	*rec = sentRecord{tick: s.tick, at: now, bytes: info.Bytes, parts: s.pkts.Len()}
	for i := range s.pkts.Len() {
		if err := c.conn.SendDatagram(s.pkts.At(i)); err != nil {
			return err
		}
	}
	c.snapBytes += uint64(info.Bytes)
	c.datagrams += uint64(s.pkts.Len())
	s.Stats.Deferred += uint64(info.Deferred)
	s.Stats.SnapshotHeaderBits += uint64(info.HeaderBits)

	s.Stats.SnapshotBytes += uint64(info.Bytes)
	s.Stats.SnapshotDatagrams += uint64(s.pkts.Len())
	return nil
}
