package sockets_test

import (
	"errors"
	"testing"
	"time"

	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/tests/internal/harness"
	"github.com/archenet/archenet/tests/internal/loopback"
	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/netem"
	"github.com/archenet/archenet/transport/quic"
	"github.com/archenet/archenet/transport/webtransport"
	"github.com/stretchr/testify/require"
)

// Many clients vanish without a close (their path goes dead), and one more
// client's link goes silent for 10 s while two others play: the server keeps
// its rate throughout, the players see no extra lag, and the silent client
// catches up once its link is back.
func TestQUICDeadAndSilentPeers(t *testing.T) {
	// Timeouts beyond the 16 s this test runs: the silent link must come
	// back to a client and a server that kept waiting (liveness tests cover
	// dropping dead peers).
	// 33 clients from one address join at once.
	r := loopback.NewQUIC(t, quic.Config{MaxPendingPerAddress: -1}, func(c *replication.ServerConfig) { c.Limits.ClientTimeout = 20 * time.Second })
	r.ClientTimeout = 20 * time.Second
	ents := r.Movers(200, 3)
	for range 2 {
		r.Good = append(r.Good, r.Dial(r.QUIC.Addr().String(), ""))
	}
	doomed, err := netem.Listen(r.QUIC.Addr().String(), 1)
	require.NoError(t, err)
	defer doomed.Close()
	silent, err := netem.Listen(r.QUIC.Addr().String(), 2)
	require.NoError(t, err)
	defer silent.Close()
	// Ordinary internet paths (50 ms RTT, 2% loss) before they go dead.
	impaired := netem.Conditions{Latency: 25 * time.Millisecond, Loss: 0.02}
	doomed.SetConditions(impaired, impaired)
	silent.SetConditions(impaired, impaired)
	var dead []int
	for range 30 {
		dead = append(dead, r.Dial(doomed.Addr().String(), ""))
	}
	mute := r.Dial(silent.Addr().String(), "")
	r.Until("clients ready", 20*time.Second, func() bool {
		for _, c := range r.Clients {
			if !c.Client.Ready() {
				return false
			}
		}
		return true
	})
	r.Game = func(int) {
		for _, e := range ents {
			r.Pos(e).X += 0.1
		}
	}
	r.RunFor(time.Second, nil)

	from := len(r.Ticks)
	doomed.SetDown(true) // for good: no close frame will ever arrive
	for _, i := range dead {
		r.Active[i] = false
	}
	silent.SetDown(true)
	cut := time.Now()
	r.RunFor(10*time.Second, nil)
	silent.SetDown(false)
	r.Until("the silent client catches up", 10*time.Second, func() bool {
		lag, ok := r.ProbeLag(mute)
		return ok && lag <= loopback.MaxLag
	})
	// The dead peers stay dead longer: QUIC's congestion window toward them
	// fills only after several seconds at the budget's floor rate.
	r.RunFor(16*time.Second-time.Since(cut), nil)
	r.RequireTicks(from, "30 dead peers and a 10 s silent link")
	require.Len(t, r.Server.Clients(), 33, "nobody timed out yet (idle timeout 30 s)")
	r.RequireKeptUp()
	var sendDropped uint64
	for _, id := range r.Server.Clients() {
		info, _ := r.Server.Client(id)
		sendDropped += info.Transport.DatagramsSendDropped
	}
	t.Logf("good clients' worst probe lag %d and %d ticks; %d datagrams to dead or silent peers dropped in send queues",
		r.LagMax[0], r.LagMax[1], sendDropped)
	r.Game = nil
	r.Until("convergence", 10*time.Second, func() bool {
		return r.Converged(0, nil) == nil && r.Converged(1, nil) == nil && r.Converged(mute, nil) == nil
	})
}

// Ten browser sessions whose path goes dead without a close (a tab killed, a
// laptop lid shut) while two others play: the server keeps its rate, the players
// see no extra lag, and the dead sessions are dropped by ClientTimeout (3 s), each
// with CodeTimeout. TestQUICDeadAndSilentPeers' counterpart.
func TestWebTransportDeadPeers(t *testing.T) {
	const timeout = 3 * time.Second
	w := loopback.NewWebTransport(t, webtransport.Config{}, func(c *replication.ServerConfig) { c.Limits.ClientTimeout = timeout })
	ents := w.Movers(200, 3)
	for range 2 {
		w.Good = append(w.Good, w.Dial())
	}
	path, err := netem.Listen(w.WT.Addr().String(), 1)
	require.NoError(t, err)
	defer path.Close()
	impaired := netem.Conditions{Latency: 25 * time.Millisecond, Loss: 0.02}
	path.SetConditions(impaired, impaired)
	url := "https://" + path.Addr().String() + webtransport.DefaultPath
	var dead []int
	for range 10 {
		dead = append(dead, w.DialVia(url))
	}
	w.Until("clients ready", 20*time.Second, func() bool {
		for _, c := range w.Clients {
			if !c.Client.Ready() {
				return false
			}
		}
		return true
	})
	w.Game = func(int) {
		for _, e := range ents {
			w.Pos(e).X += 0.1
		}
	}
	w.RunFor(time.Second, nil)

	from := len(w.Ticks)
	// (From the dead sessions' last datagram: on a busy machine the loop
	// may stall between their last step and the cut.)
	cut := w.Stepped
	path.SetDown(true) // for good: no close will ever arrive
	for _, i := range dead {
		w.Active[i] = false
	}
	var gone time.Duration
	timeouts := func() int {
		n := 0
		for _, err := range w.Events() {
			var ce *transport.CloseError
			if errors.As(err, &ce) && ce.Code == transport.CodeTimeout {
				n++
			}
		}
		return n
	}
	w.Until("the dead sessions dropped", timeout+5*time.Second, func() bool {
		if timeouts() == len(dead) {
			gone = time.Since(cut)
			return true
		}
		return false
	})
	w.RunFor(time.Second, nil)
	w.RequireTicks(from, "10 dead browser sessions")
	t.Logf("10 dead sessions dropped %v after their last datagram (ClientTimeout %v); disconnects %v; good clients' worst probe lag %d and %d ticks",
		gone.Round(time.Millisecond), timeout, len(w.Events()), w.LagMax[0], w.LagMax[1])
	require.Greater(t, gone, timeout-harness.TickDt, "not before ClientTimeout")
	require.Len(t, w.Server.Clients(), 2)
	w.RequireKeptUp()
	w.Game = nil
	w.Until("convergence", 10*time.Second, func() bool { return w.Converged(0, nil) == nil && w.Converged(1, nil) == nil })
}
