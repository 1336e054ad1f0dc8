package tests

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/sim"
	"github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/require"
)

// stuckConn is the server's end of a connection whose peer stops reading:
// once stuck, every send goes through a transport.Outbox (what a real
// transport sends through) into a network that never takes anything, so the
// writer goroutines block forever. Before that, sends pass straight to the
// simulated connection, so the run stays deterministic.
type stuckConn struct {
	transport.Conn
	stuck   atomic.Bool
	out     *transport.Outbox
	release chan struct{}
}

func newStuckConn(c transport.Conn, cfg transport.OutboxConfig) *stuckConn {
	s := &stuckConn{Conn: c, release: make(chan struct{})}
	s.out = transport.NewOutbox(blockedNetwork{s.release}, cfg, func(code transport.CloseCode, reason string) {
		_ = c.CloseWithReason(code, reason)
	})
	return s
}

func (s *stuckConn) SendDatagram(b []byte) error {
	if !s.stuck.Load() {
		return s.Conn.SendDatagram(b)
	}
	if err := s.Conn.Err(); err != nil {
		return err
	}
	return s.out.SendDatagram(b)
}

func (s *stuckConn) SendMessage(b []byte) error {
	if !s.stuck.Load() {
		return s.Conn.SendMessage(b)
	}
	if err := s.Conn.Err(); err != nil {
		return err
	}
	return s.out.SendMessage(b)
}

func (s *stuckConn) Stats() transport.Stats {
	st := s.Conn.Stats()
	st.DatagramsSendDropped, st.MessageBacklog = s.out.SendDropped(), s.out.Backlog()
	return st
}

func (s *stuckConn) shutdown() {
	s.out.Close()
	close(s.release)
	s.out.Wait()
}

// blockedNetwork takes nothing until released (the test's end).
type blockedNetwork struct{ release chan struct{} }

func (b blockedNetwork) WriteDatagram([]byte) error {
	<-b.release
	return transport.ErrClosed
}

func (b blockedNetwork) WriteMessage([]byte, time.Time) error {
	<-b.release
	return transport.ErrClosed
}

// wrapListener hands out the server ends of accepted connections through wrap.
type wrapListener struct {
	transport.Listener
	wrap func(transport.Conn) transport.Conn
}

func (l wrapListener) PollAccept() (transport.Conn, bool) {
	c, ok := l.Listener.PollAccept()
	if !ok {
		return nil, false
	}
	return l.wrap(c), true
}

// newCustomHarness is newHarness without clients, with the server's
// listener wrapped.
func newCustomHarness(t *testing.T, wrap func(*harness, transport.Listener) transport.Listener, tweak func(*replication.ServerConfig)) *harness {
	h := &harness{t: t, net: sim.NewNetwork(1, time.Unix(1000, 0)), reg: newRegistry()}
	sw := ecs.NewWorld()
	h.sw = &sw
	cfg := replication.ServerConfig{Registry: h.reg, NetRate: netRate, Now: h.net.Now, Logger: quiet}
	if tweak != nil {
		tweak(&cfg)
	}
	srv, err := replication.NewServer(h.sw, wrap(h, h.net.Listen("server")), cfg)
	require.NoError(t, err)
	h.srv = srv
	return h
}

// spawnChurn moves every entity of ents each tick and replaces n of them
// (a despawn and a spawn each): heavy reliable traffic.
func spawnChurn(h *harness, ents []ecs.Entity, n int, rng *rand.Rand) func(int) {
	return func(tick int) {
		for _, e := range ents {
			h.pos(e).X += 0.05
		}
		for range n {
			i := rng.IntN(len(ents))
			h.sw.RemoveEntity(ents[i])
			ents[i] = h.spawn(0, components.Vec3{X: rng.Float64() * 100, Z: rng.Float64() * 100})
		}
	}
}

// A client whose transport stops taking anything (its peer stopped reading,
// its writes block forever) while the server spawns heavily: every server
// tick completes, the client is dropped with a reason naming the backlog
// once its backlog is older than the bound, and the other clients keep
// converging throughout.
func TestStuckClientDoesNotStallServer(t *testing.T) {
	var stuck []*stuckConn
	const timeout = 2 * time.Second
	var reasons []error
	h := newCustomHarness(t, func(h *harness, l transport.Listener) transport.Listener {
		return wrapListener{Listener: l, wrap: func(c transport.Conn) transport.Conn {
			sc := newStuckConn(c, transport.OutboxConfig{DatagramQueueLen: 16, BacklogTimeout: timeout, Now: h.net.Now})
			stuck = append(stuck, sc)
			return sc
		}}
	}, func(cfg *replication.ServerConfig) {
		cfg.OnDisconnect = func(_ replication.ClientID, err error) { reasons = append(reasons, err) }
	})
	defer func() {
		for _, sc := range stuck {
			sc.shutdown()
		}
	}()
	for range 3 {
		h.addClient()
	}
	rng := rand.New(rand.NewPCG(12, 1))
	ents := make([]ecs.Entity, 200)
	for i := range ents {
		ents[i] = h.spawn(0, components.Vec3{X: rng.Float64() * 100, Z: rng.Float64() * 100})
	}
	h.run(10)
	h.requireConverged(nil)
	require.Len(t, stuck, 3)

	h.game = spawnChurn(h, ents, 20, rng)
	bad := stuck[2]
	bad.stuck.Store(true)
	stuckAt := h.net.Now()
	var droppedAt time.Time
	for tick := 0; tick < 120; tick++ {
		h.step() // returns: the server's tick never waits on the stuck peer
		if droppedAt.IsZero() && len(h.srv.Clients()) == 2 {
			droppedAt = h.net.Now()
		}
		if tick%10 == 9 {
			// The good clients converge as soon as the churn pauses for a
			// tick's delivery.
			game := h.game
			h.game = nil
			h.step()
			for ci := range 2 {
				require.NoError(t, h.converged(ci, nil), "tick %d", tick)
			}
			h.game = game
		}
	}
	require.False(t, droppedAt.IsZero(), "the stuck client was never dropped")
	t.Logf("stuck client dropped %v after it stopped reading; %d of its datagrams dropped in the send queue",
		droppedAt.Sub(stuckAt), bad.out.SendDropped())
	require.LessOrEqual(t, droppedAt.Sub(stuckAt), timeout+2*tickDt)
	require.Equal(t, 1, h.srv.Stats.BacklogDrops)
	require.Len(t, reasons, 1)
	var ce *transport.CloseError
	require.ErrorAs(t, reasons[0], &ce)
	require.Equal(t, transport.CodeSendBacklog, ce.Code)
	require.Contains(t, ce.Reason, "peer not reading: reliable messages waiting for")
	require.Greater(t, bad.out.SendDropped(), uint64(0), "its datagrams were dropped, oldest first")

	// The stuck client learns why.
	h.run(2)
	require.Equal(t, replication.StateClosed, h.clients[2].c.State())
	require.ErrorAs(t, h.clients[2].c.Err(), &ce)
	require.Equal(t, transport.CodeSendBacklog, ce.Code)
	require.True(t, ce.Remote)
}

// stepUntil steps h until cond holds; the Authenticator's verdicts come
// from goroutines, so a bounded number of ticks may pass first.
func stepUntil(t *testing.T, h *harness, what string, cond func() bool) {
	t.Helper()
	for start := h.tick; !cond(); {
		require.Less(t, h.tick-start, 3000, "waiting for %s", what)
		h.step()
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
	h := newHarness(t, 0, sim.Link{}, func(cfg *replication.ServerConfig) {
		cfg.Authenticator = auth
		cfg.MaxClients = 3
		// Verdicts come from goroutines in real time while the test steps
		// simulated time fast: a long timeout (in simulated time) keeps a
		// verdict that the loaded machine delivers a few hundred steps late
		// from reading as a timeout. The hanging one still reaches it.
		cfg.HandshakeTimeout = 30 * time.Second
	})
	join := func(token string) *clientSide {
		h.clientCfg = func(cfg *replication.ClientConfig) {
			// The verdicts come from goroutines, in real time, while the
			// test steps simulated time: on a loaded machine many simulated
			// seconds may pass first. The client must not give up.
			cfg.Token, cfg.ConnectTimeout = []byte(token), -1
		}
		return h.addClient()
	}
	a := join("fast")
	stepUntil(t, h, "the first client", func() bool { return a.c.Ready() })
	rng := rand.New(rand.NewPCG(3, 3))
	ents := make([]ecs.Entity, 50)
	for i := range ents {
		ents[i] = h.spawn(0, components.Vec3{X: rng.Float64() * 100})
	}
	h.game = func(int) {
		for _, e := range ents {
			h.pos(e).Z += 0.1
		}
	}

	// A join whose authentication takes long: the server and the first client
	// go on, tick after tick.
	b := join("slow")
	for range 40 {
		h.step()
		require.NoError(t, h.converged(0, nil))
		require.Equal(t, replication.StateConnecting, b.c.State())
	}
	close(release)
	stepUntil(t, h, "the slow client", func() bool { require.NoError(t, b.c.Err()); return b.c.Ready() })
	h.run(2)
	require.NoError(t, h.converged(0, nil))
	require.NoError(t, h.converged(1, nil))

	bad := join("wrong")
	stepUntil(t, h, "the bad client's rejection", func() bool { return bad.c.State() == replication.StateClosed })
	require.EqualError(t, bad.c.Err(), "rejected by server: bad token", "the reason, said once")

	// A third client authenticating holds the last place: a fourth is told the
	// server is full without an Authenticator call.
	d := join("hang")
	stepUntil(t, h, "the hanging authentication to start", func() bool { return calls.Load() == 4 })
	e := join("fast")
	stepUntil(t, h, "the full server's answer", func() bool { return e.c.State() == replication.StateClosed })
	require.EqualError(t, e.c.Err(), "rejected by server: server full: 3 of 3 slots taken (ServerConfig.MaxClients)")
	require.Equal(t, int32(4), calls.Load(), "no Authenticator call for a client that cannot join anyway")

	// The hanging authentication ends with the handshake timeout.
	stepUntil(t, h, "the hanging client's rejection", func() bool { return d.c.State() == replication.StateClosed })
	require.EqualError(t, d.c.Err(), "rejected by server: authentication timed out")
	require.Equal(t, 1, h.srv.Stats.HandshakeTimeouts)
	require.Len(t, h.srv.Clients(), 2)
}

// Connections that never say Hello: at most MaxHandshakes wait at a time
// (the rest are refused as busy), each is closed at the handshake timeout,
// and the pending list lets go of them.
func TestHandshakeFlood(t *testing.T) {
	h := newHarness(t, 1, sim.Link{}, func(cfg *replication.ServerConfig) {
		cfg.MaxHandshakes = 8
		cfg.HandshakeTimeout = time.Second
	})
	h.run(3)
	var silent []*sim.Conn
	for range 20 {
		c, err := h.net.Dial("server", sim.Link{})
		require.NoError(t, err)
		silent = append(silent, c)
	}
	h.run(1)
	require.Equal(t, 12, h.srv.Stats.Busy)
	h.run(int(time.Second/tickDt) + 2)
	require.Equal(t, 8, h.srv.Stats.HandshakeTimeouts)
	closed := 0
	for _, c := range silent {
		select {
		case <-c.Done():
			closed++
			var ce *transport.CloseError
			require.ErrorAs(t, c.Err(), &ce)
			require.Contains(t, []string{"no hello in time", "server busy: 8 handshakes in progress (ServerConfig.MaxHandshakes)"}, ce.Reason)
		default:
		}
	}
	require.Equal(t, 20, closed)
	// The playing client never noticed.
	require.NoError(t, h.converged(0, nil))
	require.Len(t, h.srv.Clients(), 1)
	// A new client still gets in.
	late := h.addClient()
	h.run(3)
	require.True(t, late.c.Ready(), fmt.Sprint(late.c.Err()))
}
