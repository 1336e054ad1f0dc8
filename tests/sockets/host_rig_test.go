package sockets_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/replication/host"
	"github.com/archenet/archenet/replication/schema"
	"github.com/archenet/archenet/tests/internal/harness"
	"github.com/archenet/archenet/transport/quic"
	"github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/require"
)

// sceneGame is a hosted match: movers wandering, one net tick per frame;
// its frame times are recorded while measuring is set. slow burns that
// much CPU in every frame (a slow game tick).
type sceneGame struct {
	world     *ecs.World
	srv       *replication.Server
	ents      []ecs.Entity
	rng       *rand.Rand
	slow      atomic.Int64 // nanoseconds
	measuring *atomic.Bool

	mu     sync.Mutex
	frames []time.Duration
}

func (g *sceneGame) Frame(time.Time) {
	t0 := time.Now()
	g.srv.Receive()
	id := ecs.ComponentID[components.Transform](g.world)
	for i, e := range g.ents {
		if i%4 == 0 {
			tr := (*components.Transform)(g.world.Get(e, id))
			tr.Pos.X += g.rng.Float64() - 0.5
			tr.Pos.Z += g.rng.Float64() - 0.5
		}
	}
	for slow := time.Duration(g.slow.Load()); time.Since(t0) < slow; {
	}
	g.srv.Send()
	if g.measuring.Load() {
		g.mu.Lock()
		g.frames = append(g.frames, time.Since(t0))
		g.mu.Unlock()
	}
}

func (g *sceneGame) Replication() *replication.Server { return g.srv }

func (g *sceneGame) Close() {}

// rigTimeout is the liveness timeout of the rig's servers and good clients.
const rigTimeout = time.Minute

// hostRig is a host on QUIC loopback whose matches' clients are stepped at
// the net rate on a goroutine of their own.
type hostRig struct {
	t         *testing.T
	reg       *schema.Registry
	cert      *quic.DevCert
	h         *host.Host
	l         *quic.Listener
	addr      string
	measuring atomic.Bool
	games     map[string]*sceneGame

	mu      sync.Mutex
	clients []*replication.Client
	ready   atomic.Int32
	closed  atomic.Int32
	stop    chan struct{}
	stepped sync.WaitGroup
}

// newHostRig returns a host rig whose listener has no bounds per address or
// rate (its tests are about what gets past them).
func newHostRig(t *testing.T, cfg host.Config) *hostRig {
	return newHostRigOn(t, cfg, quic.Config{MaxPendingPerAddress: -1, NewConnectionRate: -1})
}

// newHostRigOn is newHostRig on a listener configured as lcfg (its
// certificate and logger set).
func newHostRigOn(t *testing.T, cfg host.Config, lcfg quic.Config) *hostRig {
	t.Setenv("QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING", "true")
	cert, err := quic.GenerateDevCert(time.Hour)
	require.NoError(t, err)
	lcfg.TLS, lcfg.Logger = cert.ServerTLS(), harness.Quiet
	l, err := quic.Listen("127.0.0.1:0", &lcfg)
	require.NoError(t, err)
	cfg.Logger = harness.Quiet
	h, err := host.New(l, cfg)
	require.NoError(t, err)
	r := &hostRig{t: t, reg: harness.NewRegistry(), cert: cert, h: h, l: l, addr: l.Addr().String(), games: map[string]*sceneGame{}, stop: make(chan struct{})}
	r.stepped.Add(1)
	go r.stepClients()
	t.Cleanup(func() {
		close(r.stop)
		r.stepped.Wait()
		_ = h.Close()
	})
	return r
}

func (r *hostRig) open(name string, movers int, seed uint64) {
	_, err := r.h.Open(name, host.MatchConfig{FrameRate: harness.NetRate, Start: func(m *host.Match) (host.Game, error) {
		w := ecs.NewWorld()
		// (The tests on this rig are about isolation; liveness has its own,
		// in tests/sim and dead_peers_test.go. Under the race detector beside
		// other work a match's frame can take seconds: no good client is to
		// be dropped by a timeout meant for dead peers.)
		cfg := replication.ServerConfig{Registry: r.reg, NetRate: harness.NetRate, Logger: harness.Quiet,
			Limits: replication.ServerLimits{MaxClientsPerAddress: -1, JoinTimeout: rigTimeout, ClientTimeout: rigTimeout}}
		m.Configure(&cfg)
		srv, err := replication.NewServer(&w, m.Listener(), cfg)
		if err != nil {
			return nil, err
		}
		g := &sceneGame{world: &w, srv: srv, rng: rand.New(rand.NewPCG(seed, 1)), measuring: &r.measuring}
		idR, idT := ecs.ComponentID[components.Replicated](&w), ecs.ComponentID[components.Transform](&w)
		for range movers {
			e := w.NewEntity(idR, idT)
			tr := (*components.Transform)(w.Get(e, idT))
			tr.Pos = components.Vec3{X: g.rng.Float64() * 100, Z: g.rng.Float64() * 100}
			tr.Rot = components.QuatIdentity()
			g.ents = append(g.ents, e)
		}
		r.games[m.Name()] = g
		return g, nil
	}})
	require.NoError(r.t, err)
}

// join dials a client into match (or with a connect token).
func (r *hostRig) join(match string, tok []byte) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := quic.Dial(ctx, r.addr, &quic.Config{TLS: r.cert.ClientTLS(), Logger: harness.Quiet})
	require.NoError(r.t, err)
	r.t.Cleanup(func() { _ = conn.Close() })
	w := ecs.NewWorld()
	c, err := replication.NewClient(&w, conn, replication.ClientConfig{Registry: r.reg, Match: match, Token: tok, Logger: harness.Quiet, Timeout: rigTimeout})
	require.NoError(r.t, err)
	r.mu.Lock()
	r.clients = append(r.clients, c)
	r.mu.Unlock()
}

// closedWhy lists the closed clients' errors.
func (r *hostRig) closedWhy() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var why []string
	for _, c := range r.clients {
		if c.State() == replication.StateClosed {
			why = append(why, fmt.Sprint(c.Err()))
		}
	}
	return why
}

// stepClients runs every client at the net rate and counts the ready and
// the closed ones.
func (r *hostRig) stepClients() {
	defer r.stepped.Done()
	t := time.NewTicker(harness.TickDt)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		r.mu.Lock()
		ready, closed := 0, 0
		for _, c := range r.clients {
			c.Receive()
			c.Send()
			if c.Ready() {
				ready++
			}
			if c.State() == replication.StateClosed {
				closed++
			}
		}
		r.mu.Unlock()
		r.ready.Store(int32(ready))
		r.closed.Store(int32(closed))
	}
}

func (r *hostRig) until(what string, limit time.Duration, cond func() bool) {
	r.t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			r.t.Fatalf("not within %v: %s", limit, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// measure records every match's frames for d and returns the frame times
// of the named matches, pooled, with each one's p99.
func (r *hostRig) measure(d time.Duration, names []string) (all []time.Duration, p99s []time.Duration) {
	for _, g := range r.games {
		g.mu.Lock()
		g.frames = g.frames[:0]
		g.mu.Unlock()
	}
	r.measuring.Store(true)
	time.Sleep(d) // (a measurement window, not a wait for an event)
	r.measuring.Store(false)
	for _, n := range names {
		g := r.games[n]
		g.mu.Lock()
		all = append(all, g.frames...)
		p99s = append(p99s, pct(g.frames, 99))
		g.mu.Unlock()
	}
	return all, p99s
}

// pct returns the p-th percentile (nearest rank) of ds.
func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[(len(s)*p+99)/100-1]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }

// phases measures the named matches' frames in rounds of two windows of
// d, one quiet and one troubled (trouble(true) before the troubled one,
// trouble(false) after it): interleaved, quiet first in even rounds and
// troubled first in odd ones, so that the machine's other load, and a load
// that grows or falls through the test, falls on both alike. It returns
// each kind's frames pooled, and the median over its windows of each
// window's p99: a stall of the whole machine that hits a window or two
// moves the pooled p99 but not that.
func (r *hostRig) phases(rounds int, d time.Duration, names []string, trouble func(on bool)) (quiet, troubled []time.Duration, quietP99, troubledP99 time.Duration) {
	var qs, ts []time.Duration
	for i := range rounds {
		for _, on := range [][2]bool{{false, true}, {true, false}}[i%2] {
			if on {
				trouble(true)
			}
			frames, _ := r.measure(d, names)
			if on {
				trouble(false)
				troubled, ts = append(troubled, frames...), append(ts, pct(frames, 99))
			} else {
				quiet, qs = append(quiet, frames...), append(qs, pct(frames, 99))
			}
		}
	}
	return quiet, troubled, pct(qs, 50), pct(ts, 50)
}

func mean(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	var s time.Duration
	for _, d := range ds {
		s += d
	}
	return s / time.Duration(len(ds))
}
