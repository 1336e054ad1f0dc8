package sim_test

import (
	"testing"
	"time"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/tests/internal/harness"
	"github.com/archenet/archenet/transport/sim"
	"github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/require"
)

// lossyLink is 5% loss, reordering, jitter and duplication both ways.
var lossyLink = func() sim.Link {
	c := sim.Conditions{Latency: 30 * time.Millisecond, Jitter: 10 * time.Millisecond, Loss: 0.05,
		Reorder: 0.1, ReorderDelay: 20 * time.Millisecond, Duplicate: 0.02}
	return sim.Link{Up: c, Down: c}
}()

// Reliable server messages over a lossy, reordering link arrive exactly
// once and in order: broadcasts to every client, private ones to their
// client, and entity-scoped ones to exactly the clients that see the
// entity — after its spawn, so that a reference to an entity spawned in the
// same tick resolves to its mirror when the message is read. An event about
// an entity despawned in the same tick (a kill) reaches the clients that
// held it, its reference reading as none there.
func TestMessagesReliableInOrderWithSpawns(t *testing.T) {
	hidden := map[ecs.Entity]replication.ClientID{} // entity → the client that does not see it
	h := harness.NewOn(t, sim.NewNetwork(7, harness.Epoch), lossyLink, nil, func(c *replication.ServerConfig) {
		c.Interest = &replication.Interest{Radius: 1e6, Every: 1, Focus: func(replication.ClientID) (components.Vec3, bool) { return components.Vec3{}, true }, Filter: func(c replication.ClientID, e ecs.Entity) bool { return hidden[e] != c }}
	})
	for range 3 {
		h.AddClient()
	}
	hits, err := replication.ServerMessages[harness.Hit](h.Server)
	require.NoError(t, err)

	type got struct {
		seq    uint32
		ref    components.Ref
		mirror bool // the reference resolved to the mirror of its NetID
	}
	received := make([][]got, 3)
	for ci, cs := range h.Clients {
		ep, err := replication.ClientMessages[harness.Hit](cs.Client)
		require.NoError(t, err)
		ep.Handle(func(m replication.Message[harness.Hit]) {
			g := got{seq: m.Value.Seq, ref: m.Value.Target}
			if r := m.Value.Target; r.Set && !r.Entity.IsZero() {
				e, ok := cs.Client.Entity(r.ID)
				g.mirror = ok && e == r.Entity
			}
			received[ci] = append(received[ci], g)
		})
	}

	const n = 90
	var (
		spawned []ecs.Entity
		want    = make([][]uint32, 3)
		kills   = map[uint32]bool{}
	)
	stepUntil(t, h, "every client ready", func() bool {
		for _, cs := range h.Clients {
			if !cs.Client.Ready() {
				return false
			}
		}
		return true
	})
	h.Game = func(tick int) {
		seq := uint32(tick)
		e := h.Spawn(0, components.Vec3{X: float64(tick)})
		hidden[e] = replication.ClientID(tick%4 + 1) // (4: seen by everyone)
		spawned = append(spawned, e)
		require.NoError(t, hits.SendAbout(e, harness.Hit{Target: components.RefTo(e), Damage: 7, Seq: seq}, replication.Reliable))
		require.NoError(t, hits.Broadcast(harness.Hit{Seq: 10000 + seq}, replication.Reliable))
		to := replication.ClientID(tick%3 + 1)
		require.NoError(t, hits.Send(to, harness.Hit{Seq: 20000 + seq}, replication.Reliable))
		for ci := range 3 {
			id := h.Clients[ci].Client.ID()
			if hidden[e] != id {
				want[ci] = append(want[ci], seq)
			}
			want[ci] = append(want[ci], 10000+seq)
			if to == id {
				want[ci] = append(want[ci], 20000+seq)
			}
		}
		if tick%10 == 0 && len(spawned) > 5 { // a kill: the event about an entity despawned this tick
			victim := spawned[len(spawned)-5]
			kseq := 30000 + seq
			require.NoError(t, hits.SendAbout(victim, harness.Hit{Target: components.RefTo(victim), Seq: kseq}, replication.Reliable))
			for ci := range 3 {
				if hidden[victim] != h.Clients[ci].Client.ID() {
					want[ci] = append(want[ci], kseq)
				}
			}
			kills[kseq] = true
			h.World.RemoveEntity(victim)
		}
	}
	h.Run(n)
	h.Game = nil
	for _, cs := range h.Clients {
		cs.Conn.SetConditions(sim.Conditions{Latency: 30 * time.Millisecond}, sim.Conditions{Latency: 30 * time.Millisecond})
	}
	h.Run(30)

	for ci := range 3 {
		seqs := make([]uint32, len(received[ci]))
		for i, g := range received[ci] {
			seqs[i] = g.seq
			switch {
			case g.seq < 10000: // scoped, about an entity spawned in the same tick
				require.True(t, g.ref.Set, "client %d: hit %d", ci+1, g.seq)
				require.True(t, g.mirror, "client %d: hit %d: the reference resolves to the mirror when it is read", ci+1, g.seq)
			case kills[g.seq]:
				require.True(t, g.ref.Set)
				require.True(t, g.ref.Entity.IsZero(), "client %d: kill %d names a despawned entity: none", ci+1, g.seq)
			default:
				require.False(t, g.ref.Set)
			}
		}
		require.Equal(t, want[ci], seqs, "client %d: exactly once, in order, and only what it sees", ci+1)
	}
	require.Equal(t, uint64(len(want[0])+len(want[1])+len(want[2])), h.Server.Stats.MessagesOut)
}

// A client's message naming an entity resolves, on the server, to the live
// entity; once the entity is gone and its slot reused, the same reference
// is refused before the game's handler runs.
func TestClientMessageStaleReferenceRefused(t *testing.T) {
	slow := sim.Conditions{Latency: 100 * time.Millisecond}
	h := harness.New(t, 1, sim.Link{Up: slow, Down: slow}, nil)
	e := h.Spawn(0, components.Vec3{})
	h.Run(10)
	h.RequireConverged(nil)
	var used []replication.Message[harness.Use]
	uses, err := replication.ServerMessages[harness.Use](h.Server)
	require.NoError(t, err)
	uses.Handle(func(m replication.Message[harness.Use]) { used = append(used, m) })
	cs := h.Clients[0]
	ep, err := replication.ClientMessages[harness.Use](cs.Client)
	require.NoError(t, err)
	id, _ := h.Server.NetID(e)
	mirror, ok := cs.Client.Entity(id)
	require.True(t, ok)

	require.NoError(t, ep.Send(harness.Use{Target: components.RefTo(mirror), Seq: 1}, replication.Reliable))
	h.Run(10)
	require.Len(t, used, 1)
	require.Equal(t, e, used[0].Value.Target.Entity, "the server reads its own entity")
	require.Equal(t, id, used[0].Value.Target.ID)
	require.Equal(t, cs.Client.ID(), used[0].From)
	require.Equal(t, uint64(0), h.Server.Stats.MessagesRefused)

	// The client names the entity; before its message arrives the server
	// removes it and reuses its slot.
	require.NoError(t, ep.Send(harness.Use{Target: components.RefTo(mirror), Seq: 2}, replication.Reliable))
	h.Step()
	h.World.RemoveEntity(e)
	h.Run(1)
	e2 := h.Spawn(0, components.Vec3{})
	h.Run(10)
	id2, _ := h.Server.NetID(e2)
	require.Equal(t, id.Index(), id2.Index(), "the slot was reused")
	require.NotEqual(t, id.Gen, id2.Gen)
	require.Len(t, used, 1, "the stale reference never reached the handler")
	require.Equal(t, 0, countSeq(uses.Received()), "nor the tick's Received")
	require.Equal(t, uint64(1), h.Server.Stats.MessagesRefused)
	require.Equal(t, replication.StateReady, cs.Client.State(), "a stale reference is refused, not a reason to drop the client")

	// A message naming none goes through.
	require.NoError(t, ep.Send(harness.Use{Seq: 3}, replication.Reliable))
	h.Run(10)
	require.Len(t, used, 2)
	require.False(t, used[1].Value.Target.Set)
	require.Equal(t, uint32(3), used[1].Value.Seq)
}

func countSeq[T any](seq func(func(T) bool)) int {
	n := 0
	for range seq {
		n++
	}
	return n
}
