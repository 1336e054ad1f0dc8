package sockets_test

import (
	"context"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/tests/internal/harness"
	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/quic"
	"github.com/archenet/archenet/transport/websocket"
	"github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/require"
)

// A match that QUIC and WebSocket clients join through one merged listener:
// both converge while the world moves and spawns, and their game messages
// (a reliable and an unreliable one each tick) reach them.
func TestWebSocketBesideQUIC(t *testing.T) {
	h, cert, ql, wl := mixedMatch(t)
	hits, err := replication.ServerMessages[harness.Hit](h.Server)
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	qc, err := quic.Dial(ctx, ql.Addr().String(), &quic.Config{TLS: cert.ClientTLS(), Logger: harness.Quiet})
	require.NoError(t, err)
	wc, err := websocket.Dial(ctx, wl.URL(""), &websocket.Config{Logger: harness.Quiet})
	require.NoError(t, err)
	got := make([]map[bool]int, 2)
	for i, conn := range []transport.Conn{qc, wc} {
		w := ecs.NewWorld()
		c, err := replication.NewClient(&w, conn, replication.ClientConfig{Registry: h.Registry, Logger: harness.Quiet})
		require.NoError(t, err)
		h.Clients = append(h.Clients, &harness.ClientSide{World: &w, Client: c})
		ep, err := replication.ClientMessages[harness.Hit](c)
		require.NoError(t, err)
		got[i] = map[bool]int{}
		ep.Handle(func(m replication.Message[harness.Hit]) { got[i][m.Value.Damage == 1]++ })
	}
	rng := rand.New(rand.NewPCG(5, 5))
	var ents []ecs.Entity
	for range 100 {
		ents = append(ents, h.Spawn(0, components.Vec3{X: rng.Float64() * 50}))
	}
	step := func() {
		h.Server.Receive()
		if h.Game != nil {
			h.Game(0)
		}
		h.Server.Send()
		time.Sleep(2 * time.Millisecond)
		for _, c := range h.Clients {
			c.Client.Receive()
			c.Client.Send()
		}
	}
	until := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			require.NoError(t, ctx.Err(), "waiting for %s", what)
			step()
		}
	}
	until("clients ready", func() bool { return h.Clients[0].Client.Ready() && h.Clients[1].Client.Ready() })
	sent := 0
	h.Game = func(int) {
		for i := range 20 {
			*h.Pos(ents[(sent*20+i)%len(ents)]) = components.Vec3{X: rng.Float64() * 50, Z: rng.Float64() * 50}
		}
		if sent%10 == 0 {
			h.World.RemoveEntity(ents[0])
			ents = append(ents[1:], h.Spawn(0, components.Vec3{}))
		}
		require.NoError(t, hits.Broadcast(harness.Hit{Damage: 1}, replication.Reliable))
		require.NoError(t, hits.Broadcast(harness.Hit{Damage: 2}, replication.Unreliable))
		sent++
	}
	for range 120 {
		step()
	}
	h.Game = nil
	until("convergence", func() bool { return h.Converged(0, nil) == nil && h.Converged(1, nil) == nil })
	for i, name := range []string{"QUIC", "WebSocket"} {
		t.Logf("%s client: %d reliable, %d unreliable of %d; %d bytes in", name, got[i][true], got[i][false], sent, h.Clients[i].Client.Stats.BytesIn)
		require.Equal(t, sent, got[i][true], "%s: every reliable message", name)
		require.Greater(t, got[i][false], sent/2, "%s: unreliable messages on loopback", name)
	}
}

// mixedMatch is a harness whose replication server (closed at the test's
// end) takes QUIC and WebSocket clients on loopback through one merged
// listener; the clients are the test's to dial.
func mixedMatch(t *testing.T) (*harness.Harness, *quic.DevCert, *quic.Listener, *websocket.Listener) {
	t.Setenv("QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING", "true")
	cert, err := quic.GenerateDevCert(time.Hour)
	require.NoError(t, err)
	ql, err := quic.Listen("127.0.0.1:0", &quic.Config{TLS: cert.ServerTLS(), Logger: harness.Quiet})
	require.NoError(t, err)
	wl, err := websocket.Listen("127.0.0.1:0", &websocket.Config{Logger: harness.Quiet})
	require.NoError(t, err)
	h := &harness.Harness{T: t, Registry: harness.NewRegistry()}
	sw := ecs.NewWorld()
	h.World = &sw
	h.Server, err = replication.NewServer(h.World, transport.MergeListeners(ql, wl), replication.ServerConfig{Registry: h.Registry, NetRate: harness.NetRate, Logger: harness.Quiet})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Server.Close() })
	return h, cert, ql, wl
}

// A flood of WebSocket connections that never say Hello, from one source
// and beyond the server's bounds, is refused before the upgrade with a
// reason that says which bound; a player already in the match keeps
// playing, and a new one still gets in once the flood stops.
func TestWebSocketConnectionFlood(t *testing.T) {
	wl, err := websocket.Listen("127.0.0.1:0", &websocket.Config{Logger: harness.Quiet, NewConnectionRatePerAddress: -1, MaxPendingPerAddress: 64})
	require.NoError(t, err)
	h := &harness.Harness{T: t, Registry: harness.NewRegistry()}
	sw := ecs.NewWorld()
	h.World = &sw
	srv, err := replication.NewServer(h.World, wl, replication.ServerConfig{Registry: h.Registry, NetRate: harness.NetRate, Logger: harness.Quiet})
	require.NoError(t, err)
	defer srv.Close()
	h.Server = srv
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dialClient := func() *harness.ClientSide {
		conn, err := websocket.Dial(ctx, wl.URL(""), &websocket.Config{Logger: harness.Quiet})
		require.NoError(t, err)
		w := ecs.NewWorld()
		c, err := replication.NewClient(&w, conn, replication.ClientConfig{Registry: h.Registry, Logger: harness.Quiet})
		require.NoError(t, err)
		cs := &harness.ClientSide{World: &w, Client: c}
		h.Clients = append(h.Clients, cs)
		return cs
	}
	player := dialClient()
	e := h.Spawn(0, components.Vec3{})
	var stop sync.WaitGroup
	quit := make(chan struct{})
	stop.Add(1)
	go func() { // the match runs meanwhile
		defer stop.Done()
		for {
			select {
			case <-quit:
				return
			default:
			}
			h.Server.Receive()
			h.Pos(e).X += 0.01
			h.Server.Send()
			time.Sleep(2 * time.Millisecond)
			for _, c := range h.Clients {
				c.Client.Receive()
				c.Client.Send()
			}
		}
	}()
	// The flood: 2,000 upgrade requests, 32 at a time; each held open.
	const n, par = 2000, 32
	statuses := map[int]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, par)
	client := &http.Client{Timeout: 10 * time.Second}
	for range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http"+wl.URL("")[2:], nil)
			req.Header.Set("Connection", "Upgrade")
			req.Header.Set("Upgrade", "websocket")
			req.Header.Set("Sec-WebSocket-Version", "13")
			req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
			rsp, err := client.Do(req)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				statuses[-1]++
				return
			}
			statuses[rsp.StatusCode]++
			if rsp.StatusCode != http.StatusSwitchingProtocols {
				_ = rsp.Body.Close()
			} // (an upgraded one is held open: a silent peer)
		}()
	}
	wg.Wait()
	refused := wl.Refused()
	t.Logf("flood of %d: statuses %v; refused %+v", n, statuses, refused)
	require.LessOrEqual(t, refused.PendingMax, 64, "at most MaxPendingPerAddress silent peers are held at once")
	require.Positive(t, refused.PerAddress+refused.Busy+refused.Rate)
	close(quit)
	stop.Wait()
	require.True(t, player.Client.Ready(), "the player kept playing: %v", player.Client.Err())
	require.Equal(t, replication.StateReady, player.Client.State())
}
