package host

import (
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/replication/schema"
	"github.com/archenet/archenet/transport/sim"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

const frameDt = time.Second / 30

func testRegistry() *schema.Registry {
	reg := schema.NewRegistry()
	schema.MustRegister[components.Transform](reg)
	return reg
}

// testGame is a match's game: one replicated entity per match, placed at
// x = its index, moved along z every frame; panicAt > 0 panics in that
// frame.
type testGame struct {
	world   *ecs.World
	srv     *replication.Server
	e       ecs.Entity
	frames  int
	panicAt int
	block   atomic.Pointer[chan struct{}] // if set, Frame waits on it
	paused  atomic.Bool                   // if set, Frame does nothing
	closed  atomic.Bool
}

func (g *testGame) Frame(now time.Time) {
	g.frames++
	if g.paused.Load() {
		return
	}
	if b := g.block.Load(); b != nil {
		<-*b
	}
	g.srv.Receive()
	if g.frames == g.panicAt {
		panic("boom")
	}
	tr := (*components.Transform)(g.world.Get(g.e, ecs.ComponentID[components.Transform](g.world)))
	tr.Pos.Z = float64(g.frames) / 10
	g.srv.Send()
}

func (g *testGame) Replication() *replication.Server { return g.srv }
func (g *testGame) Close()                           { g.closed.Store(true) }

// startGame is a MatchConfig.Start for a testGame whose entity sits at x.
func startGame(reg *schema.Registry, x float64, games map[string]*testGame) func(m *Match) (Game, error) {
	return func(m *Match) (Game, error) {
		w := ecs.NewWorld()
		g := &testGame{world: &w}
		cfg := replication.ServerConfig{Registry: reg, NetRate: 30, Limits: replication.ServerLimits{MaxClientsPerAddress: -1}}
		m.Configure(&cfg)
		srv, err := replication.NewServer(&w, m.Listener(), cfg)
		if err != nil {
			return nil, err
		}
		g.srv = srv
		idR, idT := ecs.ComponentID[components.Replicated](&w), ecs.ComponentID[components.Transform](&w)
		g.e = w.NewEntity(idR, idT)
		tr := (*components.Transform)(w.Get(g.e, idT))
		tr.Pos.X, tr.Rot = x, components.QuatIdentity()
		if games != nil {
			games[m.Name()] = g
		}
		return g, nil
	}
}

// rig is a Manual host over a simulated network, with clients stepped in
// the same loop.
type rig struct {
	t       *testing.T
	net     *sim.Network
	reg     *schema.Registry
	h       *Host
	games   map[string]*testGame
	clients []*testClient
	events  []PlayerEvent
}

type testClient struct {
	c    *replication.Client
	w    *ecs.World
	conn *sim.Conn
}

func newRig(t *testing.T, tweak func(*Config)) *rig {
	r := &rig{t: t, net: sim.NewNetwork(1, time.Unix(1_800_000_000, 0)), reg: testRegistry(), games: map[string]*testGame{}}
	cfg := Config{Manual: true, Now: r.net.Now, Logger: quiet, OnPlayer: func(e PlayerEvent) { r.events = append(r.events, e) }}
	if tweak != nil {
		tweak(&cfg)
	}
	h, err := New(r.net.Listen("host"), cfg)
	require.NoError(t, err)
	r.h = h
	t.Cleanup(func() { _ = h.Close() })
	return r
}

func (r *rig) open(name string, x float64) *Match {
	m, err := r.h.Open(name, MatchConfig{Start: startGame(r.reg, x, r.games), FrameRate: 30})
	require.NoError(r.t, err)
	return m
}

func (r *rig) dial(tweak func(*replication.ClientConfig)) *testClient {
	conn, err := r.net.Dial("host", sim.Link{})
	require.NoError(r.t, err)
	w := ecs.NewWorld()
	cfg := replication.ClientConfig{Registry: r.reg, Now: r.net.Now, Logger: quiet}
	if tweak != nil {
		tweak(&cfg)
	}
	c, err := replication.NewClient(&w, conn, cfg)
	require.NoError(r.t, err)
	tc := &testClient{c: c, w: &w, conn: conn}
	r.clients = append(r.clients, tc)
	return tc
}

func (r *rig) step() {
	r.h.Step()
	r.net.Advance(frameDt)
	for _, c := range r.clients {
		c.c.Receive()
		c.c.Send()
	}
}

func (r *rig) run(n int) {
	for range n {
		r.step()
	}
}

// x returns the x of the one entity client c mirrors (NaN if none).
func (c *testClient) x() float64 {
	q := c.w.Query(ecs.All(ecs.ComponentID[components.Transform](c.w)))
	x := -1.0
	for q.Next() {
		x = (*components.Transform)(q.Get(ecs.ComponentID[components.Transform](c.w))).Pos.X
	}
	return x
}

type simConn = sim.Conn

func simLink() sim.Link { return sim.Link{} }
