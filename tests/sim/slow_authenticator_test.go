package sim_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/tests/internal/harness"
	"github.com/archenet/archenet/transport/sim"
	"github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/require"
)

// stepUntil steps h until cond holds; the Authenticator's verdicts come
// from goroutines, so a bounded number of ticks may pass first.
func stepUntil(t *testing.T, h *harness.Harness, what string, cond func() bool) {
	t.Helper()
	for start := h.Tick; !cond(); {
		require.Less(t, h.Tick-start, 3000, "waiting for %s", what)
		h.Step()
		runtime.Gosched()
	}
}

// An Authenticator that takes long never holds up the server's tick: the
// clients already playing keep converging while joins wait for it; "server
// full" is decided before any Authenticator call; a verdict that does not
// come within the handshake timeout rejects the client.
func TestSlowAuthenticatorDoesNotStallServer(t *testing.T) {
	release := make(chan struct{})
	var calls atomic.Int32
	auth := func(ctx context.Context, _ net.Addr, token []byte) error {
		calls.Add(1)
		switch string(token) {
		case "fast":
			return nil
		case "slow":
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		case "hang":
			<-ctx.Done()
			return ctx.Err()
		}
		return errors.New("bad token")
	}
	h := harness.New(t, 0, sim.Link{}, func(cfg *replication.ServerConfig) {
		cfg.Authenticator = auth
		cfg.Limits.MaxClients = 3
		// Verdicts come from goroutines in real time while the test steps
		// simulated time fast: a long timeout (in simulated time) keeps a
		// verdict that the loaded machine delivers a few hundred steps late
		// from reading as a timeout. The hanging one still reaches it.
		cfg.Limits.HandshakeTimeout = 30 * time.Second
	})
	join := func(token string) *harness.ClientSide {
		h.ClientConfig = func(cfg *replication.ClientConfig) {
			// The verdicts come from goroutines, in real time, while the
			// test steps simulated time: on a loaded machine many simulated
			// seconds may pass first. The client must not give up.
			cfg.Token, cfg.ConnectTimeout = []byte(token), -1
		}
		return h.AddClient()
	}
	a := join("fast")
	stepUntil(t, h, "the first client", func() bool { return a.Client.Ready() })
	rng := rand.New(rand.NewPCG(3, 3))
	ents := make([]ecs.Entity, 50)
	for i := range ents {
		ents[i] = h.Spawn(0, components.Vec3{X: rng.Float64() * 100})
	}
	h.Game = func(int) {
		for _, e := range ents {
			h.Pos(e).Z += 0.1
		}
	}

	// A join whose authentication takes long: the server and the first client
	// go on, tick after tick.
	b := join("slow")
	for range 40 {
		h.Step()
		require.NoError(t, h.Converged(0, nil))
		require.Equal(t, replication.StateConnecting, b.Client.State())
	}
	close(release)
	stepUntil(t, h, "the slow client", func() bool { require.NoError(t, b.Client.Err()); return b.Client.Ready() })
	h.Run(2)
	require.NoError(t, h.Converged(0, nil))
	require.NoError(t, h.Converged(1, nil))

	bad := join("wrong")
	stepUntil(t, h, "the bad client's rejection", func() bool { return bad.Client.State() == replication.StateClosed })
	require.EqualError(t, bad.Client.Err(), "rejected by server: bad token", "the reason, said once")

	// A third client authenticating holds the last place: a fourth is told the
	// server is full without an Authenticator call.
	d := join("hang")
	stepUntil(t, h, "the hanging authentication to start", func() bool { return calls.Load() == 4 })
	e := join("fast")
	stepUntil(t, h, "the full server's answer", func() bool { return e.Client.State() == replication.StateClosed })
	require.EqualError(t, e.Client.Err(), "rejected by server: server full: 3 of 3 slots taken (ServerConfig.Limits.MaxClients)")
	require.Equal(t, int32(4), calls.Load(), "no Authenticator call for a client that cannot join anyway")

	// The hanging authentication ends with the handshake timeout.
	stepUntil(t, h, "the hanging client's rejection", func() bool { return d.Client.State() == replication.StateClosed })
	require.EqualError(t, d.Client.Err(), "rejected by server: authentication timed out")
	require.Equal(t, 1, h.Server.Stats.HandshakeTimeouts)
	require.Len(t, h.Server.Clients(), 2)
}
