package peer

import (
	"fmt"
	"testing"
	"time"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/internal/encode"
	"github.com/archenet/archenet/replication/internal/entity"
	"github.com/archenet/archenet/replication/internal/receive"
	"github.com/archenet/archenet/replication/internal/slots"
	"github.com/archenet/archenet/replication/internal/store"
	"github.com/archenet/archenet/replication/internal/wire"
	"github.com/archenet/archenet/replication/schema"
	"github.com/stretchr/testify/require"
)

// peerRig drives peers' state machines by hand, as the Server would but
// without one: no arche world, no transport, no goroutine. It keeps its own
// slot table and frame ring, quantizes its entities' values into each
// tick's frame, and hands every peer the tick's shared state and a plan
// whose relevance the test chooses. A test plays each client with a
// receive.Receiver and feeds its acks back.
type peerRig struct {
	t        testing.TB
	cfg      Config
	reg      *schema.Registry
	plans    []*schema.Plan
	world    *store.Ring
	g        *encode.Group
	wk       *testWorker
	slots    []slots.Info
	values   []components.Transform // by slot
	relayout []slots.Relaid
	tick     uint32
	now      time.Time
	peers    []*Peer
	plan     map[*Peer]*Plan
	// relevant, if set, gives a peer's relevance this tick (nil: every
	// live entity) and whether it may have changed.
	relevant func(p *Peer) (entity.Bitset, bool)
}

func newPeerRig(t testing.TB) *peerRig {
	reg := schema.NewRegistry()
	schema.MustRegister[components.Transform](reg)
	schema.MustRegister[components.Velocity](reg)
	// The server's defaults (replication.ServerConfig's).
	cfg := Config{Depth: 32, NetRate: 30, MinRate: 4 << 10, MaxRate: 512 << 10, MTU: 1200}
	w := store.New(reg, cfg.Depth)
	g := encode.NewGroup(w)
	return &peerRig{t: t, cfg: cfg, reg: reg, plans: reg.Plans(), world: w, g: g, wk: &testWorker{Scratch: Scratch{Enc: g.NewEncoder()}},
		now: time.Unix(1000, 0), plan: map[*Peer]*Plan{}}
}

// addPeer connects a client with id, as the handshake would.
func (r *peerRig) addPeer(id uint8) *Peer {
	p := &Peer{}
	p.Init(id, r.cfg, r.now)
	r.peers = append(r.peers, p)
	r.plan[p] = &Plan{MTU: 1200}
	return p
}

// note lists slot in relayout with its state before this tick's first
// change to it, as Server.noteLayout does.
func (r *peerRig) note(slot uint32) {
	for _, o := range r.relayout {
		if o.Slot == slot {
			return
		}
	}
	r.relayout = append(r.relayout, slots.Relaid{Slot: slot, Was: r.slots[slot].Meta, WasAlive: r.slots[slot].Alive})
}

// spawn adds an entity at pos in the lowest free slot (a new generation of
// a reused one) and returns its slot.
func (r *peerRig) spawn(pos components.Vec3) uint32 {
	slot := uint32(len(r.slots))
	for i := range r.slots {
		if !r.slots[i].Alive {
			slot = uint32(i)
			break
		}
	}
	if int(slot) == len(r.slots) {
		r.slots = append(r.slots, slots.Info{})
		r.values = append(r.values, components.Transform{})
		r.note(slot)
	} else {
		r.note(slot)
		r.slots[slot].Gen++
	}
	si := &r.slots[slot]
	si.Alive = true
	si.Meta = entity.Meta{Gen: si.Gen, Set: 1}
	r.values[slot] = components.Transform{Pos: pos, Rot: components.QuatIdentity()}
	return slot
}

// remove despawns the entity of slot.
func (r *peerRig) remove(slot uint32) {
	r.note(slot)
	r.slots[slot].Alive = false
}

// setOwner gives the entity of slot to client id.
func (r *peerRig) setOwner(slot uint32, id uint8) {
	r.note(slot)
	r.slots[slot].Meta.Owner = id
}

// addVelocity adds a Velocity (zero) to the entity of slot: its component
// set changes, its slot and generation do not.
func (r *peerRig) addVelocity(slot uint32) {
	r.note(slot)
	r.slots[slot].Meta.Set |= 2
}

func (r *peerRig) pos(slot uint32) *components.Vec3 { return &r.values[slot].Pos }

// alive returns the live slots.
func (r *peerRig) alive() entity.Bitset {
	var b entity.Bitset
	for slot := range r.slots {
		if r.slots[slot].Alive {
			b.Set(uint32(slot))
		}
	}
	return b
}

// step runs one net tick dt after the last: the frame, then every peer's
// tick; the peers' output is left in p.Out.
func (r *peerRig) step(dt time.Duration) {
	r.commit(dt)
	r.tickPeers()
}

// commit builds the frame of the next net tick, dt after the last.
func (r *peerRig) commit(dt time.Duration) {
	r.now = r.now.Add(dt)
	r.tick++
	r.world.Begin(r.tick)
	nt := r.plans[0].NumLanes()
	lanes := make([]uint64, nt+r.plans[1].NumLanes())
	for slot := range r.slots {
		si := &r.slots[slot]
		if !si.Alive {
			continue
		}
		schema.QuantizeValue(r.plans[0], &r.values[slot], lanes[:nt])
		n := nt
		if si.Meta.Set&2 != 0 {
			schema.QuantizeValue(r.plans[1], &components.Velocity{}, lanes[nt:])
			n = len(lanes)
		}
		r.world.PutLanes(uint32(slot), si.Meta, lanes[:n])
	}
	r.world.Commit()
}

// tickPeers runs every peer's tick on the frame commit built, after
// pre-encoding as a Server does.
func (r *peerRig) tickPeers() {
	t := Tick{Tick: r.tick, Now: r.now, NetRate: r.cfg.NetRate, Ring: r.world,
		Slots: r.slots, Relayout: r.relayout, Plans: r.plans}
	if n := r.g.BeginPreencode(); n > 0 {
		r.wk.Enc.Preencode(0, n)
	}
	for _, p := range r.peers {
		plan := r.plan[p]
		if r.relevant != nil {
			plan.Relevant, plan.RelevanceChanged = r.relevant(p)
		} else {
			plan.Relevant, plan.RelevanceChanged = r.alive(), true
		}
		r.wk.wanted.Or(plan.Relevant)
		p.Tick(&t, plan, &r.wk.Scratch)
	}
	r.wk.Enc.EndTick()
	r.g.EndPreencode(r.wk.wanted)
	clear(r.wk.wanted)
	r.world.EndTick()
	r.relayout = r.relayout[:0]
}

// batch decodes the spawn batch p built this tick (nil: none).
func (r *peerRig) batch(p *Peer) []wire.SpawnEntry {
	if p.Out.SpawnMsg == nil {
		return nil
	}
	var got []wire.SpawnEntry
	err := wire.ParseSpawns(p.Out.SpawnMsg, r.plans, p.ID, 1<<10, func(tick uint32, e wire.SpawnEntry) {
		require.Equal(r.t, r.tick, tick)
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

func ops(b []wire.SpawnEntry) []spawnOp {
	var o []spawnOp
	for _, e := range b {
		o = append(o, spawnOp{e.Despawn, e.Slot, e.Meta.Gen})
	}
	return o
}

// within returns the live slots within d of x = 0 (on x).
func (r *peerRig) within(d float64) entity.Bitset {
	var b entity.Bitset
	for slot := range r.slots {
		if x := r.values[slot].Pos.X; r.slots[slot].Alive && x >= -d && x <= d {
			b.Set(uint32(slot))
		}
	}
	return b
}

// TestPeerSpawnOrdering: a client's reliable batches spawn what enters its
// relevance in slot order, despawn a freed slot's old incarnation before
// spawning its new one, respawn a component-set change in place, and the
// ready message follows the first batch only.
func TestPeerSpawnOrdering(t *testing.T) {
	r := newPeerRig(t)
	r.relevant = func(*Peer) (entity.Bitset, bool) { return r.within(50), true }
	p := r.addPeer(1)
	r.setOwner(r.spawn(components.Vec3{}), 1) // slot 0: client 1's avatar
	var ents []uint32
	for i := range 5 {
		ents = append(ents, r.spawn(components.Vec3{X: float64(i)})) // slots 1..5
	}
	far := r.spawn(components.Vec3{X: 500}) // slot 6, not relevant
	r.step(33 * time.Millisecond)
	require.True(t, p.Out.ReadyMsg)
	b := r.batch(p)
	require.Equal(t, []spawnOp{{false, 0, 0}, {false, 1, 0}, {false, 2, 0}, {false, 3, 0}, {false, 4, 0}, {false, 5, 0}}, ops(b))
	require.Equal(t, uint8(1), b[0].Meta.Owner)
	require.Equal(t, 6, p.Out.Spawns)
	require.Equal(t, uint64(len(p.Out.SpawnMsg)), p.Counters.SpawnBytes, "the peer counts what it built")

	p.Out.ReadyMsg = false // (flush clears it)
	r.step(33 * time.Millisecond)
	require.False(t, p.Out.ReadyMsg, "one ready message")
	require.Nil(t, r.batch(p), "nothing changed")

	// Slot 2 freed and reused in one tick: the old incarnation goes first.
	r.remove(ents[1])
	ents[1] = r.spawn(components.Vec3{X: 1})
	require.Equal(t, uint32(2), ents[1])
	r.step(33 * time.Millisecond)
	require.Equal(t, []spawnOp{{true, 2, 0}, {false, 2, 1}}, ops(r.batch(p)))

	// A component added: the same slot and generation, spawned again with
	// the new set and no despawn.
	r.addVelocity(ents[3])
	r.step(33 * time.Millisecond)
	b = r.batch(p)
	require.Equal(t, []spawnOp{{false, 4, 0}}, ops(b))
	require.Equal(t, uint64(0b11), b[0].Meta.Set)

	// far comes in, ents[0] leaves, and both appear in slot order after the
	// despawn of a removed entity.
	r.pos(far).X = 10
	r.pos(ents[0]).X = 400
	r.remove(ents[4])
	r.step(33 * time.Millisecond)
	require.Equal(t, []spawnOp{{true, 5, 0}, {true, 1, 0}, {false, 6, 0}}, ops(r.batch(p)))
	r.step(33 * time.Millisecond)
	require.Nil(t, r.batch(p))
}

// TestPeerSpawnDiffFollowsPlan: the peer diffs its spawned set against the
// relevance its plan carries only when the plan says it may have changed or
// an entity's layout changed: a quiet tick costs nothing; a removal goes out
// at once; a reused slot the relevance does not name yet (the server's
// interest narrows it between updates) waits, and so does an entity that
// entered it.
func TestPeerSpawnDiffFollowsPlan(t *testing.T) {
	r := newPeerRig(t)
	var rel entity.Bitset
	changed := true
	r.relevant = func(*Peer) (entity.Bitset, bool) { return rel, changed }
	p := r.addPeer(1)
	a, b, c := r.spawn(components.Vec3{}), r.spawn(components.Vec3{X: 1}), r.spawn(components.Vec3{X: 2})
	rel.Set(a)
	rel.Set(b)
	r.step(33 * time.Millisecond)
	require.Equal(t, []spawnOp{{false, a, 0}, {false, b, 0}}, ops(r.batch(p)))
	require.True(t, p.synced)

	changed = false
	rel.Set(c) // (not announced: the peer does not look)
	r.step(33 * time.Millisecond)
	require.Nil(t, r.batch(p), "a quiet tick")
	rel.Clear(c)

	// b removed and its slot reused: the old incarnation is despawned at
	// once, the new one waits for the relevance to name it.
	r.remove(b)
	require.Equal(t, b, r.spawn(components.Vec3{X: 1}))
	rel.Clear(b)
	r.step(33 * time.Millisecond)
	require.Equal(t, []spawnOp{{true, b, 0}}, ops(r.batch(p)))
	r.step(33 * time.Millisecond)
	require.Nil(t, r.batch(p))

	changed = true // recomputed: b's new incarnation and c come in
	rel.Set(b)
	rel.Set(c)
	r.step(33 * time.Millisecond)
	require.Equal(t, []spawnOp{{false, b, 1}, {false, c, 0}}, ops(r.batch(p)))
	require.Equal(t, 3, p.Spawned.Count(), "a, b and c spawned")
}

// clientSim plays a client: it decodes a peer's datagrams and answers with
// acks.
type clientSim struct {
	recv *receive.Receiver
}

func newClientSim(r *peerRig, id uint8) *clientSim {
	return &clientSim{recv: receive.NewReceiver(r.reg, id, r.cfg.Depth)}
}

// take decodes the datagrams of p's tick for which keep (nil: all) says so
// and returns the client datagram carrying the ack.
func (c *clientSim) take(t *testing.T, p *Peer, keep func(i int) bool) []byte {
	for i := range p.Out.Pkts.Len() {
		if keep != nil && !keep(i) {
			continue
		}
		_, err := c.recv.Decode(p.Out.Pkts.At(i))
		require.NoError(t, err)
	}
	a := c.recv.Ack()
	return wire.AppendClientHeader(nil, &a)
}

// TestPeerAckProcessing: acks move the server's baseline, measure the RTT
// from the tick they name, count delivered bytes once, and a hostile ack is
// a protocol error that leaves the peer as it was.
func TestPeerAckProcessing(t *testing.T) {
	r := newPeerRig(t)
	p := r.addPeer(1)
	c := newClientSim(r, 1)
	var ents []uint32
	for i := range 40 {
		ents = append(ents, r.spawn(components.Vec3{X: float64(i)}))
	}
	move := func() {
		for _, e := range ents {
			r.pos(e).Z += 0.25
		}
	}
	// Tick 1: the spawns carry the entities' state; no datagram repeats it
	// while they do not change.
	r.step(33 * time.Millisecond)
	require.Equal(t, 40, p.Out.Spawns)
	require.Zero(t, p.Out.Info.Fulls, "spawned, unchanged: not sent")
	spawnTick := p.Out.Info.Bytes // (a header)
	_ = c.take(t, p, nil)
	move()
	r.step(33 * time.Millisecond)
	require.Equal(t, 40, p.Out.Info.Fulls, "changed since their spawn: full records")
	full := p.Out.Info.Bytes
	first := c.take(t, p, nil)
	// Unacked: every tick is coded against nothing.
	move()
	r.step(33 * time.Millisecond)
	require.Equal(t, uint32(0), p.Out.Info.Baseline)
	require.InDelta(t, full, p.Out.Info.Bytes, 16)
	_ = c.take(t, p, nil)

	// The ack of tick 2 arrives 50 ms after it was sent.
	r.now = r.now.Add(17 * time.Millisecond)
	newest, input, err := p.onDatagram(append(first, 0xAA), r.now, r.tick)
	require.NoError(t, err)
	require.Equal(t, []byte{0xAA}, input, "the input section is handed on")
	require.Equal(t, uint32(2), newest)
	require.Equal(t, uint32(0), p.Tracker.NewestAck, "acks are taken in by the peer's tick")
	p.takeAcks()
	require.Equal(t, uint32(2), p.Tracker.NewestAck)
	require.Equal(t, 50*time.Millisecond, p.RTT.SRTT())
	delivered := p.Rate.Delivered()
	require.Equal(t, float64(full+spawnTick), delivered, "ticks 1 and 2")
	_, _, err = p.onDatagram(first, r.now, r.tick)
	require.NoError(t, err, "a duplicate ack is harmless")
	p.takeAcks()
	require.Equal(t, delivered, p.Rate.Delivered(), "and counts nothing twice")
	require.Equal(t, 50*time.Millisecond, p.RTT.SRTT())

	// Now ticks are deltas against tick 2: a quarter-metre move in Z costs
	// a few bits per entity, not a full record.
	move()
	r.step(16 * time.Millisecond)
	require.Equal(t, uint32(2), p.Out.Info.Baseline, "coded against the acked tick 2")
	require.Less(t, p.Out.Info.Bytes, full/2)
	_ = c.take(t, p, nil)

	// Hostile acks: of a tick the server never built, garbage, truncated.
	before := p.Tracker.NewestAck
	future := wire.Ack{Newest: r.tick + 1}
	_, _, err = p.onDatagram(wire.AppendClientHeader(nil, &future), r.now, r.tick)
	require.ErrorContains(t, err, "from the future")
	_, _, err = p.onDatagram([]byte{0x7f, 1, 2}, r.now, r.tick)
	require.ErrorIs(t, err, wire.ErrMalformed)
	_, _, err = p.onDatagram(first[:3], r.now, r.tick)
	require.ErrorIs(t, err, wire.ErrMalformed)
	require.Empty(t, p.acks, "a refused datagram's ack is not kept")
	p.takeAcks()
	require.Equal(t, before, p.Tracker.NewestAck)
}

// TestPeerResendsWhatAPartialAckMissed: a tick sent in several datagrams, of
// which the client got only some, is acked with the parts it holds; the
// server sends the missing records again and the client converges.
func TestPeerResendsWhatAPartialAckMissed(t *testing.T) {
	r := newPeerRig(t)
	p := r.addPeer(1)
	c := newClientSim(r, 1)
	var ents []uint32
	for i := range 300 {
		ents = append(ents, r.spawn(components.Vec3{X: float64(i), Y: float64(i % 7)}))
	}
	r.step(33 * time.Millisecond) // the spawns carry the state
	_ = c.take(t, p, nil)
	for _, e := range ents {
		r.pos(e).Z = 1 // changed since: full records
	}
	r.step(33 * time.Millisecond)
	n := p.Out.Pkts.Len()
	require.GreaterOrEqual(t, n, 2, "300 full records do not fit one datagram")
	d := c.take(t, p, func(i int) bool { return i != 1 }) // part 1 lost
	got, count := c.recv.Parts(2)
	require.Equal(t, n-1, got)
	require.Equal(t, n, count)
	for range 3 { // ackGrace: the view is held back, then acked partially
		_, _, err := p.onDatagram(d, r.now, r.tick)
		require.NoError(t, err)
		r.step(33 * time.Millisecond)
		d = c.take(t, p, nil)
	}
	_, _, err := p.onDatagram(d, r.now, r.tick)
	require.NoError(t, err)
	r.step(33 * time.Millisecond)
	c.take(t, p, nil)
	v := c.recv.Latest()
	require.Equal(t, 300, v.Len(), "the lost part's entities came again")
	f := r.world.Current()
	for i := range v.Len() {
		j := f.Lookup(v.Slots[i])
		require.Equal(t, f.EntityLanes(j), v.EntityLanes(i))
	}
}

// TestPeerCongestionResponses: the budget a peer gives its client grows
// while acks come back on a clean path, drops to the floor when acks stop,
// comes back when they resume, and backs off under heavy loss.
func TestPeerCongestionResponses(t *testing.T) {
	r := newPeerRig(t)
	p := r.addPeer(1)
	c := newClientSim(r, 1)
	ents := make([]uint32, 200)
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
			tick := r.tick
			inflight = append(inflight, c.take(t, p, func(i int) bool { return deliver(tick, i) }))
			if len(inflight) > rtt {
				if acks {
					_, _, err := p.onDatagram(inflight[0], r.now, r.tick)
					require.NoError(t, err)
				}
				inflight = inflight[1:]
			}
		}
	}
	all := func(uint32, int) bool { return true }
	start := p.Rate.Rate()
	require.Equal(t, r.cfg.MaxRate/8, int(start), "slow start begins at an eighth of the ceiling")
	run(60, all, true)
	require.Equal(t, float64(r.cfg.MaxRate), p.Rate.Rate(), "a clean path earns the ceiling")
	require.InDelta(t, 130*time.Millisecond, p.RTT.SRTT(), float64(10*time.Millisecond))

	// Acks stop (the path is down): within an outage interval the rate is at
	// the floor.
	run(15, func(uint32, int) bool { return false }, false)
	require.Equal(t, float64(r.cfg.MinRate), p.Rate.Rate())
	// They resume: a quarter of the old rate at once, then doubling back.
	run(rtt+2, all, true)
	require.GreaterOrEqual(t, p.Rate.Rate(), float64(r.cfg.MaxRate)/4)
	run(30, all, true)
	require.Equal(t, float64(r.cfg.MaxRate), p.Rate.Rate())

	// Two datagrams in three lost for a while: congestion, not standing
	// loss — the rate backs off.
	high := p.Rate.Rate()
	run(60, func(tick uint32, part int) bool { return (int(tick)+part)%3 == 0 }, true)
	require.Less(t, p.Rate.Rate(), high/2, "loss %v", fmt.Sprint(p.Rate.Loss()))
	require.GreaterOrEqual(t, p.Rate.Rate(), float64(r.cfg.MinRate))
}

// testWorker is a server worker's scratch, with the relevance of the peers
// it built (for the next tick's pre-encoding).
type testWorker struct {
	Scratch
	wanted entity.Bitset
}
