package sockets_test

import (
	"math"
	"testing"
	"time"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/tests/internal/loopback"
	"github.com/archenet/archenet/transport/netem"
	"github.com/archenet/archenet/transport/quic"
	"github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/require"
)

// budgets returns every connected client's current budget.
func budgets(r *loopback.Rig) map[replication.ClientID]int {
	out := map[replication.ClientID]int{}
	for _, id := range r.Server.Clients() {
		if ci, ok := r.Server.Client(id); ok {
			out[id] = ci.BytesPerSecond
		}
	}
	return out
}

// A jittery, lossy path is the link's nature, not congestion: over real QUIC
// through an impairment proxy (50 ms ± 20 ms each way, reordering, 1% loss),
// every client's budget stays well above what its scene needs, and the
// clients stay current. Then one client's path goes down for 5 s: when it
// comes back, its snapshots are current and its budget is back within 2 s.
func TestQUICBudgetOnJitteryLinkAndAfterOutage(t *testing.T) {
	r := loopback.NewQUIC(t, quic.Config{}, nil)
	ents := r.Movers(300, 11)
	r.Game = func(int) {
		for i, e := range ents {
			p := r.Pos(e)
			p.X += 0.05 * math.Sin(float64(r.Tick+i)/10)
			p.Z += 0.05 * math.Cos(float64(r.Tick+i)/10)
		}
	}
	path := netem.Conditions{Latency: 50 * time.Millisecond, Jitter: 20 * time.Millisecond, JitterReorders: true, Loss: 0.01}
	var proxies []*netem.Proxy
	for i := range 3 {
		p, err := netem.Listen(r.QUIC.Addr().String(), uint64(i+1))
		require.NoError(t, err)
		defer p.Close()
		p.SetConditions(path, path)
		proxies = append(proxies, p)
		r.Good = append(r.Good, r.Dial(p.Addr().String(), ""))
	}
	r.Until("clients ready", 20*time.Second, func() bool {
		for _, c := range r.Clients {
			if !c.Client.Ready() {
				return false
			}
		}
		return true
	})
	r.RunFor(2*time.Second, nil) // slow start
	lowest := map[replication.ClientID]int{}
	bytes0 := map[replication.ClientID]uint64{}
	for id, b := range budgets(r) {
		lowest[id] = b
		ci, _ := r.Server.Client(id)
		bytes0[id] = ci.SnapshotBytes
	}
	for i := range r.Good {
		r.LagMax[i] = 0
	}
	start := time.Now()
	r.RunFor(10*time.Second, func() bool {
		for id, b := range budgets(r) {
			lowest[id] = min(lowest[id], b)
		}
		return false
	})
	secs := time.Since(start).Seconds()
	for id, low := range lowest {
		ci, _ := r.Server.Client(id)
		used := float64(ci.SnapshotBytes-bytes0[id]) / secs
		t.Logf("client %d: budget never below %d B/s over 10 s (the scene used %.0f B/s; RTT %v, loss %.3f)", id, low, used, ci.RTT, ci.Loss)
		require.Greater(t, float64(low), 2*used, "client %d: the budget must leave the scene room", id)
		require.Greater(t, low, 4*replication.DefaultMinBytesPerSecond, "client %d: no collapse toward the floor", id)
	}
	for _, i := range r.Good {
		require.LessOrEqual(t, r.LagMax[i], loopback.MaxLag, "client %d fell behind", i)
	}

	// A 5 s outage of the first client's path.
	victim := r.Clients[0].Client.ID()
	before := budgets(r)[victim]
	proxies[0].SetDown(true)
	r.RunFor(5*time.Second, nil)
	during := budgets(r)[victim]
	proxies[0].SetDown(false)
	back := time.Now()
	var current, recovered time.Duration
	r.RunFor(4*time.Second, func() bool {
		if lag, ok := r.ProbeLag(0); current == 0 && ok && lag <= 10 {
			current = time.Since(back)
		}
		if recovered == 0 && budgets(r)[victim] >= before*9/10 {
			recovered = time.Since(back)
		}
		return current != 0 && recovered != 0
	})
	t.Logf("5 s outage: budget %d B/s before, %d during; snapshots current %v and budget back %v after the path returned",
		before, during, current.Round(time.Millisecond), recovered.Round(time.Millisecond))
	require.NotZero(t, current, "snapshots never current again")
	require.NotZero(t, recovered, "budget never back")
	require.Less(t, current, 2*time.Second)
	require.Less(t, recovered, 2*time.Second)

	// Motion stops: every client converges, through the impaired paths.
	r.Game = nil
	r.Until("convergence", 10*time.Second, func() bool {
		for i := range r.Clients {
			if r.Converged(i, nil) != nil {
				return false
			}
		}
		return true
	})
	_ = ecs.Entity{}
	_ = components.Vec3{}
}
