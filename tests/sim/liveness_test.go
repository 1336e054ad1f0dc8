package sim_test

import (
	"bytes"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/tests/internal/harness"
	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/sim"
	"github.com/stretchr/testify/require"
)

const liveTimeout = 3 * time.Second

// liveRig is a harness whose server and client steps can be switched off
// one by one, with the server's and the client's log captured.
type liveRig struct {
	*harness.Harness
	serverLog, clientLog bytes.Buffer
	srvReceive, srvSend  bool
	cliReceive, cliSend  bool
	dropped              []error
	started              time.Time
}

func newLiveRig(t *testing.T) *liveRig {
	r := &liveRig{srvReceive: true, srvSend: true, cliReceive: true, cliSend: true}
	r.Harness = harness.New(t, 0, sim.Link{}, func(c *replication.ServerConfig) {
		c.Limits.ClientTimeout, c.Limits.JoinTimeout = liveTimeout, liveTimeout
		c.Logger = slog.New(slog.NewTextHandler(&r.serverLog, nil))
		c.OnDisconnect = func(_ replication.ClientID, reason error) { r.dropped = append(r.dropped, reason) }
		// A joined client that falls silent keeps its seat: the game hears
		// of it at once, as of a drop.
		c.OnSuspend = c.OnDisconnect
	})
	r.ClientConfig = func(c *replication.ClientConfig) {
		c.Timeout, c.ConnectTimeout = liveTimeout, liveTimeout
		c.Logger = slog.New(slog.NewTextHandler(&r.clientLog, nil))
	}
	r.Spawn(0, components.Vec3{X: 1})
	r.started = r.Net.Now()
	return r
}

// Step is harness.Step with switches.
func (r *liveRig) Step() {
	r.Tick++
	if r.srvReceive {
		r.Server.Receive()
	}
	if r.srvSend {
		r.Server.Send()
	}
	r.Net.Advance(harness.TickDt)
	for _, c := range r.Clients {
		if r.cliReceive {
			c.Client.Receive()
		}
		if r.cliSend {
			c.Client.Send()
		}
	}
}

// runUntil steps until cond holds, at most limit of simulated time, and
// returns the simulated time it took from the rig's start mark.
func (r *liveRig) runUntil(limit time.Duration, what string, cond func() bool) time.Duration {
	r.T.Helper()
	end := r.Net.Now().Add(limit)
	for !cond() {
		require.True(r.T, r.Net.Now().Before(end), "%s: not within %v", what, limit)
		r.Step()
	}
	return r.Net.Now().Sub(r.started)
}

func (r *liveRig) mark() { r.started = r.Net.Now() }

func clientClosed(c *replication.Client) func() bool {
	return func() bool { return c.State() == replication.StateClosed }
}

// requireWithin checks a detection time: after the timeout, at most two net
// ticks (plus one of the peer's, for a Welcome) late.
func requireWithin(t *testing.T, took time.Duration) {
	t.Helper()
	require.Greater(t, took, liveTimeout)
	require.LessOrEqual(t, took, liveTimeout+4*harness.TickDt)
}

// A server that never runs Receive never welcomes anyone: the client gives
// up after ConnectTimeout with an error naming the address and the phase.
func TestLivenessServerNeverReceives(t *testing.T) {
	r := newLiveRig(t)
	r.srvReceive = false
	cs := r.AddClient()
	took := r.runUntil(2*liveTimeout, "client gives up", clientClosed(cs.Client))
	requireWithin(t, took)
	err := cs.Client.Err()
	require.ErrorIs(t, err, replication.ErrTimeout)
	require.ErrorContains(t, err, "connecting to server: no Welcome within 3s")
	require.ErrorContains(t, err, "Server.Receive")
}

// A server that never runs Send welcomes the client and then says nothing:
// the client gives up after Timeout, naming the phase and the likely cause.
func TestLivenessServerNeverSends(t *testing.T) {
	r := newLiveRig(t)
	r.srvSend = false
	cs := r.AddClient()
	r.runUntil(time.Second, "welcome", func() bool { return cs.Client.State() == replication.StateJoined })
	r.mark()
	took := r.runUntil(2*liveTimeout, "client gives up", clientClosed(cs.Client))
	requireWithin(t, took)
	require.ErrorIs(t, cs.Client.Err(), replication.ErrTimeout)
	require.ErrorContains(t, cs.Client.Err(), "joined server: nothing arrived in the 3s since the Welcome (is the server running Server.Send?)")
}

// A server that stops running Receive while it keeps sending warns (its
// clients' acks and inputs go unread).
func TestLivenessServerStopsReceiving(t *testing.T) {
	r := newLiveRig(t)
	cs := r.AddClient()
	r.runUntil(time.Second, "ready", cs.Client.Ready)
	r.srvReceive = false
	for range int(3 * time.Second / harness.TickDt) {
		r.Step()
	}
	require.Contains(t, r.serverLog.String(), "Server.Send runs but Server.Receive has not run for 2")
	require.Equal(t, 1, countLines(r.serverLog.String(), "Server.Receive has not run"), "rate-limited to one per 10 s")
}

// A client that never runs Send is dropped by the server after
// ClientTimeout with CodeTimeout; the client learns why.
func TestLivenessClientNeverSends(t *testing.T) {
	r := newLiveRig(t)
	r.cliSend = false
	cs := r.AddClient()
	r.runUntil(time.Second, "ready", cs.Client.Ready)
	r.mark()
	took := r.runUntil(2*liveTimeout, "server drops the client", func() bool { return len(r.dropped) > 0 })
	requireWithin(t, took)
	var ce *transport.CloseError
	require.ErrorAs(t, r.dropped[0], &ce)
	require.Equal(t, transport.CodeTimeout, ce.Code)
	require.Contains(t, ce.Reason, "no datagram from the client in the 3s since its Welcome")
	r.runUntil(time.Second, "client sees the close", clientClosed(cs.Client))
	require.ErrorAs(t, cs.Client.Err(), &ce)
	require.Equal(t, transport.CodeTimeout, ce.Code)
}

// A client that runs Send but never Receive warns about it, and the server
// drops it (it never acks) after ClientTimeout.
func TestLivenessClientNeverReceives(t *testing.T) {
	r := newLiveRig(t)
	r.cliReceive = false
	cs := r.AddClient()
	took := r.runUntil(2*liveTimeout, "server drops the client", func() bool { return len(r.dropped) > 0 })
	require.LessOrEqual(t, took, liveTimeout+4*harness.TickDt)
	require.Contains(t, r.dropped[0].Error(), "since its Welcome (is it running Client.Receive and Client.Send?); ServerConfig.Limits.JoinTimeout")
	require.Contains(t, r.clientLog.String(), "Client.Receive has not run: the client sees nothing from the server")
	require.Equal(t, replication.StateConnecting, cs.Client.State())
}

// A killed client (its process gone, no close frame) is dropped after
// ClientTimeout; a killed server is given up on by its clients after
// Timeout. Both long before QUIC's 30 s idle timeout.
func TestLivenessKilledPeers(t *testing.T) {
	r := newLiveRig(t)
	a, b := r.AddClient(), r.AddClient()
	r.runUntil(time.Second, "ready", func() bool { return a.Client.Ready() && b.Client.Ready() })
	r.Clients = r.Clients[:1] // b is killed: it never runs again
	r.mark()
	took := r.runUntil(2*liveTimeout, "server drops the killed client", func() bool { return len(r.dropped) > 0 })
	requireWithin(t, took)
	require.ErrorContains(t, r.dropped[0], "no datagram from the client for 3s (dead link, or the client stopped running Client.Send)")
	require.True(t, a.Client.Ready(), "the live client is untouched")
	require.NoError(t, r.Converged(0, nil))

	r.srvReceive, r.srvSend = false, false // the server is killed
	r.mark()
	took = r.runUntil(2*liveTimeout, "client gives up", clientClosed(a.Client))
	requireWithin(t, took)
	require.ErrorIs(t, a.Client.Err(), replication.ErrTimeout)
	require.ErrorContains(t, a.Client.Err(), "ready server: nothing arrived for 3s (dead link, or the server stopped running Server.Send)")
	require.True(t, errors.Is(a.Client.Err(), replication.ErrTimeout))
}

func countLines(s, sub string) int {
	n := 0
	for _, l := range bytes.Split([]byte(s), []byte("\n")) {
		if bytes.Contains(l, []byte(sub)) {
			n++
		}
	}
	return n
}
