package tests

import (
	"bytes"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/sim"
)

// Liveness: each way one side can stop working — a system that is never
// run, a killed peer — is detected within the configured time and reported
// with an error or a log line that names the cause.

const liveTimeout = 3 * time.Second

// liveRig is a harness whose server and client steps can be switched off
// one by one, with the server's and the client's log captured.
type liveRig struct {
	*harness
	serverLog, clientLog bytes.Buffer
	srvReceive, srvSend  bool
	cliReceive, cliSend  bool
	dropped              []error
	started              time.Time
}

func newLiveRig(t *testing.T) *liveRig {
	r := &liveRig{srvReceive: true, srvSend: true, cliReceive: true, cliSend: true}
	r.harness = newHarness(t, 0, sim.Link{}, func(c *replication.ServerConfig) {
		c.ClientTimeout, c.JoinTimeout = liveTimeout, liveTimeout
		c.Logger = slog.New(slog.NewTextHandler(&r.serverLog, nil))
		c.OnDisconnect = func(_ replication.ClientID, reason error) { r.dropped = append(r.dropped, reason) }
	})
	r.clientCfg = func(c *replication.ClientConfig) {
		c.Timeout, c.ConnectTimeout = liveTimeout, liveTimeout
		c.Logger = slog.New(slog.NewTextHandler(&r.clientLog, nil))
	}
	r.spawn(0, components.Vec3{X: 1})
	r.started = r.net.Now()
	return r
}

// step is harness.step with switches.
func (r *liveRig) step() {
	r.tick++
	if r.srvReceive {
		r.srv.Receive()
	}
	if r.srvSend {
		r.srv.Send()
	}
	r.net.Advance(tickDt)
	for _, c := range r.clients {
		if r.cliReceive {
			c.c.Receive()
		}
		if r.cliSend {
			c.c.Send()
		}
	}
}

// runUntil steps until cond holds, at most limit of simulated time, and
// returns the simulated time it took from the rig's start mark.
func (r *liveRig) runUntil(limit time.Duration, what string, cond func() bool) time.Duration {
	r.t.Helper()
	end := r.net.Now().Add(limit)
	for !cond() {
		require.True(r.t, r.net.Now().Before(end), "%s: not within %v", what, limit)
		r.step()
	}
	return r.net.Now().Sub(r.started)
}

func (r *liveRig) mark() { r.started = r.net.Now() }

func clientClosed(c *replication.Client) func() bool {
	return func() bool { return c.State() == replication.StateClosed }
}

// requireWithin checks a detection time: after the timeout, at most two net
// ticks (plus one of the peer's, for a Welcome) late.
func requireWithin(t *testing.T, took time.Duration) {
	t.Helper()
	require.Greater(t, took, liveTimeout)
	require.LessOrEqual(t, took, liveTimeout+4*tickDt)
}

// A server that never runs Receive never welcomes anyone: the client gives
// up after ConnectTimeout with an error naming the address and the phase.
func TestLivenessServerNeverReceives(t *testing.T) {
	r := newLiveRig(t)
	r.srvReceive = false
	cs := r.addClient()
	took := r.runUntil(2*liveTimeout, "client gives up", clientClosed(cs.c))
	requireWithin(t, took)
	err := cs.c.Err()
	require.ErrorIs(t, err, replication.ErrTimeout)
	require.ErrorContains(t, err, "connecting to server: no Welcome within 3s")
	require.ErrorContains(t, err, "Server.Receive")
}

// A server that never runs Send welcomes the client and then says nothing:
// the client gives up after Timeout, naming the phase and the likely cause.
func TestLivenessServerNeverSends(t *testing.T) {
	r := newLiveRig(t)
	r.srvSend = false
	cs := r.addClient()
	r.runUntil(time.Second, "welcome", func() bool { return cs.c.State() == replication.StateJoined })
	r.mark()
	took := r.runUntil(2*liveTimeout, "client gives up", clientClosed(cs.c))
	requireWithin(t, took)
	require.ErrorIs(t, cs.c.Err(), replication.ErrTimeout)
	require.ErrorContains(t, cs.c.Err(), "joined server: nothing arrived in the 3s since the Welcome (is the server running Server.Send?)")
}

// A server that stops running Receive while it keeps sending warns (its
// clients' acks and inputs go unread).
func TestLivenessServerStopsReceiving(t *testing.T) {
	r := newLiveRig(t)
	cs := r.addClient()
	r.runUntil(time.Second, "ready", cs.c.Ready)
	r.srvReceive = false
	for range int(3 * time.Second / tickDt) {
		r.step()
	}
	require.Contains(t, r.serverLog.String(), "Server.Send runs but Server.Receive has not run for 2")
	require.Equal(t, 1, countLines(r.serverLog.String(), "Server.Receive has not run"), "rate-limited to one per 10 s")
}

// A client that never runs Send is dropped by the server after
// ClientTimeout with CodeTimeout; the client learns why.
func TestLivenessClientNeverSends(t *testing.T) {
	r := newLiveRig(t)
	r.cliSend = false
	cs := r.addClient()
	r.runUntil(time.Second, "ready", cs.c.Ready)
	r.mark()
	took := r.runUntil(2*liveTimeout, "server drops the client", func() bool { return len(r.dropped) > 0 })
	requireWithin(t, took)
	var ce *transport.CloseError
	require.ErrorAs(t, r.dropped[0], &ce)
	require.Equal(t, transport.CodeTimeout, ce.Code)
	require.Contains(t, ce.Reason, "no datagram from the client in the 3s since its Welcome")
	r.runUntil(time.Second, "client sees the close", clientClosed(cs.c))
	require.ErrorAs(t, cs.c.Err(), &ce)
	require.Equal(t, transport.CodeTimeout, ce.Code)
}

// A client that runs Send but never Receive warns about it, and the server
// drops it (it never acks) after ClientTimeout.
func TestLivenessClientNeverReceives(t *testing.T) {
	r := newLiveRig(t)
	r.cliReceive = false
	cs := r.addClient()
	took := r.runUntil(2*liveTimeout, "server drops the client", func() bool { return len(r.dropped) > 0 })
	require.LessOrEqual(t, took, liveTimeout+4*tickDt)
	require.Contains(t, r.dropped[0].Error(), "since its Welcome (is it running Client.Receive and Client.Send?); ServerConfig.JoinTimeout")
	require.Contains(t, r.clientLog.String(), "Client.Receive has not run: the client sees nothing from the server")
	require.Equal(t, replication.StateConnecting, cs.c.State())
}

// A killed client (its process gone, no close frame) is dropped after
// ClientTimeout; a killed server is given up on by its clients after
// Timeout. Both long before QUIC's 30 s idle timeout.
func TestLivenessKilledPeers(t *testing.T) {
	r := newLiveRig(t)
	a, b := r.addClient(), r.addClient()
	r.runUntil(time.Second, "ready", func() bool { return a.c.Ready() && b.c.Ready() })
	r.clients = r.clients[:1] // b is killed: it never runs again
	r.mark()
	took := r.runUntil(2*liveTimeout, "server drops the killed client", func() bool { return len(r.dropped) > 0 })
	requireWithin(t, took)
	require.ErrorContains(t, r.dropped[0], "no datagram from the client for 3s (dead link, or the client stopped running Client.Send)")
	require.True(t, a.c.Ready(), "the live client is untouched")
	require.NoError(t, r.converged(0, nil))

	r.srvReceive, r.srvSend = false, false // the server is killed
	r.mark()
	took = r.runUntil(2*liveTimeout, "client gives up", clientClosed(a.c))
	requireWithin(t, took)
	require.ErrorIs(t, a.c.Err(), replication.ErrTimeout)
	require.ErrorContains(t, a.c.Err(), "ready server: nothing arrived for 3s (dead link, or the server stopped running Server.Send)")
	require.True(t, errors.Is(a.c.Err(), replication.ErrTimeout))
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
