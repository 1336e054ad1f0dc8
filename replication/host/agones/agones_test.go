package agones_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/replication/host"
	"github.com/archenet/archenet/replication/host/agones"
	"github.com/archenet/archenet/replication/host/agones/agonestest"
	"github.com/archenet/archenet/replication/schema"
	"github.com/archenet/archenet/transport/quic"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func registry() *schema.Registry {
	reg := schema.NewRegistry()
	schema.MustRegister[components.Transform](reg)
	return reg
}

// game is a match: one replicated entity, one tick per frame; a frame
// waits while block is set (a stalled match).
type game struct {
	srv   *replication.Server
	block atomic.Pointer[chan struct{}]
}

func (g *game) Frame(time.Time) {
	if b := g.block.Load(); b != nil {
		<-*b
	}
	g.srv.Receive()
	g.srv.Send()
}
func (g *game) Replication() *replication.Server { return g.srv }
func (g *game) Close()                           {}

func openGame(h *host.Host, reg *schema.Registry, name string, games *sync.Map) error {
	_, err := h.Open(name, host.MatchConfig{FrameRate: 30, Start: func(m *host.Match) (host.Game, error) {
		w := ecs.NewWorld()
		cfg := replication.ServerConfig{Registry: reg, Limits: replication.ServerLimits{MaxClientsPerAddress: -1}, Logger: quiet}
		m.Configure(&cfg)
		srv, err := replication.NewServer(&w, m.Listener(), cfg)
		if err != nil {
			return nil, err
		}
		e := w.NewEntity(ecs.ComponentID[components.Replicated](&w), ecs.ComponentID[components.Transform](&w))
		(*components.Transform)(w.Get(e, ecs.ComponentID[components.Transform](&w))).Rot = components.QuatIdentity()
		g := &game{srv: srv}
		if games != nil {
			games.Store(name, g)
		}
		return g, nil
	}})
	return err
}

// quicHost is a host on QUIC loopback with its dev certificate.
func quicHost(t *testing.T, cfg host.Config) (*host.Host, *quic.DevCert) {
	t.Setenv("QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING", "true")
	cert, err := quic.GenerateDevCert(time.Hour)
	require.NoError(t, err)
	l, err := quic.Listen("127.0.0.1:0", &quic.Config{TLS: cert.ServerTLS(), MaxPendingPerAddress: -1, Logger: quiet})
	require.NoError(t, err)
	cfg.Logger = quiet
	h, err := host.New(l, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	return h, cert
}

type player struct {
	c    *replication.Client
	conn *quic.Conn
}

func dial(t *testing.T, h *host.Host, cert *quic.DevCert, reg *schema.Registry, match string) *player {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := quic.Dial(ctx, h.Matches()[0].Listener().Addr().String(), &quic.Config{TLS: cert.ClientTLS(), Logger: quiet})
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	w := ecs.NewWorld()
	c, err := replication.NewClient(&w, conn, replication.ClientConfig{Registry: reg, Match: match, Logger: quiet})
	require.NoError(t, err)
	return &player{c: c, conn: conn}
}

// until polls cond every 5 ms, stepping the players, until it holds or
// 15 s pass.
func until(t *testing.T, what string, cond func() bool, players ...*player) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 15 s: %s", what)
		}
		for _, p := range players {
			p.c.Receive()
			p.c.Send()
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// observer records the GameServer states the sidecar's watch streams, as
// the orchestrator would see them.
type observer struct {
	mu     sync.Mutex
	states []string
}

func observe(t *testing.T, url string) *observer {
	o := &observer{}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/watch/gameserver", nil)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	go func() {
		defer resp.Body.Close()
		dec := json.NewDecoder(resp.Body)
		for {
			var line struct {
				Result agones.GameServer `json:"result"`
			}
			if dec.Decode(&line) != nil {
				return
			}
			o.mu.Lock()
			if st := line.Result.Status.State; len(o.states) == 0 || o.states[len(o.states)-1] != st {
				o.states = append(o.states, st)
			}
			o.mu.Unlock()
		}
	}()
	return o
}

func (o *observer) seen() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.states...)
}

func (o *observer) last() string {
	s := o.seen()
	if len(s) == 0 {
		return ""
	}
	return s[len(s)-1]
}

func call(t *testing.T, method, url, body string) string {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	return string(b)
}

const scheduled = `apiVersion: agones.dev/v1
kind: GameServer
metadata:
  name: archenet-test
spec:
  health:
    periodSeconds: 1
status:
  state: Scheduled
`

// TestAgonesLifecycle, against the real sidecar: the driver marks the
// GameServer Ready once the host admits; an allocation naming a match
// opens it; player counts follow joins and leaves; after the drain the
// GameServer is shut down — Scheduled → Ready → Allocated → Shutdown as
// /watch/gameserver shows it.
func TestAgonesLifecycle(t *testing.T) {
	sc := agonestest.Start(t, scheduled)
	obs := observe(t, sc.URL)
	until(t, "the watch's first state", func() bool { return obs.last() == "Scheduled" })
	reg := registry()
	d, err := agones.New(agones.Config{URL: sc.URL, HealthPeriod: 100 * time.Millisecond, Capacity: 8, MinBackoff: 20 * time.Millisecond,
		OpenMatch: func(h *host.Host, name string) error { return openGame(h, reg, name, nil) }, Logger: quiet})
	require.NoError(t, err)
	var hc host.Config
	d.Configure(&hc)
	h, cert := quicHost(t, hc)
	ran := make(chan error, 1)
	go func() { ran <- d.Run(context.Background(), h) }()
	until(t, "Ready", func() bool { return obs.last() == "Ready" })

	// The matchmaker allocates this server for match "duel" (labels first,
	// as an allocation's metadata comes with it).
	call(t, http.MethodPut, sc.URL+"/metadata/label", `{"key":"match","value":"duel"}`)
	call(t, http.MethodPost, sc.URL+"/allocate", `{}`)
	until(t, "Allocated and the match open", func() bool { _, ok := h.Match("duel"); return ok && obs.last() == "Allocated" })

	p1, p2 := dial(t, h, cert, reg, "duel"), dial(t, h, cert, reg, "duel")
	players := func() string { return call(t, http.MethodGet, sc.URL+"/alpha/player/connected", "") }
	until(t, "two players connected", func() bool { return p1.c.Ready() && p2.c.Ready() && strings.Contains(players(), `"duel/2"`) }, p1, p2)
	require.JSONEq(t, `{"list":["duel/1","duel/2"]}`, players())
	require.JSONEq(t, `{"count":"2"}`, call(t, http.MethodGet, sc.URL+"/alpha/player/count", ""))
	p1.c.Close() // (the player leaves: a lost connection would keep its seat)
	until(t, "one player left", func() bool { return strings.Contains(call(t, http.MethodGet, sc.URL+"/alpha/player/count", ""), `"1"`) }, p2)
	// (the two handshakes may end in either order: p2 is duel/1 or duel/2)
	require.JSONEq(t, fmt.Sprintf(`{"list":["duel/%d"]}`, p2.c.ID()), players())

	h.Drain("test over", time.Now().Add(10*time.Second))
	until(t, "the drain notice", func() bool { _, ok := p2.c.Draining(); return ok }, p2)
	p2.c.Close()
	until(t, "Shutdown", func() bool { return obs.last() == "Shutdown" })
	require.NoError(t, <-ran)
	require.Equal(t, []string{"Scheduled", "Ready", "Allocated", "Shutdown"}, obs.seen())
	require.JSONEq(t, `{"count":"0"}`, call(t, http.MethodGet, sc.URL+"/alpha/player/count", ""))
	st := d.Stats()
	require.Equal(t, uint64(1), st.Ready)
	require.Equal(t, uint64(1), st.Opened)
	require.Equal(t, uint64(4), st.Players)
	require.True(t, st.Shutdown)
	require.Positive(t, sc.Count("Health Ping Received!"))
}

// TestAgonesHealthStopsWhenStalled, against the real sidecar, with
// host.Config.KeepStalled: health pings arrive at the period while every
// match's frame advances, stop while one is stuck (the sidecar sees none),
// and resume when it moves again.
func TestAgonesHealthStopsWhenStalled(t *testing.T) {
	sc := agonestest.Start(t, "")
	reg := registry()
	// (Half a second: a busy machine can hold up a match that is not stuck
	// for a good part of that; b is stuck for as long as the test wants.)
	h, _ := quicHost(t, host.Config{StallAfter: 500 * time.Millisecond, KeepStalled: true})
	var games sync.Map
	require.NoError(t, openGame(h, reg, "a", &games))
	require.NoError(t, openGame(h, reg, "b", &games))
	d, err := agones.New(agones.Config{URL: sc.URL, HealthPeriod: 50 * time.Millisecond, Logger: quiet})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- d.Run(ctx, h) }()
	defer func() { cancel(); <-ran }()
	const ping = "Health Ping Received!"
	until(t, "pings", func() bool { return sc.Count(ping) >= 5 })

	g, _ := games.Load("b")
	unblock := make(chan struct{})
	g.(*game).block.Store(&unblock)
	until(t, "the stall seen", func() bool { return d.Stats().Skipped >= 2 })
	at := sc.Count(ping)
	skipped := d.Stats().Skipped
	until(t, "more periods", func() bool { return d.Stats().Skipped >= skipped+6 })
	require.Equal(t, at, sc.Count(ping), "a ping reached the sidecar while a match was stalled")
	require.ErrorContains(t, h.Live(), "b (no frame done for")

	g.(*game).block.Store(nil)
	close(unblock)
	until(t, "pings again", func() bool { return sc.Count(ping) >= at+3 })
	require.NoError(t, h.Live())
	t.Logf("pings %d, skipped while stalled %d", d.Stats().Pings, d.Stats().Skipped)
}

// TestWatchReconnects: a watch stream that ends is opened again (with
// backoff), and a match named by an allocation is opened once.
func TestWatchReconnects(t *testing.T) {
	var streams atomic.Int32
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/watch/gameserver":
			streams.Add(1)
			fmt.Fprintln(w, `{"result":{"object_meta":{"labels":{"agones.dev/sdk-match":"m1"}},"status":{"state":"Allocated"}}}`)
		default:
			fmt.Fprint(w, `{}`)
		}
	}))
	defer fake.Close()
	var opened []string
	var mu sync.Mutex
	d, err := agones.New(agones.Config{URL: fake.URL, HealthPeriod: time.Hour, MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, Logger: quiet,
		OpenMatch: func(_ *host.Host, name string) error {
			mu.Lock()
			opened = append(opened, name)
			mu.Unlock()
			return nil
		}})
	require.NoError(t, err)
	h, _ := quicHost(t, host.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- d.Run(ctx, h) }()
	until(t, "three streams", func() bool { return streams.Load() >= 3 })
	cancel()
	require.ErrorIs(t, <-ran, context.Canceled)
	require.GreaterOrEqual(t, d.Stats().Reconnects, uint64(2))
	require.Equal(t, []string{"m1"}, opened)
	require.Equal(t, "Allocated", d.State())
}

func TestConfigErrors(t *testing.T) {
	for name, cfg := range map[string]agones.Config{
		"url":      {URL: "localhost:9358"},
		"negative": {HealthPeriod: -1},
		"backoff":  {MinBackoff: time.Second, MaxBackoff: time.Millisecond},
	} {
		_, err := agones.New(cfg)
		require.Error(t, err, name)
	}
	t.Setenv("AGONES_SDK_HTTP_PORT", "nope")
	_, err := agones.New(agones.Config{})
	require.Error(t, err)
}
