package tests

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/netem"
	"github.com/archenet/archenet/transport/quic"
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

// jitterRun plays the budget scene (300 bodies on slow curves, two
// clients) for d over links with latency 50 ± 20 ms each way (reordering)
// and the given loss, with network seed seed, and returns, per client, the
// longest spell its budget spent below need, and the bytes per second each
// client's snapshots took.
func jitterRun(t *testing.T, seed uint64, loss float64, d time.Duration, need float64) (spells []time.Duration, used []float64) {
	path := sim.Conditions{Latency: 30 * time.Millisecond, Jitter: 40 * time.Millisecond, Loss: loss}
	h := &harness{t: t, net: sim.NewNetwork(int64(seed), time.Unix(1000, 0)), reg: newRegistry(), link: sim.Link{Up: path, Down: path}}
	sw := ecs.NewWorld()
	h.sw = &sw
	srv, err := replication.NewServer(h.sw, h.net.Listen("server"), replication.ServerConfig{Registry: h.reg, NetRate: netRate, Now: h.net.Now, Logger: quiet})
	require.NoError(t, err)
	h.srv = srv
	ents := make([]ecs.Entity, 300)
	for i := range ents {
		ents[i] = h.spawn(0, components.Vec3{X: float64(i%20) * 5, Z: float64(i/20) * 5})
	}
	h.game = func(tick int) {
		for i, e := range ents {
			p := h.pos(e)
			p.X += 0.05 * math.Sin(float64(tick+i)/10)
			p.Z += 0.05 * math.Cos(float64(tick+i)/10)
		}
	}
	h.addClient()
	h.addClient()
	for !h.clients[0].c.Ready() || !h.clients[1].c.Ready() {
		h.step()
	}
	h.run(int(2 * time.Second / tickDt)) // slow start
	ids := h.srv.Clients()
	spells, used = make([]time.Duration, len(ids)), make([]float64, len(ids))
	below := make([]time.Time, len(ids))
	bytes0 := make([]uint64, len(ids))
	for i, id := range ids {
		ci, _ := h.srv.Client(id)
		bytes0[i] = ci.SnapshotBytes
	}
	start := h.net.Now()
	for h.net.Now().Sub(start) < d {
		h.step()
		now := h.net.Now()
		for i, id := range ids {
			ci, ok := h.srv.Client(id)
			require.True(t, ok)
			switch {
			case float64(ci.BytesPerSecond) >= need:
				below[i] = time.Time{}
			case below[i].IsZero():
				below[i] = now
			default:
				spells[i] = max(spells[i], now.Sub(below[i]))
			}
		}
	}
	for i, id := range ids {
		ci, _ := h.srv.Client(id)
		used[i] = float64(ci.SnapshotBytes-bytes0[i]) / d.Seconds()
	}
	return spells, used
}

// Jitter of 50 ± 20 ms and 1% loss are the link's nature, not congestion:
// in 20 seeded runs of 40 s no client's budget stays below what the scene
// needs for more than 2 s. The scene's need is what it takes on a clean
// link, where the budget never binds.
func TestBudgetOnJitteryLossyLinks(t *testing.T) {
	if testing.Short() {
		t.Skip("20 runs of 40 s simulated")
	}
	_, clean := jitterRun(t, 1, 0, 10*time.Second, 0)
	need := max(clean[0], clean[1])
	runs, d := 20, 40*time.Second
	if raceEnabled {
		runs = 4 // (about 40 s of CPU each under the race detector)
	}
	worst := time.Duration(0)
	for seed := range uint64(runs) {
		spells, used := jitterRun(t, 100+seed, 0.01, d, need)
		t.Logf("seed %d: longest spell below the scene's need (%.0f B/s): %v, %v; used %.0f, %.0f B/s", 100+seed, need, spells[0], spells[1], used[0], used[1])
		worst = max(worst, spells[0], spells[1])
	}
	require.LessOrEqual(t, worst, 2*time.Second, "a budget stayed below the scene's need")
}

// Over QUIC: 100 clients whose path has gone dead (their peers will never
// answer a close) are kicked in one tick — the game's own call, on the
// tick goroutine — and the kicks take next to no time: the closes run on
// the connections' goroutines (quic-go's close waits for the connection's
// run loop; on the tick, 100 of them took milliseconds, and under a flood
// of connections up to a second). The playing client keeps up.
func TestQUICKickUnansweringPeers(t *testing.T) {
	if raceEnabled {
		t.Skip("100 QUIC clients and a timing bound: run without the race detector (.ci/run does)")
	}
	r := newQUICRig(t, quic.Config{MaxPendingPerAddress: -1}, func(c *replication.ServerConfig) { c.ClientTimeout, c.MaxClients = time.Minute, 128 })
	r.movers(100, 9)
	r.game = func(int) {}
	r.good = append(r.good, r.dial(r.l.Addr().String(), ""))
	dead, err := netem.Listen(r.l.Addr().String(), 1)
	require.NoError(t, err)
	defer dead.Close()
	var doomed []int
	for range 100 {
		doomed = append(doomed, r.dial(dead.Addr().String(), ""))
		r.step()
	}
	r.until("clients ready", 20*time.Second, func() bool {
		for _, c := range r.clients {
			if !c.c.Ready() {
				return false
			}
		}
		return true
	})
	dead.SetDown(true) // no close frame, no answer, ever
	for _, i := range doomed {
		r.active[i] = false
	}
	r.runFor(time.Second, nil)
	from := len(r.ticks)
	r.lagMax = map[int]int{}
	var kicks time.Duration
	r.game = func(int) {
		if kicks != 0 {
			return
		}
		start := time.Now()
		for _, id := range r.srv.Clients() {
			if id != r.clients[0].c.ID() {
				r.srv.Kick(id, "kicked by the test")
			}
		}
		kicks = time.Since(start)
	}
	r.runFor(time.Second, nil)
	var kickTick, others time.Duration
	for i, d := range r.ticks[from:] {
		if i == 0 {
			kickTick = d
		} else {
			others = max(others, d)
		}
	}
	t.Logf("100 kicks of unanswering peers took %v, their tick %v (the worst other tick %v); the playing client's worst probe lag %d ticks",
		kicks.Round(time.Microsecond), kickTick.Round(10*time.Microsecond), others.Round(10*time.Microsecond), r.lagMax[0])
	require.Len(t, r.srv.Clients(), 1)
	require.LessOrEqual(t, r.lagMax[0], maxLag)
	// The kicks take ~0.3 ms on an idle machine; waiting for quic-go took 5 ms
	// here and up to a second per close under a flood. The bound is loose
	// (other packages' tests may share the two cores): it catches a wait of
	// the flood's scale, and the figure above shows the rest.
	require.Less(t, kicks, 25*time.Millisecond, "the kicks waited for quic-go")
}
