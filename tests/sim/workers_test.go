package sim_test

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/tests/internal/harness"
	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/sim"
	"github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/require"
)

// wireRun is what one run of workersScenario put on the wire.
type wireRun struct {
	digest            [sha256.Size]byte
	datagrams, msgs   int
	datagramBytes     int
	deferred, changes uint64
	// shared of the builds copied another client's datagrams, cands took
	// its records (not compared: see TestSharedBuildsSendIdenticalBytes)
	shared, cands, builds uint64
}

// workersScenario runs a busy game with the server building its clients'
// ticks on the given number of workers and hashes every packet each client
// was sent, in simulation order: 12 clients, each owning an avatar that
// wanders an interest-managed world of 300 entities (a fifth moving each
// tick, one replaced every tick), over lossy, jittery, reordering links, half
// of them capped so that the budget defers records.
//
// With big, the world has 1500 entities (enough for the workers to build
// the frame together), some sent every third tick and some dormant, and
// one is replaced only every fourth tick (the ticks between keep last
// frame's entities).
func workersScenario(t *testing.T, workers int, big bool) wireRun {
	return workersScenarioPre(t, workers, big, true)
}

func workersScenarioPre(t *testing.T, workers int, big, pre bool) wireRun {
	return workersScenarioCfg(t, workers, big, false, func(c *replication.ServerConfig) { c.NoPreencode = !pre })
}

// workersScenarioCfg is workersScenario with more configuration (after
// the scenario's own); with health, the avatars of odd clients have a
// Health, whose Ammo only its owner sees, changing every tick.
func workersScenarioCfg(t *testing.T, workers int, big, health bool, more func(*replication.ServerConfig)) wireRun {
	var run wireRun
	cond := sim.Conditions{Latency: 30 * time.Millisecond, Jitter: 20 * time.Millisecond, Loss: 0.05, Reorder: 0.05, Duplicate: 0.02}
	h := harness.New(t, 12, sim.Link{Up: cond, Down: cond}, func(c *replication.ServerConfig) {
		c.Workers = workers
		c.Interest = &replication.Interest{Radius: 60}
		c.ParallelFrame = 1000 // (the big world's frames are built on the workers)
		more(c)
	})
	for i, cs := range h.Clients {
		if i%2 == 1 {
			capped := cond
			capped.Bandwidth = 6000
			cs.Conn.SetConditions(cond, capped)
		}
	}
	var sum hash.Hash = sha256.New()
	var hdr [16]byte
	h.Net.SetTrace(func(ev sim.TraceEvent) {
		if ev.From != "server" {
			return
		}
		binary.LittleEndian.PutUint64(hdr[:], uint64(ev.At.UnixNano()))
		hdr[8], hdr[9] = byte(ev.Kind), 0
		if ev.Reliable {
			hdr[9] = 1
			run.msgs++
		} else {
			run.datagrams++
			run.datagramBytes += len(ev.Data)
		}
		sum.Write(hdr[:10])
		sum.Write([]byte(ev.To))
		if ev.Reliable && transport.TypeOf(ev.Data) == transport.MessageWelcome {
			sum.Write(ev.Data[:2]) // (the rest holds the seat's random secret)
			return
		}
		sum.Write(ev.Data)
	})
	rng := rand.New(rand.NewPCG(7, 11))
	avatars := make([]ecs.Entity, len(h.Clients))
	idHealth := ecs.ComponentID[harness.Health](h.World)
	for i := range avatars {
		var extra []ecs.ID
		if health && i%2 == 1 {
			extra = append(extra, idHealth)
		}
		avatars[i] = h.Spawn(uint8(i+1), components.Vec3{X: rng.Float64() * 300, Z: rng.Float64() * 300}, extra...)
	}
	n := 300
	if big {
		n = 1500
	}
	ents := make([]ecs.Entity, n)
	idRep := ecs.ComponentID[components.Replicated](h.World)
	for i := range ents {
		ents[i] = h.Spawn(0, components.Vec3{X: rng.Float64() * 300, Z: rng.Float64() * 300})
		if rep := (*components.Replicated)(h.World.Get(ents[i], idRep)); big && i%7 == 0 {
			rep.SendEvery = 3
		} else if big && i%11 == 0 {
			rep.Dormant = true
		}
	}
	tick := 0
	h.Game = func(int) {
		tick++
		for _, e := range avatars {
			p := h.Pos(e)
			p.X += rng.Float64()*8 - 4
			p.Z += rng.Float64()*8 - 4
			if h.World.Has(e, idHealth) {
				(*harness.Health)(h.World.Get(e, idHealth)).Ammo = uint16(tick % 500)
			}
		}
		for _, e := range ents {
			if rng.IntN(5) == 0 {
				p := h.Pos(e)
				p.X += rng.Float64() - 0.5
				p.Z += rng.Float64() - 0.5
			}
		}
		if big && tick%4 != 0 {
			return
		}
		i := rng.IntN(len(ents))
		h.World.RemoveEntity(ents[i])
		ents[i] = h.Spawn(0, components.Vec3{X: rng.Float64() * 300, Z: rng.Float64() * 300})
	}
	h.Run(150)
	h.Net.SetTrace(nil)
	copy(run.digest[:], sum.Sum(nil))
	st := h.Server.Stats
	run.deferred, run.changes = st.Deferred, st.Spawns+st.Despawns
	run.shared, run.cands, run.builds = st.SharedBuilds, st.SharedCandidates, st.Builds
	return run
}

// wire returns r without its build counts: what went on the wire.
func (r wireRun) wire() wireRun {
	r.shared, r.cands, r.builds = 0, 0, 0
	return r
}

// TestWorkersSendIdenticalBytes: the datagrams and messages every client is
// sent are byte for byte the same whether the server builds its clients'
// ticks on one worker or several.
func TestWorkersSendIdenticalBytes(t *testing.T) {
	one := workersScenario(t, 1, false)
	// The scenario exercises what the workers share: many datagrams and
	// spawn batches, and deferral under the budget.
	require.Greater(t, one.datagrams, 12*100)
	require.Greater(t, one.msgs, 12*10)
	require.NotZero(t, one.deferred, "no client was over its budget")
	require.NotZero(t, one.changes)
	for _, n := range []int{2, 5} {
		got := workersScenario(t, n, false)
		require.Equal(t, one.wire(), got.wire(), "%d workers", n)
	}
	// A world the workers build the frames of together.
	bigOne := workersScenario(t, 1, true)
	require.Equal(t, bigOne.wire(), workersScenario(t, 2, true).wire(), "2 workers, 1500 entities")
	// Pre-encoding changes no byte.
	require.Equal(t, one.wire(), workersScenarioPre(t, 2, false, false).wire(), "2 workers without pre-encoding")
	require.Equal(t, bigOne.wire(), workersScenarioPre(t, 2, true, false).wire(), "2 workers without pre-encoding, 1500 entities")
	t.Logf("%d datagrams (%d bytes), %d messages, %d deferred records, %d spawns+despawns", one.datagrams, one.datagramBytes, one.msgs, one.deferred, one.changes)
}

// TestSharedBuildsSendIdenticalBytes: with everything in every view, some
// clients' ticks copy another client's datagrams (with their own headers:
// few here, where loss, jitter and capped budgets make their views differ;
// most in the load test's `-moving 1 -interest 0`), and every client gets
// the bytes it gets with shared builds off.
func TestSharedBuildsSendIdenticalBytes(t *testing.T) {
	everything := func(off bool) func(*replication.ServerConfig) {
		return func(c *replication.ServerConfig) { c.Interest, c.NoSharedBuilds = nil, off }
	}
	for _, workers := range []int{1, 2} {
		on := workersScenarioCfg(t, workers, false, false, everything(false))
		off := workersScenarioCfg(t, workers, false, false, everything(true))
		t.Logf("%d workers: %d of %d builds shared, %d datagrams, %d deferred records", workers, on.shared, on.builds, on.datagrams, on.deferred)
		require.Zero(t, off.shared)
		require.Greater(t, on.shared, uint64(20), "builds shared")
		require.Equal(t, off.wire(), on.wire(), "%d workers", workers)
	}
	// Half the players own an avatar with a field only its owner sees:
	// their records of those avatars differ; their ticks take another
	// client's datagrams with the datagrams that carry those records
	// written anew (or, when those pack differently, its records), and the
	// bytes are the same.
	for _, workers := range []int{1, 2} {
		on := workersScenarioCfg(t, workers, false, true, everything(false))
		off := workersScenarioCfg(t, workers, false, true, everything(true))
		t.Logf("owner-only fields, %d workers: of %d builds, %d shared their datagrams, %d their records", workers, on.builds, on.shared, on.cands)
		require.Greater(t, on.shared+on.cands, uint64(20))
		require.Zero(t, off.shared+off.cands)
		require.Equal(t, off.wire(), on.wire(), "with owner-only fields")
	}
}
