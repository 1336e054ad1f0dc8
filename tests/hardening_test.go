package tests

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/sim"
	"github.com/mlange-42/arche/ecs"
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
	h := newCustomHarness(t, func(h *harness, l transport.Listener) transport.Listener {
		return wrapListener{Listener: l, wrap: func(c transport.Conn) transport.Conn {
			hc := &hangingConn{Conn: c, release: release}
			mu.Lock()
			hanging = append(hanging, hc)
			mu.Unlock()
			return hc
		}}
	}, func(cfg *replication.ServerConfig) {
		cfg.MaxHandshakes = 3
		cfg.HandshakeTimeout = time.Second
		cfg.ClientTimeout = time.Second
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
			h.tick++
			h.srv.Receive()
			h.srv.Send()
		})
		h.net.Advance(tickDt)
		for i, c := range h.clients {
			c.c.Receive()
			if !muted[i] {
				c.c.Send()
			}
		}
	}
	h.spawn(0, components.Vec3{})
	for range 2 { // (two at a time: at most MaxHandshakes)
		h.addClient()
		h.addClient()
		for range 5 {
			step()
		}
	}
	for i := range h.clients {
		require.True(t, h.clients[i].c.Ready(), "client %d", i)
	}

	// Two connections that never say Hello, one that sends garbage
	// (rejected), one over MaxHandshakes (refused as busy), a kick, a
	// protocol error and a client that stops sending.
	var raw []*sim.Conn
	for range 4 {
		c, err := h.net.Dial("server", sim.Link{})
		require.NoError(t, err)
		raw = append(raw, c)
	}
	require.NoError(t, raw[2].SendMessage([]byte("not a hello")))
	ids := h.srv.Clients()
	require.Len(t, ids, 4)
	stepWithin(t, 10*time.Second, func() { h.srv.Kick(ids[1], "kicked by the test") }) // (as a game system would)
	muted[2] = true
	require.NoError(t, h.clients[3].conn.SendDatagram([]byte{0xff, 0xff, 0xff}))
	for range int(2*time.Second/tickDt) + 5 {
		step()
	}

	require.Len(t, h.srv.Clients(), 1, "the kicked, the silent and the garbling client are gone")
	require.Equal(t, 2, h.srv.Stats.HandshakeTimeouts)
	require.Equal(t, 1, h.srv.Stats.Busy)
	require.NoError(t, h.converged(0, nil))
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
	require.Zero(t, h.srv.Stats.ClosesDropped)

	// Once the transport lets them go, the closes complete.
	close(release)
	released = true
	require.NoError(t, h.srv.Close()) // (waits for the close goroutines)
	h.net.Advance(time.Second)
	for i, c := range raw {
		select {
		case <-c.Done():
		default:
			t.Fatalf("refused connection %d was never closed", i)
		}
	}
}

// addClientFrom is harness.addClient from the address from.
func (h *harness) addClientFrom(from string) *clientSide {
	conn, err := h.net.DialFrom("server", from, h.link)
	require.NoError(h.t, err)
	w := ecs.NewWorld()
	c, err := replication.NewClient(&w, conn, replication.ClientConfig{Registry: h.reg, Now: h.net.Now, Logger: quiet})
	require.NoError(h.t, err)
	cs := &clientSide{w: &w, c: c, conn: conn}
	h.clients = append(h.clients, cs)
	return cs
}

// vanisher is a peer that connects from one host as fast as it can, says a
// valid Hello on each connection and then nothing at all (it joins and
// vanishes, without a close).
type vanisher struct {
	h     *harness
	host  string
	conns []*sim.Conn
}

func (v *vanisher) join(n int) {
	hello := transport.Hello{Version: replication.ProtocolVersion, ProtocolHash: v.h.reg.Hash()}.Append(nil)
	for range n {
		c, err := v.h.net.DialFrom("server", fmt.Sprintf("%s:%d", v.host, 1000+len(v.conns)), sim.Link{})
		require.NoError(v.h.t, err)
		require.NoError(v.h.t, c.SendMessage(hello))
		v.conns = append(v.conns, c)
	}
}

// rejects returns the reasons of the Rejects the vanisher's connections got.
func (v *vanisher) rejects() map[string]int {
	reasons := map[string]int{}
	for _, c := range v.conns {
		for {
			m, ok := c.PollMessage()
			if !ok {
				break
			}
			if rj, err := transport.ParseReject(m); err == nil {
				reasons[rj.Reason]++
			}
		}
	}
	return reasons
}

// One source joining and vanishing as fast as it can (four connections a
// tick, 480 in 4 s) holds at most MaxClientsPerAddress slots with the
// defaults (64 slots, 8 per address), is told which limit it hit, and a
// player from another address joins at once; the vanished peers' slots are
// reclaimed by the JoinTimeout (2 s), not the 10 s ClientTimeout.
func TestOneSourceCannotTakeEverySlot(t *testing.T) {
	h := newHarness(t, 0, sim.Link{}, nil)
	h.spawn(0, components.Vec3{})
	v := &vanisher{h: h, host: "198.51.100.7"}
	var player *clientSide
	var joined time.Duration
	most := 0
	for tick := range 120 {
		v.join(4)
		if tick == 30 {
			player = h.addClientFrom("203.0.113.9:4000")
		}
		h.step()
		if player != nil && joined == 0 && player.c.Ready() {
			joined = time.Duration(tick-30) * tickDt
		}
		most = max(most, len(h.srv.Clients())-btoi(player != nil && player.c.Ready()))
	}
	reasons := v.rejects()
	t.Logf("vanisher held at most %d slots; the player was ready %v after it dialled; rejects: %v", most, joined, reasons)
	require.NotNil(t, player)
	require.True(t, player.c.Ready(), "the player from another address got in")
	require.LessOrEqual(t, joined, 2*time.Second)
	require.LessOrEqual(t, most, replication.DefaultMaxClientsPerAddress)
	require.NotEmpty(t, reasons)
	for reason := range reasons {
		require.Contains(t, reason, "too many clients from one address: 8 clients from 198.51.100.7 (ServerConfig.MaxClientsPerAddress)")
	}
	require.GreaterOrEqual(t, h.srv.Stats.Disconnected, 8, "vanished peers were dropped by the JoinTimeout (2 s), not the ClientTimeout (10 s)")
}

// With the per-address limit off (LAN play), peers that joined and
// vanished give their slots back within the JoinTimeout: a player refused
// as "server full" gets in on its next try, 2 s later.
func TestVanishedPeersSlotsReclaimed(t *testing.T) {
	h := newHarness(t, 0, sim.Link{}, func(cfg *replication.ServerConfig) {
		cfg.MaxClients = 16
		cfg.MaxClientsPerAddress = -1
	})
	h.spawn(0, components.Vec3{})
	v := &vanisher{h: h, host: "198.51.100.7"}
	v.join(16)
	h.run(2)
	require.Len(t, h.srv.Clients(), 16)
	early := h.addClientFrom("203.0.113.9:4000")
	h.run(3)
	require.Equal(t, replication.StateClosed, early.c.State())
	require.ErrorContains(t, early.c.Err(), "rejected by server: server full: 16 of 16 slots taken (ServerConfig.MaxClients)")

	start := h.net.Now()
	for len(h.srv.Clients()) > 0 {
		require.Less(t, h.net.Now().Sub(start), 3*time.Second, "the vanished peers' slots were not reclaimed")
		h.step()
	}
	t.Logf("16 vanished peers dropped %v after the server was full", h.net.Now().Sub(start))
	late := h.addClientFrom("203.0.113.9:4001")
	h.run(5)
	require.True(t, late.c.Ready(), fmt.Sprint(late.c.Err()))
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
