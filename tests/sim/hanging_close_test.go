package sim_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/tests/internal/harness"
	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/sim"
	"github.com/stretchr/testify/require"
)

// hangingConn is the server's end of a connection whose transport waits
// for the peer to answer its close, and the peer never does: CloseWithReason
// blocks until the test releases it. It is not a transport.CloseStarter, so
// the server must run its close off the tick.
type hangingConn struct {
	transport.Conn
	release <-chan struct{}
	closes  atomic.Int32
}

func (c *hangingConn) CloseWithReason(code transport.CloseCode, reason string) error {
	c.closes.Add(1)
	<-c.release
	return c.Conn.CloseWithReason(code, reason)
}

func (c *hangingConn) Close() error { return c.CloseWithReason(transport.CodeNormal, "") }

// stepWithin runs one harness step and fails if it does not return within
// limit: a tick that waits on a hanging close would wait for good.
func stepWithin(t *testing.T, limit time.Duration, step func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		step()
	}()
	select {
	case <-done:
	case <-time.After(limit):
		t.Fatalf("a server tick did not return within %v: it waits on a close", limit)
	}
}

// Every way the server closes a connection — the handshake timeout, "server
// busy", a Reject after its linger, a kick, a protocol error, a silent
// client's timeout — over a transport whose close never returns while the
// peer is silent: no tick waits, every close is still asked for, and the
// playing client keeps converging.
func TestHangingClosesDoNotStallTick(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	var hanging []*hangingConn
	h := harness.NewCustom(t, func(h *harness.Harness, l transport.Listener) transport.Listener {
		return harness.WrapListener{Listener: l, Wrap: func(c transport.Conn) transport.Conn {
			hc := &hangingConn{Conn: c, release: release}
			mu.Lock()
			hanging = append(hanging, hc)
			mu.Unlock()
			return hc
		}}
	}, func(cfg *replication.ServerConfig) {
		cfg.Limits.MaxHandshakes = 3
		cfg.Limits.HandshakeTimeout = time.Second
		cfg.Limits.ClientTimeout = time.Second
	})
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	muted := map[int]bool{}
	step := func() {
		stepWithin(t, 10*time.Second, func() {
			h.Tick++
			h.Server.Receive()
			h.Server.Send()
		})
		h.Net.Advance(harness.TickDt)
		for i, c := range h.Clients {
			c.Client.Receive()
			if !muted[i] {
				c.Client.Send()
			}
		}
	}
	h.Spawn(0, components.Vec3{})
	for range 2 { // (two at a time: at most MaxHandshakes)
		h.AddClient()
		h.AddClient()
		for range 5 {
			step()
		}
	}
	for i := range h.Clients {
		require.True(t, h.Clients[i].Client.Ready(), "client %d", i)
	}

	// Two connections that never say Hello, one that sends garbage
	// (rejected), one over MaxHandshakes (refused as busy), a kick, a
	// protocol error and a client that stops sending.
	var raw []*sim.Conn
	for range 4 {
		c, err := h.Net.Dial("server", sim.Link{})
		require.NoError(t, err)
		raw = append(raw, c)
	}
	require.NoError(t, raw[2].SendMessage([]byte("not a hello")))
	ids := h.Server.Clients()
	require.Len(t, ids, 4)
	stepWithin(t, 10*time.Second, func() { h.Server.Kick(ids[1], "kicked by the test") }) // (as a game system would)
	muted[2] = true
	require.NoError(t, h.Clients[3].Conn.SendDatagram([]byte{0xff, 0xff, 0xff}))
	for range int(2*time.Second/harness.TickDt) + 5 {
		step()
	}

	require.Len(t, h.Server.Clients(), 1, "the kicked, the silent and the garbling client are gone")
	require.Equal(t, 2, h.Server.Stats.HandshakeTimeouts)
	require.Equal(t, 1, h.Server.Stats.Busy)
	require.NoError(t, h.Converged(0, nil))
	asked := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, hc := range hanging {
			n += int(hc.closes.Load())
		}
		return n
	}
	// A kick, a timeout, a protocol error, two handshake timeouts, a
	// reject and a busy refusal: seven closes asked for (on the server's
	// close goroutines) and hanging; the playing client's connection is
	// open.
	require.Len(t, hanging, 8)
	require.Eventually(t, func() bool { return asked() == 7 }, 10*time.Second, time.Millisecond)
	require.Zero(t, h.Server.Stats.ClosesDropped)

	// Once the transport lets them go, the closes complete.
	close(release)
	released = true
	require.NoError(t, h.Server.Close()) // (waits for the close goroutines)
	h.Net.Advance(time.Second)
	for i, c := range raw {
		select {
		case <-c.Done():
		default:
			t.Fatalf("refused connection %d was never closed", i)
		}
	}
}
