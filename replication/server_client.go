package replication

import (
	"math"
	"math/bits"
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
	rtt    rttEstimator
	budget budgetController

	snapBytes, spawnBytes uint64
	datagrams             uint64
}

// lossHorizon is how many net ticks a snapshot may wait for its ack before
// it counts as lost.
const lossHorizon = 45

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
	c.budget = budgetController{min: float64(s.cfg.MinBytesPerSecond), max: float64(s.cfg.MaxBytesPerSecond)}
	// Start at half the cap and adapt from there.
	c.budget.rate = math.Max(c.budget.min, c.budget.max/2)
	c.snap.SetRate(int(c.budget.rate), c.burst(s))
	return c
}

func (c *serverClient) burst(s *Server) int {
	return max(s.cfg.MTU*2, int(c.budget.rate)/8)
}

func (c *serverClient) onAck(a *snapshot.Ack, now time.Time) {
	if a.Newest == 0 {
		return
	}
	if a.Newest != c.snap.NewestAck {
		c.budget.lastAck = now
	}
	c.snap.Ack(*a)
	mark := func(t uint32, sample bool) {
		r := &c.sent[t%uint32(len(c.sent))]
		if r.tick != t || r.acked {
			return
		}
		r.acked = true
		r.held, _ = a.Holds(t)
		if sample {
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

// rttEstimator keeps a smoothed RTT and a windowed minimum.
type rttEstimator struct {
	srtt, min time.Duration
	minAt     time.Time
	n         int
}

func (r *rttEstimator) sample(d time.Duration, now time.Time) {
	if d < 0 {
		return
	}
	r.n++
	if r.n == 1 {
		r.srtt = d
	} else {
		r.srtt += (d - r.srtt) / 8
	}
	if r.min == 0 || d <= r.min || now.Sub(r.minAt) > 10*time.Second {
		r.min, r.minAt = d, now
	}
}

// budgetController is an AIMD controller of a client's snapshot byte rate:
// it backs off multiplicatively when snapshots are lost or the RTT grows
// over its minimum (queueing), and grows back additively while the link is
// clean, so a congested client gets fewer, more important updates instead
// of a growing backlog.
type budgetController struct {
	rate, min, max float64
	loss           float64 // fast EWMA of the fraction of snapshots never acked
	lossBase       float64 // slow EWMA: the link's standing random loss
	lastChange     time.Time
	sent, lost     int // current loss window
	windows        int
	lossJudged     bool // the newest loss window already caused a back-off
	lastAck        time.Time
	started        time.Time
}

// account looks at a sent record old enough to judge and updates the loss
// estimate: of its parts datagrams, those the client did not ack were lost.
func (b *budgetController) account(r *sentRecord) {
	n := max(r.parts, 1)
	got := 0
	if r.acked {
		got = min(n, bits.OnesCount64(r.held&(1<<n-1)))
		if n == 64 {
			got = bits.OnesCount64(r.held)
		}
	}
	b.sent += n
	b.lost += n - got
	if b.sent >= 32 {
		f := float64(b.lost) / float64(b.sent)
		b.windows++
		b.loss += (f - b.loss) / 2
		b.lossBase += (f - b.lossBase) / 4
		b.lossJudged = false
		b.sent, b.lost = 0, 0
	}
}

// update adjusts the rate; it returns true if it changed.
func (b *budgetController) update(now time.Time, rtt *rttEstimator, netRate int) bool {
	interval := min(max(rtt.srtt, 100*time.Millisecond), 500*time.Millisecond)
	if !b.lastChange.IsZero() && now.Sub(b.lastChange) < interval {
		return false
	}
	elapsed := now.Sub(b.lastChange).Seconds()
	if b.lastChange.IsZero() {
		elapsed = interval.Seconds()
	}
	b.lastChange = now
	old := b.rate
	if b.started.IsZero() {
		b.started = now
	}
	// Queueing: RTT well above its minimum, or so high that a standing queue
	// is the only explanation (the minimum itself may have been measured
	// through that queue).
	queueing := rtt.n > 4 && (rtt.srtt > rtt.min+rtt.min/2+30*time.Millisecond || rtt.srtt > 750*time.Millisecond)
	// Standing random loss (a lossy radio link) is not congestion: back off
	// at most once per loss window when loss rises above its long-run level,
	// when queueing delay grows, or when acks stop arriving altogether.
	lossy := b.loss > b.lossBase+0.15 && !b.lossJudged
	if lossy {
		b.lossJudged = true
	}
	last := b.lastAck
	if last.IsZero() {
		last = b.started
	}
	silent := now.Sub(last) > max(time.Second, 4*rtt.srtt)
	if lossy || queueing || silent {
		b.rate = math.Max(b.min, b.rate*0.75)
	} else {
		// Increase by 4 KiB/s or 10% per second of clean link, whichever is more.
		b.rate = math.Min(b.max, b.rate+math.Max(4096, b.rate*0.1)*math.Min(elapsed, 1))
	}
	return b.rate != old
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

	// Adaptive budget, then the snapshot datagram. A snapshot not acked
	// after lossHorizon ticks counts as lost.
	if s.tick > lossHorizon {
		old := &c.sent[(s.tick-lossHorizon)%uint32(len(c.sent))]
		if old.tick == s.tick-lossHorizon && old.bytes > 0 {
			c.budget.account(old)
		}
	}
	rec := &c.sent[s.tick%uint32(len(c.sent))]
	if c.budget.update(now, &c.rtt, s.cfg.NetRate) {
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
	s.Stats.SnapshotBytes += uint64(info.Bytes)
	s.Stats.SnapshotDatagrams += uint64(s.pkts.Len())
	return nil
}
