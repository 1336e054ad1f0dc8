package sockets_test

import (
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
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

// A flood of 10,000 WebSocket connections that never say Hello, from one
// source and beyond the server's bounds, is refused before the upgrade with a
// reason that says which bound; the match's tick takes as long as it did
// before the flood (a generous bound: the flood shares the 2 cores), a player
// already in the match keeps getting snapshots, and stays ready.
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
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
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
	// The match runs meanwhile: each tick's Receive + Send is timed, with the
	// flood (during) and without it (before), and the player's snapshot gaps.
	var mu sync.Mutex
	var before, during []time.Duration
	flooding := false
	var lastSnap time.Time
	var maxGap time.Duration
	player.Client.OnSnapshot(func(uint32, time.Time) {
		now := time.Now()
		mu.Lock()
		if flooding && !lastSnap.IsZero() {
			maxGap = max(maxGap, now.Sub(lastSnap))
		}
		lastSnap = now
		mu.Unlock()
	})
	var stop sync.WaitGroup
	quit := make(chan struct{})
	baseline := make(chan struct{})
	stop.Add(1)
	go func() {
		defer stop.Done()
		for i := 0; ; i++ {
			select {
			case <-quit:
				return
			default:
			}
			t0 := time.Now()
			h.Server.Receive()
			h.Pos(e).X += 0.01
			h.Server.Send()
			d := time.Since(t0)
			mu.Lock()
			if flooding {
				during = append(during, d)
			} else if len(before) < 200 {
				if before = append(before, d); len(before) == 200 {
					close(baseline)
				}
			}
			mu.Unlock()
			time.Sleep(2 * time.Millisecond)
			for _, c := range h.Clients {
				c.Client.Receive()
				c.Client.Send()
			}
		}
	}()
	<-baseline
	mu.Lock()
	flooding = true
	mu.Unlock()
	// The flood: 10,000 upgrade requests on new connections, 32 at a time;
	// each upgraded one is held open, silent.
	const n, par = 10000, 32
	statuses, reasons := map[int]int{}, map[string]int{}
	var wg sync.WaitGroup
	sem := make(chan struct{}, par)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	start := time.Now()
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
			if err != nil {
				mu.Lock()
				statuses[-1]++
				mu.Unlock()
				return
			}
			var why []byte
			if rsp.StatusCode != http.StatusSwitchingProtocols {
				why, _ = io.ReadAll(io.LimitReader(rsp.Body, 512))
				_ = rsp.Body.Close()
			} // (an upgraded one is held open: a silent peer)
			mu.Lock()
			defer mu.Unlock()
			statuses[rsp.StatusCode]++
			if len(why) > 0 {
				reasons[strings.TrimSpace(string(why))]++
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	mu.Lock()
	flooding = false
	slices.Sort(before)
	slices.Sort(during)
	pct := func(d []time.Duration, p float64) time.Duration { return d[min(len(d)-1, int(p*float64(len(d))))] }
	refused := wl.Refused()
	t.Logf("flood of %d in %v: statuses %v; refused %+v; reasons %v", n, took.Round(time.Millisecond), statuses, refused, reasons)
	t.Logf("tick (Receive + Send): before p50 %v p99 %v; during (%d ticks) p50 %v p99 %v max %v; the player's longest snapshot gap during it %v",
		pct(before, 0.5), pct(before, 0.99), len(during), pct(during, 0.5), pct(during, 0.99), during[len(during)-1], maxGap.Round(time.Millisecond))
	require.Zero(t, statuses[-1], "every request got an answer")
	require.Equal(t, n, statuses[http.StatusSwitchingProtocols]+statuses[http.StatusServiceUnavailable], "upgraded or refused as busy: %v", statuses)
	for why := range reasons {
		require.Regexp(t, `new connections a second|not yet welcomed \(64\)`, why, "a refusal names its bound")
	}
	require.LessOrEqual(t, refused.PendingMax, 64, "at most MaxPendingPerAddress silent peers are held at once")
	require.Positive(t, refused.PerAddress+refused.Busy+refused.Rate)
	// The tick waits on no connection: a generous bound against the same
	// run's baseline (the flood and the tick share 2 cores).
	require.Less(t, pct(during, 0.5), 10*pct(before, 0.5)+5*time.Millisecond, "the tick's median")
	require.Less(t, maxGap, time.Second, "the player kept getting snapshots")
	mu.Unlock()
	close(quit)
	stop.Wait()
	require.True(t, player.Client.Ready(), "the player kept playing: %v", player.Client.Err())
	require.Equal(t, replication.StateReady, player.Client.State())
}
