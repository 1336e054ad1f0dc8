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

// hideFrom is an interest where every client sees every entity, but those
// hidden from it (hidden: entity → the client that does not see it; the
// test changes it between steps), recomputed every tick.
func hideFrom(hidden map[ecs.Entity]replication.ClientID) func(*replication.ServerConfig) {
	return func(c *replication.ServerConfig) {
		c.Interest = &replication.Interest{Radius: 1e6, Every: 1,
			Focus:  func(replication.ClientID) (components.Vec3, bool) { return components.Vec3{}, true },
			Filter: func(c replication.ClientID, e ecs.Entity) bool { return hidden[e] != c }}
	}
}

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
	h := harness.NewOn(t, sim.NewNetwork(7, harness.Epoch), lossyLink, nil, hideFrom(hidden))
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

// Unreliable messages over a lossy link that duplicates and reorders
// datagrams arrive at most once and never older than the newest applied,
// both ways, each stamped with its tick; most of them arrive.
func TestMessagesUnreliable(t *testing.T) {
	h := harness.NewOn(t, sim.NewNetwork(11, harness.Epoch), lossyLink, nil, nil)
	for range 3 {
		h.AddClient()
	}
	stepUntil(t, h, "every client ready", func() bool {
		for _, cs := range h.Clients {
			if !cs.Client.Ready() {
				return false
			}
		}
		return true
	})
	hits, err := replication.ServerMessages[harness.Hit](h.Server)
	require.NoError(t, err)
	uses, err := replication.ServerMessages[harness.Use](h.Server)
	require.NoError(t, err)
	fromClient := map[replication.ClientID][]uint32{}
	uses.Handle(func(m replication.Message[harness.Use]) { fromClient[m.From] = append(fromClient[m.From], m.Value.Seq) })
	toClient := make([][]uint32, 3)
	stamps := make([]int, 3)
	for ci, cs := range h.Clients {
		ep, err := replication.ClientMessages[harness.Hit](cs.Client)
		require.NoError(t, err)
		ep.Handle(func(m replication.Message[harness.Hit]) {
			toClient[ci] = append(toClient[ci], m.Value.Seq)
			if m.Tick == m.Value.Seq {
				stamps[ci]++
			}
		})
	}
	const n = 200
	for range n {
		seq := h.Server.Tick() + 1 // (the tick the next Send builds)
		require.NoError(t, hits.Broadcast(harness.Hit{Seq: seq}, replication.Unreliable))
		for _, cs := range h.Clients {
			ep, _ := replication.ClientMessages[harness.Use](cs.Client)
			require.NoError(t, ep.Send(harness.Use{Seq: seq}, replication.Unreliable))
		}
		h.Step()
	}
	increasing := func(seqs []uint32) bool {
		for i := 1; i < len(seqs); i++ {
			if seqs[i] <= seqs[i-1] {
				return false
			}
		}
		return true
	}
	for ci, cs := range h.Clients {
		got := toClient[ci]
		t.Logf("client %d: %d of %d server messages, %d of its own at the server", ci+1, len(got), n, len(fromClient[cs.Client.ID()]))
		require.True(t, increasing(got), "client %d: never twice, never older: %v", ci+1, got)
		require.Greater(t, len(got), n*8/10)
		require.Equal(t, len(got), stamps[ci], "stamped with the snapshot's tick")
		up := fromClient[cs.Client.ID()]
		require.True(t, increasing(up), "client %d's messages at the server: %v", ci+1, up)
		require.Greater(t, len(up), n*8/10)
	}
	require.Positive(t, h.Server.Stats.MessagesStale+h.Clients[0].Client.Stats.MessagesStale+h.Clients[1].Client.Stats.MessagesStale+h.Clients[2].Client.Stats.MessagesStale+h.Clients[0].Client.Stats.DatagramsDropped,
		"the link duplicated or reordered some")
}

// A small unreliable message (8 bytes of payload) costs at most 3 bytes
// more in the tick's datagram.
func TestUnreliableMessageOverhead(t *testing.T) {
	h := harness.New(t, 1, sim.Link{}, nil)
	h.Spawn(0, components.Vec3{})
	h.Run(10)
	notes, err := replication.ServerMessages[harness.Note](h.Server)
	require.NoError(t, err)
	cs := h.Clients[0]
	got := 0
	ep, err := replication.ClientMessages[harness.Note](cs.Client)
	require.NoError(t, err)
	ep.Handle(func(m replication.Message[harness.Note]) {
		require.Equal(t, [8]uint8{1, 2, 3, 4, 5, 6, 7, 8}, m.Value.Text)
		got++
	})
	bytesIn := func() uint64 { return cs.Client.Stats.DatagramBytesIn }
	b0 := bytesIn()
	h.Step()
	quiet := bytesIn() - b0
	require.NoError(t, notes.Send(cs.Client.ID(), harness.Note{Text: [8]uint8{1, 2, 3, 4, 5, 6, 7, 8}}, replication.Unreliable))
	b0 = bytesIn()
	h.Step()
	with := bytesIn() - b0
	require.Equal(t, 1, got)
	t.Logf("tick's datagram: %d bytes; with an 8-byte message: %d", quiet, with)
	require.LessOrEqual(t, with-quiet-8, uint64(3))
}
