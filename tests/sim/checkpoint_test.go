package sim_test

import (
	"encoding/binary"
	"math"
	"testing"
	"time"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/replication/replicationtest"
	"github.com/archenet/archenet/tests/internal/harness"
	"github.com/archenet/archenet/transport/sim"
	"github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/require"
)

// circling is the game's server-only state of a moving entity: the phase
// of its circle, carried across a checkpoint as the game's own state.
type circling struct {
	e     ecs.Entity
	phase float64
}

func moveCircling(w *ecs.World, cs []circling) {
	id := ecs.ComponentID[components.Transform](w)
	for i := range cs {
		cs[i].phase += 0.05
		tr := (*components.Transform)(w.Get(cs[i].e, id))
		tr.Pos.X = 10*math.Cos(cs[i].phase) + float64(i%20)
		tr.Pos.Z = 10*math.Sin(cs[i].phase) + float64(i/20)
	}
}

// A match of 8 clients × 500 moving entities (one owned by each client) is
// checkpointed on server A and restored on server B, in a new world, with
// the game's own state (each entity's phase, keyed by NetID). A drains to
// B's address; every client follows the notice, resumes its seat in B
// within 2 s (the same ClientID, its own entity under the same NetID), and
// converges to B's world while it moves on.
func TestCheckpointRestore(t *testing.T) {
	lat := sim.Conditions{Latency: 20 * time.Millisecond}
	link := sim.Link{Up: lat, Down: lat}
	h := harness.NewOn(t, sim.NewNetwork(13, harness.Epoch), link, nil, nil)
	for range 8 {
		h.AddClient()
	}
	var movers []circling
	for i := range 500 {
		owner := uint8(0)
		if i < 8 {
			owner = uint8(i + 1)
		}
		movers = append(movers, circling{e: h.Spawn(owner, components.Vec3{}), phase: float64(i)})
	}
	h.Game = func(int) { moveCircling(h.World, movers) }
	h.Run(60)
	for _, cs := range h.Clients {
		require.Equal(t, replication.StateReady, cs.Client.State())
	}

	// The game's own state: each mover's phase by NetID.
	var game []byte
	for _, m := range movers {
		id, _ := h.Server.NetID(m.e)
		game = binary.LittleEndian.AppendUint32(game, id.Handle)
		game = binary.LittleEndian.AppendUint32(game, id.Gen)
		game = binary.LittleEndian.AppendUint64(game, math.Float64bits(m.phase))
	}
	t0 := time.Now()
	cp, err := h.Server.Checkpoint(nil, game)
	took := time.Since(t0)
	require.NoError(t, err)
	t.Logf("checkpoint of 500 entities and 8 seats: %d bytes in %v", len(cp), took)

	bw := ecs.NewWorld()
	b, gameB, err := replication.Restore(&bw, h.Net.Listen("server-b"), replication.ServerConfig{Registry: h.Registry, NetRate: harness.NetRate, Now: h.Net.Now, Logger: harness.Quiet}, cp)
	require.NoError(t, err)
	require.Len(t, b.Suspended(), 8, "every seat waits for its client")
	var moversB []circling
	for len(gameB) > 0 {
		id := components.NetID{Handle: binary.LittleEndian.Uint32(gameB), Gen: binary.LittleEndian.Uint32(gameB[4:])}
		e, ok := b.Resolve(id)
		require.True(t, ok, "entity %v restored under its NetID", id)
		moversB = append(moversB, circling{e: e, phase: math.Float64frombits(binary.LittleEndian.Uint64(gameB[8:]))})
		gameB = gameB[16:]
	}
	require.Len(t, moversB, 500)
	owned := map[uint8]components.NetID{}
	for _, cs := range h.Clients {
		id, _ := h.Server.NetID(movers[cs.Client.ID()-1].e)
		owned[cs.Client.ID()] = id
	}

	h.Server.DrainTo("server-b", "moving to another server", time.Time{})
	h.Game = nil
	hist := replicationtest.NewHistory(h.Registry, 64)
	resumed := map[int]int{}
	for tick := 1; tick <= 90; tick++ {
		h.Server.Receive()
		h.Server.Send()
		b.Receive()
		moveCircling(&bw, moversB)
		b.Send()
		require.NoError(t, hist.Record(&bw, b.NetID, b.Tick()))
		h.Net.Advance(harness.TickDt)
		for ci, cs := range h.Clients {
			cs.Client.Receive()
			if d, ok := cs.Client.Draining(); ok && d.Address != "" && cs.Client.Stats.Resumes == 0 {
				conn, err := h.Net.DialFrom(d.Address, "client-"+string(rune('a'+ci)), link)
				require.NoError(t, err)
				cs.Conn = conn
				require.NoError(t, cs.Client.Resume(conn))
			}
			if _, ok := resumed[ci]; !ok && cs.Client.State() == replication.StateReady && cs.Client.Stats.Resumes == 1 {
				resumed[ci] = tick
			}
			cs.Client.Send()
		}
	}
	require.Len(t, resumed, 8, "every client resumed in B")
	worst := 0
	for _, tick := range resumed {
		worst = max(worst, tick)
	}
	t.Logf("every client resumed in B within %d ticks (%v) of the drain notice", worst, time.Duration(worst)*harness.TickDt)
	require.LessOrEqual(t, time.Duration(worst)*harness.TickDt, 2*time.Second)
	require.Equal(t, 8, b.Stats.Resumed)
	require.Empty(t, h.Server.Clients(), "A let its seats go")
	require.Empty(t, h.Server.Suspended())
	for _, cs := range h.Clients {
		id := cs.Client.ID()
		_, ok := cs.Client.Entity(owned[id])
		require.True(t, ok, "client %d mirrors its own entity under the same NetID", id)
		_, err := hist.Check(replicationtest.LiveCheck{Client: cs.World, Me: id, StateTick: cs.Client.StateTick})
		require.NoError(t, err)
		require.Equal(t, 500, cs.Client.Mirrors())
	}
	// Still: every client holds B's world exactly.
	for range 5 {
		b.Receive()
		b.Send()
		h.Net.Advance(harness.TickDt)
		for _, cs := range h.Clients {
			cs.Client.Receive()
			cs.Client.Send()
		}
	}
	for _, cs := range h.Clients {
		require.NoError(t, replicationtest.Converged(replicationtest.Check{Registry: h.Registry, Server: &bw, NetID: b.NetID, Client: cs.World, Me: cs.Client.ID()}))
	}
}
