package sim_test

import (
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/tests/internal/harness"
	"github.com/archenet/archenet/transport"
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

// A client whose transport stops taking anything (its peer stopped reading,
// its writes block forever) while the server spawns heavily: every server
// tick completes, the client is dropped with a reason naming the backlog
// once its backlog is older than the bound, and the other clients keep
// converging throughout.
func TestStuckClientDoesNotStallServer(t *testing.T) {
	var stuck []*stuckConn
	const timeout = 2 * time.Second
	var reasons []error
	h := harness.NewCustom(t, func(h *harness.Harness, l transport.Listener) transport.Listener {
		return harness.WrapListener{Listener: l, Wrap: func(c transport.Conn) transport.Conn {
			sc := newStuckConn(c, transport.OutboxConfig{DatagramQueueLen: 16, BacklogTimeout: timeout, Now: h.Net.Now})
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
		h.AddClient()
	}
	rng := rand.New(rand.NewPCG(12, 1))
	ents := make([]ecs.Entity, 200)
	for i := range ents {
		ents[i] = h.Spawn(0, components.Vec3{X: rng.Float64() * 100, Z: rng.Float64() * 100})
	}
	h.Run(10)
	h.RequireConverged(nil)
	require.Len(t, stuck, 3)

	h.Game = harness.SpawnChurn(h, ents, 20, rng)
	bad := stuck[2]
	bad.stuck.Store(true)
	stuckAt := h.Net.Now()
	var droppedAt time.Time
	for tick := 0; tick < 120; tick++ {
		h.Step() // returns: the server's tick never waits on the stuck peer
		if droppedAt.IsZero() && len(h.Server.Clients()) == 2 {
			droppedAt = h.Net.Now()
		}
		if tick%10 == 9 {
			// The good clients converge as soon as the churn pauses for a
			// tick's delivery.
			game := h.Game
			h.Game = nil
			h.Step()
			for ci := range 2 {
				require.NoError(t, h.Converged(ci, nil), "tick %d", tick)
			}
			h.Game = game
		}
	}
	require.False(t, droppedAt.IsZero(), "the stuck client was never dropped")
	t.Logf("stuck client dropped %v after it stopped reading; %d of its datagrams dropped in the send queue",
		droppedAt.Sub(stuckAt), bad.out.SendDropped())
	require.LessOrEqual(t, droppedAt.Sub(stuckAt), timeout+2*harness.TickDt)
	require.Equal(t, 1, h.Server.Stats.BacklogDrops)
	require.Len(t, reasons, 1)
	var ce *transport.CloseError
	require.ErrorAs(t, reasons[0], &ce)
	require.Equal(t, transport.CodeSendBacklog, ce.Code)
	require.Contains(t, ce.Reason, "peer not reading: reliable messages waiting for")
	require.Greater(t, bad.out.SendDropped(), uint64(0), "its datagrams were dropped, oldest first")

	// The stuck client learns why.
	h.Run(2)
	require.Equal(t, replication.StateClosed, h.Clients[2].Client.State())
	require.ErrorAs(t, h.Clients[2].Client.Err(), &ce)
	require.Equal(t, transport.CodeSendBacklog, ce.Code)
	require.True(t, ce.Remote)
}
