package sim_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/tests/internal/harness"
	"github.com/archenet/archenet/transport/sim"
	"github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/require"
)

// spawnTracker checks, per client, that every mirror appears once and never
// comes back after it was removed (spawns and despawns applied exactly once).
type spawnTracker struct {
	state map[components.NetID]uint8 // 1 = present, 2 = gone
}

func (s *spawnTracker) scan(t *testing.T, cs *harness.ClientSide, label string) {
	t.Helper()
	present := map[components.NetID]bool{}
	q := cs.World.Query(ecs.All(ecs.ComponentID[components.NetID](cs.World)))
	for q.Next() {
		id := *(*components.NetID)(q.Get(ecs.ComponentID[components.NetID](cs.World)))
		require.False(t, present[id], "%s: two mirrors of %v", label, id)
		present[id] = true
		require.NotEqual(t, uint8(2), s.state[id], "%s: %v came back after its despawn", label, id)
		s.state[id] = 1
	}
	for id, st := range s.state {
		if st == 1 && !present[id] {
			s.state[id] = 2
		}
	}
}

// TestFaultMatrix: loss {0, 5, 20%} × RTT {0, 100, 250 ms} × jitter {0, 30 ms}
// × duplication+reordering {off, on}; 16 clients; spawns, despawns and
// movement throughout. Every spawn and despawn is applied exactly once, every
// client converges after the faults stop, and memory stays bounded.
func TestFaultMatrix(t *testing.T) {
	for _, loss := range []float64{0, 0.05, 0.2} {
		for _, rtt := range []time.Duration{0, 100 * time.Millisecond, 250 * time.Millisecond} {
			for _, jitter := range []time.Duration{0, 30 * time.Millisecond} {
				for _, dupReorder := range []bool{false, true} {
					name := fmt.Sprintf("loss%.0f_rtt%d_jitter%d_dup%v", loss*100, rtt.Milliseconds(), jitter.Milliseconds(), dupReorder)
					t.Run(name, func(t *testing.T) {
						runFaultCase(t, loss, rtt, jitter, dupReorder)
					})
				}
			}
		}
	}
}

func runFaultCase(t *testing.T, loss float64, rtt, jitter time.Duration, dupReorder bool) {
	cond := sim.Conditions{Latency: rtt / 2, Jitter: jitter, Loss: loss}
	if dupReorder {
		cond.Duplicate, cond.Reorder = 0.05, 0.05
	}
	h := harness.New(t, 16, sim.Link{Up: cond, Down: cond}, nil)
	rng := rand.New(rand.NewPCG(uint64(rtt), uint64(loss*1000)))
	ents := make([]ecs.Entity, 60)
	for i := range ents {
		ents[i] = h.Spawn(0, components.Vec3{X: rng.Float64() * 100, Z: rng.Float64() * 100})
	}
	active := true
	h.Game = func(tick int) {
		if !active {
			return
		}
		for _, e := range ents {
			if rng.IntN(4) == 0 {
				h.Pos(e).X += rng.Float64() - 0.5
			}
		}
		// Short-lived entities: one despawn and one spawn every tick.
		i := rng.IntN(len(ents))
		h.World.RemoveEntity(ents[i])
		ents[i] = h.Spawn(0, components.Vec3{X: rng.Float64() * 100})
	}
	trackers := make([]spawnTracker, len(h.Clients))
	for i := range trackers {
		trackers[i].state = map[components.NetID]uint8{}
	}
	for tick := 0; tick < 150; tick++ {
		h.Step()
		for ci, cs := range h.Clients {
			trackers[ci].scan(t, cs, fmt.Sprintf("client %d tick %d", ci, h.Tick))
		}
	}
	// Faults stop, then the game settles.
	clean := sim.Conditions{Latency: rtt / 2}
	for _, cs := range h.Clients {
		cs.Conn.SetConditions(clean, clean)
	}
	active = false
	// Reliable messages lost near the end still wait for their
	// retransmission timeouts (max(2×RTT, 20 ms) each in the simulator), so
	// settling is bounded by a few RTOs, not one RTT.
	settled := 0
	for ; settled < 200; settled++ {
		h.Step()
		ok := true
		for ci := range h.Clients {
			if h.Converged(ci, nil) != nil {
				ok = false
				break
			}
		}
		if ok {
			break
		}
	}
	t.Logf("converged %d ticks after the faults stopped", settled+1)
	for ci, cs := range h.Clients {
		trackers[ci].scan(t, cs, fmt.Sprintf("client %d settled", ci))
		require.NoError(t, h.Converged(ci, nil))
		st := cs.Client.Stats
		require.Equal(t, st.Spawns-st.Despawns, uint64(cs.Client.Mirrors()), "client %d: spawns − despawns = mirrors", ci)
		require.GreaterOrEqual(t, st.Spawns, uint64(len(ents)))
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	require.Less(t, ms.HeapInuse, uint64(512<<20), "heap in use")
}
