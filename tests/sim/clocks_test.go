package sim_test

import (
	"math"
	"testing"
	"time"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/input"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/tests/internal/harness"
	"github.com/archenet/archenet/transport/sim"
	"github.com/stretchr/testify/require"
)

// TestClocksShareOneServerTime: a client's render clock and an input clock
// built on the client's estimator (input.SyncConfig.Arrivals) agree about
// the server's time at every moment — the input clock is half a round trip
// ahead, in simulation ticks (NetDivisor 2) — over a jittery, lossy,
// reordering link; and the estimate tracks the server's actual tick.
func TestClocksShareOneServerTime(t *testing.T) {
	cond := sim.Conditions{Latency: 40 * time.Millisecond, Jitter: 15 * time.Millisecond, Loss: 0.05, Reorder: 0.05}
	h := harness.New(t, 0, sim.Link{Up: cond, Down: cond}, func(c *replication.ServerConfig) { c.NetDivisor = 2 })
	h.ClientConfig = func(c *replication.ClientConfig) { c.Interpolation = true }
	cs := h.AddClient()
	simTick := harness.TickDt / 2
	sync, err := input.NewTickSync(input.SyncConfig{TickInterval: simTick, Arrivals: cs.Client.Arrivals()})
	require.NoError(t, err)
	e := h.Spawn(0, components.Vec3{})
	worst := 0.0
	for i := range 300 {
		h.Pos(e).X += 0.1
		h.Step()
		now := h.Net.Now()
		clk := cs.Client.InterpClock()
		if clk == nil {
			continue
		}
		clk.Advance(now)
		sync.ObserveRTT(80 * time.Millisecond)
		sync.Advance(now)
		net, sim := clk.ServerTick(now), sync.ServerTick(now)
		require.InDelta(t, 2*net, sim-sync.RTT().Seconds()/2/simTick.Seconds(), 1e-4, "step %d (RTT() rounds to the ns)", i)
		if i > 100 {
			// The server built tick h.tick at now − tickDt; a snapshot
			// takes 40–55 ms to arrive and is read at the client's next
			// step: tick h.tick − 1 is the one read at now.
			worst = max(worst, math.Abs(net-float64(h.Tick-1)))
		}
	}
	t.Logf("render clock vs server schedule: worst %.2f net ticks", worst)
	require.Less(t, worst, 0.6)
}
