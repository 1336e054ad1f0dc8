package tests

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/sim"
	"github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/require"
)

func (h *harness) pos(e ecs.Entity) *components.Vec3 {
	return &(*components.Transform)(h.sw.Get(e, ecs.ComponentID[components.Transform](h.sw))).Pos
}

// churn moves 10% of ents each tick and replaces one entity every 3 ticks.
func churn(h *harness, rng *rand.Rand, ents []ecs.Entity) func(int) {
	return func(tick int) {
		for _, e := range ents {
			if h.sw.Alive(e) && rng.IntN(10) == 0 {
				h.pos(e).X += rng.Float64() - 0.5
			}
		}
		if tick%3 == 0 {
			i := rng.IntN(len(ents))
			if h.sw.Alive(ents[i]) {
				h.sw.RemoveEntity(ents[i])
			}
			ents[i] = h.spawn(0, components.Vec3{X: rng.Float64() * 100})
		}
	}
}

func TestLateJoin(t *testing.T) {
	h := newHarness(t, 1, sim.Link{Up: sim.Conditions{Latency: 20e6}, Down: sim.Conditions{Latency: 20e6}}, nil)
	rng := rand.New(rand.NewPCG(1, 9))
	ents := make([]ecs.Entity, 300)
	for i := range ents {
		ents[i] = h.spawn(0, components.Vec3{X: rng.Float64() * 100})
	}
	game := churn(h, rng, ents)
	h.game = game
	h.run(300)
	late := h.addClient()
	ready := false
	late.c.OnReady(func() { ready = true })
	for i := 0; i < 10 && !ready; i++ {
		h.step()
	}
	require.True(t, ready, "late joiner ready within 10 ticks")
	h.run(20)
	h.game = nil
	h.run(3)
	h.requireConverged(nil)
	require.Equal(t, 300, late.c.Mirrors())
}

func TestReconnectAfterLinkDown(t *testing.T) {
	link := sim.Link{IdleTimeout: time.Second}
	h := newHarness(t, 2, link, nil)
	rng := rand.New(rand.NewPCG(2, 9))
	ents := make([]ecs.Entity, 50)
	for i := range ents {
		ents[i] = h.spawn(0, components.Vec3{X: float64(i)})
	}
	h.game = churn(h, rng, ents)
	h.run(30)
	h.requireConverged(nil)
	cs := h.clients[1]
	before := map[ecs.Entity]bool{}
	q := cs.w.Query(ecs.All(ecs.ComponentID[components.NetID](cs.w)))
	for q.Next() {
		before[q.Entity()] = true
	}
	cs.conn.SetLinkDown(true)
	h.run(45) // 1.5 s: the idle timeout closes both ends
	require.Equal(t, replication.StateClosed, cs.c.State())
	require.True(t, errors.Is(cs.c.Err(), transport.ErrClosed), "%v", cs.c.Err())
	require.Len(t, h.srv.Clients(), 1, "the server dropped the silent client; the other stays")

	conn, err := h.net.Dial("server", link)
	require.NoError(t, err)
	cs.conn = conn
	require.NoError(t, cs.c.Reconnect(conn))
	h.run(20)
	h.game = nil
	h.run(3)
	h.requireConverged(nil)
	// Every mirror is a new entity: the old ones were removed on reconnect.
	q = cs.w.Query(ecs.All(ecs.ComponentID[components.NetID](cs.w)))
	n := 0
	for q.Next() {
		n++
	}
	require.Equal(t, 50, n)
	require.Equal(t, replication.StateReady, cs.c.State())
}

func TestHandleReuseAndStaleReferences(t *testing.T) {
	h := newHarness(t, 1, sim.Link{}, nil)
	a := h.spawn(0, components.Vec3{X: 1})
	b := h.spawn(0, components.Vec3{X: 2})
	h.run(3)
	oldID, ok := h.srv.NetID(a)
	require.True(t, ok)
	oldMirror, ok := h.clients[0].c.Entity(oldID)
	require.True(t, ok)

	// Despawn a and spawn c in the same tick: c reuses a's slot with the next
	// generation, well within the ring window.
	h.sw.RemoveEntity(a)
	h.run(1)
	c := h.spawn(0, components.Vec3{X: 999, Y: 5})
	h.run(1)
	newID, ok := h.srv.NetID(c)
	require.True(t, ok)
	require.Equal(t, oldID.Index(), newID.Index(), "slot reused")
	require.Equal(t, oldID.Gen+1, newID.Gen)
	h.run(3)
	h.requireConverged(nil)
	newMirror, ok := h.clients[0].c.Entity(newID)
	require.True(t, ok)
	require.NotEqual(t, oldMirror, newMirror, "a new mirror, not the old one moved")
	require.False(t, h.clients[0].w.Alive(oldMirror))
	_, ok = h.clients[0].c.Entity(oldID)
	require.False(t, ok)

	// Stale references are rejected before any state change.
	_, ok = h.srv.Resolve(oldID)
	require.False(t, ok, "stale generation")
	e, ok := h.srv.Resolve(newID)
	require.True(t, ok)
	require.Equal(t, c, e)
	forged := newID
	forged.Handle = components.MakeHandle(7, newID.Index())
	_, ok = h.srv.Resolve(forged)
	require.False(t, ok, "wrong owner bits")
	bid, _ := h.srv.NetID(b)
	_, ok = h.srv.Resolve(components.NetID{Handle: bid.Handle + 1000, Gen: 0})
	require.False(t, ok, "unknown slot")
}

func TestOwnerOnlyFields(t *testing.T) {
	h := newHarness(t, 2, sim.Link{}, nil)
	hid := ecs.ComponentID[Health](h.sw)
	mine := h.spawn(1, components.Vec3{}, hid)
	*(*Health)(h.sw.Get(mine, hid)) = Health{HP: 90, Ammo: 33}
	h.run(3)
	h.requireConverged(nil) // compares owner-only lanes for the owner, zero for others
	id, _ := h.srv.NetID(mine)
	for ci, want := range []uint16{33, 0} {
		cs := h.clients[ci]
		require.Equal(t, uint8(ci+1), cs.c.ID())
		e, ok := cs.c.Entity(id)
		require.True(t, ok)
		hp := (*Health)(cs.w.Get(e, ecs.ComponentID[Health](cs.w)))
		require.Equal(t, int16(90), hp.HP)
		require.Equal(t, want, hp.Ammo, "client %d", ci+1)
	}
	// Changes of the owner-only field reach only the owner.
	for i := 0; i < 20; i++ {
		(*Health)(h.sw.Get(mine, hid)).Ammo--
		h.step()
		e, _ := h.clients[1].c.Entity(id)
		require.Equal(t, uint16(0), (*Health)(h.clients[1].w.Get(e, ecs.ComponentID[Health](h.clients[1].w))).Ammo)
	}
	h.run(2)
	h.requireConverged(nil)
	e, _ := h.clients[0].c.Entity(id)
	require.Equal(t, uint16(13), (*Health)(h.clients[0].w.Get(e, ecs.ComponentID[Health](h.clients[0].w))).Ammo)
}

func TestInterestHysteresis(t *testing.T) {
	h := newHarness(t, 1, sim.Link{}, func(c *replication.ServerConfig) {
		c.Interest = &replication.Interest{Radius: 100}
	})
	avatar := h.spawn(1, components.Vec3{}) // client 1's focus
	near := h.spawn(0, components.Vec3{X: 50})
	far := h.spawn(0, components.Vec3{X: 500})
	global := h.sw.NewEntity(ecs.ComponentID[components.Replicated](h.sw), ecs.ComponentID[Team](h.sw)) // no Transform
	h.run(3)
	cl := h.clients[0].c
	has := func(e ecs.Entity) bool {
		id, _ := h.srv.NetID(e)
		_, ok := cl.Entity(id)
		return ok
	}
	require.True(t, has(avatar))
	require.True(t, has(near))
	require.False(t, has(far))
	require.True(t, has(global))
	relevant := func(_ int, e ecs.Entity) bool { return e != far }
	h.requireConverged(relevant)

	// far approaches: spawned once inside 100 m.
	h.pos(far).X = 99
	h.run(2)
	require.True(t, has(far))
	spawns := cl.Stats.Spawns
	// Oscillating across the 100 m border does not flap (leave radius 115 m).
	for i := 0; i < 20; i++ {
		h.pos(far).X = 99 + float64(i%2)*14
		h.step()
		require.True(t, has(far))
	}
	require.Equal(t, spawns, cl.Stats.Spawns)
	// Beyond the leave radius it is despawned on this client.
	h.pos(far).X = 120
	h.run(2)
	require.False(t, has(far))
	require.True(t, h.sw.Alive(far))
	// The focus follows the avatar.
	h.pos(avatar).X = 480
	h.pos(far).X = 500
	h.run(2)
	require.True(t, has(far))
	require.False(t, has(near))
}

func TestSendRateDivisorAndDormancy(t *testing.T) {
	h := newHarness(t, 1, sim.Link{}, nil)
	rid := ecs.ComponentID[components.Replicated](h.sw)
	slow := h.spawn(0, components.Vec3{})
	(*components.Replicated)(h.sw.Get(slow, rid)).SendEvery = 4
	dormant := h.spawn(0, components.Vec3{})
	(*components.Replicated)(h.sw.Get(dormant, rid)).Dormant = true
	h.sw.Remove(dormant, rid) // re-add so the server sees the new Replicated value
	h.sw.Add(dormant, rid)
	(*components.Replicated)(h.sw.Get(dormant, rid)).Dormant = true
	h.sw.Remove(slow, rid)
	h.sw.Add(slow, rid)
	(*components.Replicated)(h.sw.Get(slow, rid)).SendEvery = 4
	h.run(3)
	cl := h.clients[0]
	sid, _ := h.srv.NetID(slow)
	mirrorX := func(id components.NetID) float64 {
		e, ok := cl.c.Entity(id)
		require.True(t, ok)
		return (*components.Transform)(cl.w.Get(e, ecs.ComponentID[components.Transform](cl.w))).Pos.X
	}
	changes := 0
	last := mirrorX(sid)
	for i := 0; i < 40; i++ {
		h.pos(slow).X += 1 // moves every tick
		h.step()
		if x := mirrorX(sid); x != last {
			changes++
			last = x
		}
	}
	require.InDelta(t, 10, changes, 1, "a SendEvery=4 entity updates every 4th net tick")
	h.run(5)
	require.Equal(t, h.pos(slow).X, mirrorX(sid))

	// Dormant: changes are not seen until MarkDirty.
	did, _ := h.srv.NetID(dormant)
	h.pos(dormant).Z = 7
	h.run(5)
	e, _ := cl.c.Entity(did)
	require.Equal(t, 0.0, (*components.Transform)(cl.w.Get(e, ecs.ComponentID[components.Transform](cl.w))).Pos.Z)
	h.srv.MarkDirty(dormant)
	h.run(2)
	require.Equal(t, 7.0, (*components.Transform)(cl.w.Get(e, ecs.ComponentID[components.Transform](cl.w))).Pos.Z)
}

func TestBudgetBacksOffUnderBandwidthCap(t *testing.T) {
	capped := sim.Conditions{Latency: 30e6, Bandwidth: 6000, QueueBytes: 8 << 10}
	h := newHarness(t, 1, sim.Link{Up: sim.Conditions{Latency: 30e6}, Down: capped}, nil)
	rng := rand.New(rand.NewPCG(3, 9))
	ents := make([]ecs.Entity, 400)
	for i := range ents {
		ents[i] = h.spawn(0, components.Vec3{X: rng.Float64() * 100, Z: rng.Float64() * 100})
	}
	h.game = func(int) {
		for _, e := range ents {
			if rng.IntN(2) == 0 {
				p := h.pos(e)
				p.X += rng.Float64() - 0.5
				p.Z += rng.Float64() - 0.5
			}
		}
	}
	h.run(3)
	start, _ := h.srv.Client(1) // the initial budget
	h.run(147)
	// AIMD saw-tooths around the capacity: look at the budget over 5 s.
	sum, lowest := 0, math.MaxInt
	for i := 0; i < 150; i++ {
		h.step()
		ci, _ := h.srv.Client(1)
		sum += ci.BytesPerSecond
		lowest = min(lowest, ci.BytesPerSecond)
	}
	capInfo, _ := h.srv.Client(1)
	mean := sum / 150
	t.Logf("budget: start %d B/s; under a 6000 B/s cap mean %d B/s, lowest %d B/s, rtt %v, loss %.2f", start.BytesPerSecond, mean, lowest, capInfo.RTT, capInfo.Loss)
	require.Less(t, mean, start.BytesPerSecond/2, "backed off")
	require.Less(t, mean, 12000, "around the capacity")
	require.Less(t, lowest, 6000, "probes below the capacity")
	require.Less(t, capInfo.RTT, 2*time.Second, "no growing backlog")
	// The cap lifts: the budget grows back.
	up := capped
	up.Bandwidth = 0
	h.clients[0].conn.SetConditions(sim.Conditions{Latency: 30e6}, up)
	h.run(300)
	after, _ := h.srv.Client(1)
	t.Logf("after the cap lifts: %d B/s", after.BytesPerSecond)
	require.Greater(t, after.BytesPerSecond, mean*2)
	h.game = nil
	h.run(10)
	h.requireConverged(nil)
}

// The server's input feedback rides with the input ack in every snapshot
// datagram, and the client reads each report from OnSnapshot.
func TestInputFeedbackReachesClient(t *testing.T) {
	sent := map[uint32]int{} // server tick → depth sent to client 1
	var h *harness
	h = newHarness(t, 0, sim.Link{}, func(c *replication.ServerConfig) {
		c.InputAck = func(id uint8) (uint32, bool) { return 40 + h.srv.Tick(), id == 1 }
		c.InputFeedback = func(id uint8) (uint32, int, bool) {
			d := int(h.srv.Tick()%9) - 3 // −3..5
			sent[h.srv.Tick()] = d
			return 45 + h.srv.Tick(), d, true
		}
	})
	var got []replication.InputReport
	var ticks []uint32
	var c *clientSide
	h.clientCfg = func(cfg *replication.ClientConfig) {
		cfg.OnSnapshot = func(tick uint32, _ time.Time) {
			r, ok := c.c.InputReport(tick)
			require.True(t, ok && r.HasFeedback, "tick %d", tick)
			got, ticks = append(got, r), append(ticks, tick)
		}
	}
	c = h.addClient()
	e := h.spawn(1, components.Vec3{})
	h.game = func(tick int) { h.pos(e).X = float64(tick) } // something changes every tick
	h.run(30)
	require.GreaterOrEqual(t, len(got), 25)
	negative := false
	for i, r := range got {
		tick := ticks[i]
		want, ok := sent[tick]
		require.True(t, ok, "tick %d was not sent", tick)
		require.Equal(t, replication.InputReport{Applied: 40 + tick, Held: 45 + tick, Depth: want, HasFeedback: true}, r, "tick %d", tick)
		negative = negative || r.Depth < 0
	}
	require.True(t, negative, "negative depths arrive too")
	_, ok := c.c.InputReport(ticks[0] - 100)
	require.False(t, ok, "a tick the client does not hold")
}

func TestInputAckReachesClient(t *testing.T) {
	applied := map[uint8]uint32{}
	h := newHarness(t, 2, sim.Link{}, func(c *replication.ServerConfig) {
		c.InputAck = func(id uint8) (uint32, bool) { v, ok := applied[id]; return v, ok }
	})
	h.spawn(1, components.Vec3{})
	h.run(3)
	_, _, ok := h.clients[0].c.InputAck()
	require.False(t, ok)
	applied[1] = 500
	h.game = func(tick int) { applied[1]++ }
	h.run(3)
	in, st, ok := h.clients[0].c.InputAck()
	require.True(t, ok)
	require.Equal(t, uint32(503), in)
	require.Equal(t, h.srv.Tick(), st)
	// The mirror's state tick is the tick of the snapshot that last changed it.
	e := h.spawn(0, components.Vec3{})
	h.run(2)
	id, _ := h.srv.NetID(e)
	before, ok := h.clients[0].c.StateTick(id)
	require.True(t, ok)
	h.pos(e).X = 3
	h.run(1)
	after, ok := h.clients[0].c.StateTick(id)
	require.True(t, ok)
	require.Equal(t, h.srv.Tick(), after)
	require.Less(t, before, after)

	_, _, ok = h.clients[1].c.InputAck()
	require.False(t, ok, "only client 1 has an input ack")
}

// A server created after its simulation started numbers snapshots with the
// simulation's net ticks (ServerConfig.Tick), and clients turn them into
// simulation ticks with the divisor the Welcome carries.
func TestSimulationTicks(t *testing.T) {
	netTick := uint32(500) // where the simulation is when the server starts
	h := newHarness(t, 2, sim.Link{}, func(c *replication.ServerConfig) {
		c.NetDivisor = 3
		c.Tick = func() uint32 { return netTick }
	})
	e := h.spawn(1, components.Vec3{})
	h.game = func(int) { netTick++; h.pos(e).X++ }
	h.run(20)
	require.Equal(t, netTick, h.srv.Tick())
	for _, c := range h.clients {
		require.Equal(t, 3, c.c.NetDivisor())
		require.Equal(t, netTick, c.c.ServerTick())
		require.Equal(t, uint64(netTick)*3, c.c.SimTick(c.c.ServerTick()))
		id, _ := h.srv.NetID(e)
		st, ok := c.c.StateTick(id)
		require.True(t, ok)
		require.Equal(t, netTick, st, "the mirror's state is this net tick's")
	}
	late := h.addClient() // welcomed at net tick 520
	h.game = nil
	h.run(5)
	h.requireConverged(nil)
	require.Equal(t, 3, late.c.NetDivisor())
	require.Equal(t, h.srv.Tick(), late.c.ServerTick())

	// A tick source that stops advancing is overridden: net ticks keep
	// counting one per Send.
	before := h.srv.Tick()
	h.run(3)
	require.Equal(t, before+3, h.srv.Tick())
}
