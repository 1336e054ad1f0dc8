package sim_test

import (
	"testing"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/interp"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/tests/internal/harness"
	"github.com/archenet/archenet/transport/sim"
	"github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/require"
)

// An entity that does not change after its spawn is not sent again in the
// snapshots: its spawn carried its state. A late joiner with interpolation
// sees such entities where they are (their spawn state is their first
// sample, not the origin). When one changes, a full record brings the new
// state and its Visual moves only then: it held its old place up to the
// view before the change, instead of sliding from the spawn's tick.
func TestSpawnHeldEntities(t *testing.T) {
	link := sim.Link{Up: sim.Conditions{Latency: 20e6}, Down: sim.Conditions{Latency: 20e6}}
	h := harness.New(t, 1, link, nil)
	var tiles []ecs.Entity
	for i := range 64 {
		tiles = append(tiles, h.Spawn(0, components.Vec3{X: float64(i), Z: 3}))
	}
	mover := h.Spawn(0, components.Vec3{})
	h.Game = func(int) { h.Pos(mover).X += 0.1 }
	h.Run(30)

	// A late joiner with interpolation.
	h.ClientConfig = func(c *replication.ClientConfig) { c.Interpolation = true }
	late := h.AddClient()
	h.Run(60)
	st := late.Client.Stats
	require.EqualValues(t, 65, st.Spawns, "64 tiles and the mover")
	t.Logf("late joiner: %d records in %d datagrams (the mover's), spawns %d B", st.Records, st.Datagrams, st.MessageBytesIn)
	require.Less(t, st.Records, uint64(60+5), "the tiles were not sent again: about one record a tick, the mover's")

	w := late.World
	sys := interp.NewSystem(late.Client.InterpClock(), 0)
	sys.Initialize(w)
	vid := ecs.ComponentID[components.Visual](w)
	visual := func(e ecs.Entity) components.Vec3 {
		id, ok := h.Server.NetID(e)
		require.True(t, ok)
		m, ok := late.Client.Entity(id)
		require.True(t, ok)
		return (*components.Visual)(w.Get(m, vid)).Pos
	}
	update := func() {
		late.Client.InterpClock().Advance(h.Net.Now())
		sys.Update(w)
	}
	update()
	for i, e := range tiles {
		require.Equal(t, components.Vec3{X: float64(i), Z: 3}, visual(e), "tile %d where it is", i)
	}

	// Tile 7 jumps 10 m after a long rest: its Visual stays where it was
	// until the render clock reaches the tick before the change, and moves
	// within that last tick — not from the spawn's tick on (which would put
	// it 95% of the way there as soon as the change arrives).
	h.Pos(tiles[7]).Z = 13
	h.Step()
	tc := h.Server.Tick() // the change's tick
	update()
	moved := false
	for range 20 {
		rt := late.Client.InterpClock().RenderTick()
		z := visual(tiles[7]).Z
		if rt < float64(tc)-1 {
			require.Equal(t, 3.0, z, "tile 7 at render tick %.2f (the change is at %d)", rt, tc)
		} else {
			moved = moved || z > 3
		}
		h.Step()
		update()
	}
	require.True(t, moved)
	require.Equal(t, 13.0, visual(tiles[7]).Z)
	h.Game = nil
	h.Run(5)
	h.RequireConverged(nil)
}

// stallRig is a client of a server that keeps it however long it stalls,
// over 30 ms links, and 300 entities in a grid.
func stallRig(t *testing.T, seed int64) (*harness.Harness, *harness.ClientSide, []ecs.Entity) {
	lat := sim.Conditions{Latency: 30e6}
	h := harness.NewOn(t, sim.NewNetwork(seed, harness.Epoch), sim.Link{Up: lat, Down: lat}, nil, func(c *replication.ServerConfig) {
		c.Limits.ClientTimeout = -1 // (the stall is longer than the timeout: the client is kept)
	})
	cs := h.AddClient()
	var ents []ecs.Entity
	for i := range 300 {
		ents = append(ents, h.Spawn(0, components.Vec3{X: float64(i % 20), Z: float64(i / 20)}))
	}
	return h, cs, ents
}

// After a stall, the full records of what changed meanwhile are sent once
// and held while in flight: over a lossy link the lost ones are sent again
// once their loss is known, and every client converges; over a clean link
// each goes once.
func TestStallRecoveryHeldInFlight(t *testing.T) {
	for _, loss := range []float64{0, 0.3} {
		h, cs, tiles := stallRig(t, int64(15+loss*10))
		lat := sim.Conditions{Latency: 30e6}
		h.Run(60)
		cs.Conn.SetLinkDown(true)
		for i := range 120 { // 4 s: beyond the ring
			if i%2 == 0 {
				h.Pos(tiles[i]).Y += 1
			}
			h.Step()
		}
		down := sim.Conditions{Latency: 30e6, Loss: loss}
		require.NoError(t, cs.Conn.SetConditions(lat, down))
		cs.Conn.SetLinkDown(false)
		before := cs.Client.Stats.Records
		h.Run(90)
		require.NoError(t, cs.Conn.SetConditions(lat, lat))
		h.Run(20)
		h.RequireConverged(nil)
		records := cs.Client.Stats.Records - before
		t.Logf("loss %.0f%%: %d records for the 60 tiles that changed", loss*100, records)
		if loss == 0 {
			require.LessOrEqual(t, records, uint64(60+5), "each changed tile once")
		}
	}
}

// A recovery (after a stall beyond the ring) whose entities keep moving:
// each goes in a full record once, held while its tick is in flight rather
// than sent in full again in every tick of the round trip, and is coded
// against the recovery's view after its ack. The client shows a mover at
// most a round trip behind meanwhile (here 60 ms, two ticks), every mover
// current after that; over a lossy link the lost ones are sent again and
// every client converges.
func TestRecoveryHeldWhileMoving(t *testing.T) {
	for _, loss := range []float64{0, 0.3} {
		h, cs, ents := stallRig(t, int64(21+loss*10))
		lat := sim.Conditions{Latency: 30e6}
		movers := ents[:40]
		h.Game = func(int) {
			for _, e := range movers {
				h.Pos(e).X += 0.25
			}
		}
		h.Run(60)
		cs.Conn.SetLinkDown(true)
		h.Run(120) // 4 s: beyond the ring
		require.NoError(t, cs.Conn.SetConditions(lat, sim.Conditions{Latency: 30e6, Loss: loss}))
		cs.Conn.SetLinkDown(false)
		fulls := h.Server.Stats.Fulls
		var worst uint32
		for range 60 {
			h.Step()
			if cs.Client.Stats.Records == 0 {
				continue
			}
			for _, e := range movers {
				id, _ := h.Server.NetID(e)
				if st, ok := cs.Client.StateTick(id); ok && h.Server.Tick()-st < 100 {
					worst = max(worst, h.Server.Tick()-st)
				}
			}
		}
		sent := h.Server.Stats.Fulls - fulls
		t.Logf("loss %.0f%%: %d full records for the 40 movers; a mover at most %d ticks behind once recovered", loss*100, sent, worst)
		if loss == 0 {
			require.EqualValues(t, len(movers), sent, "each mover in full once")
			require.LessOrEqual(t, worst, uint32(2), "a round trip behind at most")
		}
		h.Game = nil
		require.NoError(t, cs.Conn.SetConditions(lat, lat))
		h.Run(20)
		h.RequireConverged(nil)
	}
}
