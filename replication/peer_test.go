package replication

import (
	"testing"
	"time"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/schema"
	"github.com/archenet/archenet/replication/snapshot"
	"github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/require"
)

// peerRig drives a Server's tick phases and its peers' state machines by
// hand: no transport, no goroutine but the workers', simulated time. A test
// plays each client with a snapshot.Receiver and feeds its acks back.
type peerRig struct {
	t   *testing.T
	w   *ecs.World
	s   *Server
	now time.Time
}

func newPeerRig(t *testing.T, tweak func(*ServerConfig)) *peerRig {
	reg := schema.NewRegistry()
	schema.MustRegister[components.Transform](reg)
	schema.MustRegister[components.Velocity](reg)
	w := ecs.NewWorld()
	r := &peerRig{t: t, w: &w, now: time.Unix(1000, 0)}
	cfg := ServerConfig{Registry: reg, NetRate: 30, Now: func() time.Time { return r.now }, Logger: quietLogger}
	if tweak != nil {
		tweak(&cfg)
	}
	s, err := NewServer(&w, nil, cfg)
	require.NoError(t, err)
	r.s = s
	return r
}

// addPeer connects a client with id, as the handshake would.
func (r *peerRig) addPeer(id ClientID) *peer {
	p := newPeer(id, nil, &r.s.cfg)
	r.s.clients[id] = p
	return p
}

// step runs one net tick dt after the last: the frame, then every peer's
// sequential and parallel phases; the peers' output is left in p.out.
func (r *peerRig) step(dt time.Duration) {
	r.now = r.now.Add(dt)
	s := r.s
	s.commitTick()
	var peers []*peer
	for _, p := range s.clients {
		if p != nil {
			s.planPeer(p, r.now, 1200)
			peers = append(peers, p)
		}
	}
	s.buildPeers(peers, r.now)
	s.endTick()
}

func (r *peerRig) spawn(pos components.Vec3) ecs.Entity {
	rep, tr := ecs.ComponentID[components.Replicated](r.w), ecs.ComponentID[components.Transform](r.w)
	e := r.w.NewEntity(rep, tr)
	t := (*components.Transform)(r.w.Get(e, tr))
	t.Pos, t.Rot = pos, components.QuatIdentity()
	return e
}

// avatar spawns an entity at the origin owned by client id (its interest
// focus).
func (r *peerRig) avatar(id ClientID) ecs.Entity {
	e := r.spawn(components.Vec3{})
	owner := ecs.ComponentID[components.Owner](r.w)
	r.w.Add(e, owner)
	(*components.Owner)(r.w.Get(e, owner)).Client = id
	return e
}

// row spawns n entities at x = x0, x0+1, ... (consecutive slots).
func (r *peerRig) row(n int, x0 float64) []ecs.Entity {
	var ents []ecs.Entity
	for i := range n {
		ents = append(ents, r.spawn(components.Vec3{X: x0 + float64(i)}))
	}
	return ents
}

func (r *peerRig) pos(e ecs.Entity) *components.Vec3 {
	return &(*components.Transform)(r.w.Get(e, ecs.ComponentID[components.Transform](r.w))).Pos
}

// batch decodes the spawn batch p built this tick (nil: none).
func (r *peerRig) batch(p *peer) []spawnEntry {
	if p.out.spawnMsg == nil {
		return nil
	}
	var got []spawnEntry
	err := parseSpawns(p.out.spawnMsg, r.s.plans, p.id, 1<<10, func(tick uint32, e spawnEntry) {
		require.Equal(r.t, r.s.tick, tick)
		e.Lanes = nil
		got = append(got, e)
	})
	require.NoError(r.t, err)
	return got
}

type spawnOp struct {
	despawn bool
	slot    uint32
	gen     uint32
}

func ops(b []spawnEntry) []spawnOp {
	var o []spawnOp
	for _, e := range b {
		o = append(o, spawnOp{e.Despawn, e.Slot, e.Meta.Gen})
	}
	return o
}

// TestPeerSpawnOrdering: a client's reliable batches spawn what enters its
// view in slot order, despawn a freed slot's old incarnation before spawning
// its new one, respawn a component-set change in place, and the ready
// message follows the first batch only.
func TestPeerSpawnOrdering(t *testing.T) {
	r := newPeerRig(t, func(c *ServerConfig) { c.Interest = &Interest{Radius: 50, Every: 1} })
	p := r.addPeer(1)
	r.avatar(1)                             // slot 0: client 1's focus
	ents := r.row(5, 0)                     // slots 1..5
	far := r.spawn(components.Vec3{X: 500}) // slot 6, out of interest
	r.step(33 * time.Millisecond)
	require.True(t, p.out.readyMsg)
	require.Equal(t, []spawnOp{{false, 0, 0}, {false, 1, 0}, {false, 2, 0}, {false, 3, 0}, {false, 4, 0}, {false, 5, 0}}, ops(r.batch(p)))
	require.Equal(t, 6, p.out.spawns)

	p.out.readyMsg = false // (flush clears it)
	r.step(33 * time.Millisecond)
	require.False(t, p.out.readyMsg, "one ready message")
	require.Nil(t, r.batch(p), "nothing changed")

	// Slot 2 freed and reused in one tick: the old incarnation goes first.
	r.w.RemoveEntity(ents[1])
	ents[1] = r.spawn(components.Vec3{X: 1})
	r.step(33 * time.Millisecond)
	require.Equal(t, []spawnOp{{true, 2, 0}, {false, 2, 1}}, ops(r.batch(p)))

	// A component added: the same slot and generation, spawned again with
	// the new set and no despawn.
	vel := ecs.ComponentID[components.Velocity](r.w)
	r.w.Add(ents[3], vel)
	r.step(33 * time.Millisecond)
	b := r.batch(p)
	require.Equal(t, []spawnOp{{false, 4, 0}}, ops(b))
	require.Equal(t, uint64(0b11), b[0].Meta.Set)

	// Interest: far comes in, ents[0] leaves (beyond the leave radius), and
	// both appear in slot order after the despawn of a removed entity.
	r.pos(far).X = 10
	r.pos(ents[0]).X = 400
	r.w.RemoveEntity(ents[4])
	r.step(33 * time.Millisecond)
	require.Equal(t, []spawnOp{{true, 5, 0}, {true, 1, 0}, {false, 6, 0}}, ops(r.batch(p)))
	r.step(33 * time.Millisecond)
	require.Nil(t, r.batch(p))
}

// TestPeerSpawnsBetweenRelevanceUpdates: between interest updates (every
// 3rd tick here) a quiet tick sends no batch (the diff is skipped), an
// entity removed is despawned at once, a slot reused waits for the next
// update to be spawned, and an entity moving into range waits for it too.
func TestPeerSpawnsBetweenRelevanceUpdates(t *testing.T) {
	r := newPeerRig(t, func(c *ServerConfig) { c.Interest = &Interest{Radius: 50, Every: 3} })
	p := r.addPeer(1)
	r.avatar(1)                             // slot 0: client 1's focus
	ents := r.row(3, 1)                     // slots 1..3
	far := r.spawn(components.Vec3{X: 500}) // slot 4
	for r.s.tick%3 != 2 {                   // (the next tick is due)
		r.step(33 * time.Millisecond)
	}
	r.step(33 * time.Millisecond) // due: everything near comes in
	require.Equal(t, []spawnOp{{false, 0, 0}, {false, 1, 0}, {false, 2, 0}, {false, 3, 0}}, ops(r.batch(p)))
	require.True(t, p.synced)

	r.step(33 * time.Millisecond) // not due, nothing happened
	require.Nil(t, r.batch(p))
	require.True(t, p.synced)

	// Not due: a removal goes out at once; its slot, reused, and an entity
	// that moved into range wait for the update.
	r.w.RemoveEntity(ents[1])
	ents[1] = r.spawn(components.Vec3{X: 2})
	r.pos(far).X = 10
	r.step(33 * time.Millisecond)
	require.NotZero(t, r.s.tick%3)
	require.Equal(t, []spawnOp{{true, 2, 0}}, ops(r.batch(p)))
	r.step(33 * time.Millisecond) // due
	require.Zero(t, r.s.tick%3)
	require.Equal(t, []spawnOp{{false, 2, 1}, {false, 4, 0}}, ops(r.batch(p)))
	r.step(33 * time.Millisecond)
	require.Nil(t, r.batch(p))
}

// clientSim plays a client: it decodes a peer's datagrams and answers with
// acks.
type clientSim struct {
	recv *snapshot.Receiver
}

func newClientSim(r *peerRig, id ClientID) *clientSim {
	return &clientSim{recv: snapshot.NewReceiver(r.s.cfg.Registry, id, r.s.cfg.Depth)}
}

// take decodes the datagrams of p's tick for which keep (nil: all) says so
// and returns the client datagram carrying the ack.
func (c *clientSim) take(t *testing.T, p *peer, keep func(i int) bool) []byte {
	for i := range p.out.pkts.Len() {
		if keep != nil && !keep(i) {
			continue
		}
		_, err := c.recv.Decode(p.out.pkts.At(i))
		require.NoError(t, err)
	}
	a := c.recv.Ack()
	return appendClientHeader(nil, &a)
}

// TestPeerAckProcessing: acks move the server's baseline, measure the RTT
// from the tick they name, count delivered bytes once, and a hostile ack is
// a protocol error that leaves the peer as it was.
func TestPeerAckProcessing(t *testing.T) {
	r := newPeerRig(t, nil)
	p := r.addPeer(1)
	c := newClientSim(r, 1)
	var ents []ecs.Entity
	for i := range 40 {
		ents = append(ents, r.spawn(components.Vec3{X: float64(i)}))
	}
	move := func() {
		for _, e := range ents {
			r.pos(e).Z += 0.25
		}
	}
	r.step(33 * time.Millisecond)
	full := p.out.info.Bytes
	first := c.take(t, p, nil)
	// Unacked: every tick is coded against nothing.
	move()
	r.step(33 * time.Millisecond)
	require.Equal(t, uint32(0), p.out.info.Baseline)
	require.InDelta(t, full, p.out.info.Bytes, 16)
	_ = c.take(t, p, nil)

	// The ack of tick 1 arrives 50 ms after it was sent.
	r.now = r.now.Add(17 * time.Millisecond)
	newest, input, err := p.onDatagram(append(first, 0xAA), r.now, r.s.tick)
	require.NoError(t, err)
	require.Equal(t, []byte{0xAA}, input, "the input section is handed on")
	require.Equal(t, uint32(1), newest)
	require.Equal(t, uint32(0), p.snap.NewestAck, "acks are taken in by the peer's tick")
	p.takeAcks()
	require.Equal(t, uint32(1), p.snap.NewestAck)
	require.Equal(t, 50*time.Millisecond, p.rtt.srtt)
	delivered := p.budget.delivered
	require.Equal(t, float64(full), delivered)
	_, _, err = p.onDatagram(first, r.now, r.s.tick)
	require.NoError(t, err, "a duplicate ack is harmless")
	p.takeAcks()
	require.Equal(t, delivered, p.budget.delivered, "and counts nothing twice")
	require.Equal(t, 50*time.Millisecond, p.rtt.srtt)

	// Now ticks are deltas against tick 1: a quarter-metre move in Z costs
	// a few bits per entity, not a full record.
	move()
	r.step(16 * time.Millisecond)
	require.Equal(t, uint32(1), p.out.info.Baseline, "coded against the acked tick 1")
	require.Less(t, p.out.info.Bytes, full/2)
	_ = c.take(t, p, nil)

	// Hostile acks: of a tick the server never built, garbage, truncated.
	before := p.snap.NewestAck
	future := snapshot.Ack{Newest: r.s.tick + 1}
	_, _, err = p.onDatagram(appendClientHeader(nil, &future), r.now, r.s.tick)
	require.ErrorContains(t, err, "from the future")
	_, _, err = p.onDatagram([]byte{0x7f, 1, 2}, r.now, r.s.tick)
	require.ErrorIs(t, err, ErrMalformed)
	_, _, err = p.onDatagram(first[:3], r.now, r.s.tick)
	require.ErrorIs(t, err, ErrMalformed)
	require.Empty(t, p.acks, "a refused datagram's ack is not kept")
	p.takeAcks()
	require.Equal(t, before, p.snap.NewestAck)
}

// TestPeerResendsWhatAPartialAckMissed: a tick sent in several datagrams, of
// which the client got only some, is acked with the parts it holds; the
// server sends the missing records again and the client converges.
func TestPeerResendsWhatAPartialAckMissed(t *testing.T) {
	r := newPeerRig(t, nil)
	p := r.addPeer(1)
	c := newClientSim(r, 1)
	for i := range 300 {
		r.spawn(components.Vec3{X: float64(i), Y: float64(i % 7)})
	}
	r.step(33 * time.Millisecond)
	n := p.out.pkts.Len()
	require.GreaterOrEqual(t, n, 2, "300 full records do not fit one datagram")
	d := c.take(t, p, func(i int) bool { return i != 1 }) // part 1 lost
	got, count := c.recv.Parts(1)
	require.Equal(t, n-1, got)
	require.Equal(t, n, count)
	for range 3 { // ackGrace: the view is held back, then acked partially
		_, _, err := p.onDatagram(d, r.now, r.s.tick)
		require.NoError(t, err)
		r.step(33 * time.Millisecond)
		d = c.take(t, p, nil)
	}
	_, _, err := p.onDatagram(d, r.now, r.s.tick)
	require.NoError(t, err)
	r.step(33 * time.Millisecond)
	c.take(t, p, nil)
	v := c.recv.Latest()
	require.Equal(t, 300, v.Len(), "the lost part's entities came again")
	f := r.s.snap.Current()
	for i := range v.Len() {
		j := f.Lookup(v.Slots[i])
		require.Equal(t, f.EntityLanes(j), v.EntityLanes(i))
	}
}

// TestPeerCongestionResponses: the budget a peer gives its client grows
// while acks come back on a clean path, drops to the floor when acks stop,
// comes back when they resume, and backs off under heavy loss.
func TestPeerCongestionResponses(t *testing.T) {
	r := newPeerRig(t, nil)
	p := r.addPeer(1)
	c := newClientSim(r, 1)
	ents := make([]ecs.Entity, 200)
	for i := range ents {
		ents[i] = r.spawn(components.Vec3{X: float64(i)})
	}
	const rtt = 4 // ticks of 33 ms: ~130 ms
	var inflight [][]byte
	// run steps n ticks, the client getting datagrams when deliver says so
	// and its acks arriving rtt ticks later when acks is true.
	run := func(n int, deliver func(tick uint32, part int) bool, acks bool) {
		for range n {
			for _, e := range ents {
				r.pos(e).Z += 0.3
			}
			r.step(33 * time.Millisecond)
			tick := r.s.tick
			inflight = append(inflight, c.take(t, p, func(i int) bool { return deliver(tick, i) }))
			if len(inflight) > rtt {
				if acks {
					_, _, err := p.onDatagram(inflight[0], r.now, r.s.tick)
					require.NoError(t, err)
				}
				inflight = inflight[1:]
			}
		}
	}
	all := func(uint32, int) bool { return true }
	start := p.budget.rate
	require.Equal(t, r.s.cfg.MaxBytesPerSecond/8, int(start), "slow start begins at an eighth of the ceiling")
	run(60, all, true)
	require.Equal(t, float64(r.s.cfg.MaxBytesPerSecond), p.budget.rate, "a clean path earns the ceiling")
	require.InDelta(t, 130*time.Millisecond, p.rtt.srtt, float64(10*time.Millisecond))

	// Acks stop (the path is down): within an outage interval the rate is at
	// the floor.
	run(15, func(uint32, int) bool { return false }, false)
	require.Equal(t, float64(r.s.cfg.MinBytesPerSecond), p.budget.rate)
	// They resume: a quarter of the old rate at once, then doubling back.
	run(rtt+2, all, true)
	require.GreaterOrEqual(t, p.budget.rate, float64(r.s.cfg.MaxBytesPerSecond)/4)
	run(30, all, true)
	require.Equal(t, float64(r.s.cfg.MaxBytesPerSecond), p.budget.rate)

	// Two datagrams in three lost for a while: congestion, not standing
	// loss — the rate backs off.
	high := p.budget.rate
	run(60, func(tick uint32, part int) bool { return (int(tick)+part)%3 == 0 }, true)
	require.Less(t, p.budget.rate, high/2, "loss %.2f base %.2f", p.budget.loss, p.budget.lossBase)
	require.GreaterOrEqual(t, p.budget.rate, float64(r.s.cfg.MinBytesPerSecond))
}
