//go:build !js

package loopback

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/tests/internal/harness"
	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/quic"
	"github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/require"
)

// Rig runs a replication server over real QUIC on 127.0.0.1 at the net
// rate in real time, with clients stepped in the same loop, and records how
// long each server tick (Receive, game, Send) took: the figure the isolation
// tests check. While a game runs, a probe entity (top priority) moves by
// 1 m every tick, so how far a client's mirror of it lags tells in ticks how
// current that client is.
//
// Beside the server under test runs a control (Control): a second server
// that replicates the same world over the same kind of transport to well-
// behaved clients only, stepped and timed in the same loop. A loaded machine
// slows both alike; a server that waits on a misbehaving peer is slower than
// its control. RequireTicks and RequireKeptUp compare the two.
type Rig struct {
	*harness.Harness
	Cert  *quic.DevCert
	QUIC  *quic.Listener
	Ticks []time.Duration // every server tick's duration, in order
	// Stepped is when the last step began (its clients sent in it).
	Stepped time.Time
	// LongestGap is the longest time between two steps of RunFor (the test
	// may reset it): beyond harness.TickDt it is how long this process was
	// starved of the processor, which a bound in real time must allow for.
	LongestGap time.Duration
	Probe      ecs.Entity
	// ClientTimeout is ClientConfig.Timeout of dialled clients (0: default).
	ClientTimeout time.Duration
	LagMax        map[int]int  // client index → worst probe lag seen, in ticks
	Good          []int        // clients whose lag is tracked
	Active        map[int]bool // clients stepped
	Control       *Control
	mu            sync.Mutex
	events        []error // OnDisconnect reasons
}

// NewQUIC returns a rig on a QUIC listener (lcfg, with a development
// certificate) whose server's configuration tweak adjusts (if not nil).
func NewQUIC(t *testing.T, lcfg quic.Config, tweak func(*replication.ServerConfig)) *Rig {
	t.Setenv("QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING", "true")
	cert, err := quic.GenerateDevCert(time.Hour)
	require.NoError(t, err)
	lcfg.TLS = cert.ServerTLS()
	lcfg.Logger = harness.Quiet
	l, err := quic.Listen("127.0.0.1:0", &lcfg)
	require.NoError(t, err)
	r := newRig(t, l, tweak)
	r.Cert, r.QUIC = cert, l
	r.startQUICControl()
	return r
}

// newRig starts a rig's server on l.
func newRig(t *testing.T, l transport.Listener, tweak func(*replication.ServerConfig)) *Rig {
	r := &Rig{Harness: &harness.Harness{T: t, Registry: harness.NewRegistry()}, LagMax: map[int]int{}, Active: map[int]bool{}}
	sw := ecs.NewWorld()
	r.World = &sw
	// (Every client of these tests connects from 127.0.0.1. Liveness
	// timeouts of a minute: a test that is about them sets its own in
	// tweak; the others must not drop a good client that a busy machine
	// starved for a few seconds.)
	cfg := replication.ServerConfig{Registry: r.Registry, NetRate: harness.NetRate, Logger: harness.Quiet, Limits: Limits,
		OnDisconnect: func(_ replication.ClientID, err error) {
			r.mu.Lock()
			r.events = append(r.events, err)
			r.mu.Unlock()
		}}
	cfg.OnSuspend = cfg.OnDisconnect // (a lost connection keeps its seat: the server noticed)
	if tweak != nil {
		tweak(&cfg)
	}
	srv, err := replication.NewServer(r.World, l, cfg)
	require.NoError(t, err)
	r.Server = srv
	t.Cleanup(func() { srv.Close() })
	r.Probe = r.Spawn(0, components.Vec3{})
	// The probe goes first whenever a budget cannot carry every change, so
	// its lag measures delivery, not the choice of what to send.
	(*components.Replicated)(r.World.Get(r.Probe, ecs.ComponentID[components.Replicated](r.World))).Priority = 1e6
	return r
}

// Events returns the reasons of the server's disconnects so far
// (ServerConfig.OnDisconnect, and OnSuspend: a lost connection keeps its
// seat).
func (r *Rig) Events() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// Dial connects a replication client to addr (the server's, or a proxy's).
func (r *Rig) Dial(addr string, token string) int {
	conn := r.dialQUIC(addr)
	w := ecs.NewWorld()
	c, err := replication.NewClient(&w, conn, replication.ClientConfig{Registry: r.Registry, Logger: harness.Quiet, Token: []byte(token), Timeout: r.ClientTimeout})
	require.NoError(r.T, err)
	r.Clients = append(r.Clients, &harness.ClientSide{World: &w, Client: c})
	i := len(r.Clients) - 1
	r.Active[i] = true
	return i
}

// dialQUIC opens a QUIC connection to addr, closed at the test's end.
func (r *Rig) dialQUIC(addr string) *quic.Conn {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := quic.Dial(ctx, addr, &quic.Config{TLS: r.Cert.ClientTLS(), Logger: harness.Quiet})
	require.NoError(r.T, err)
	r.T.Cleanup(func() { _ = conn.Close() })
	return conn
}

// Step runs one net tick: the timed server tick, then every active client.
func (r *Rig) Step() {
	r.Tick++
	start := time.Now()
	r.Stepped = start
	r.Server.Receive()
	if r.Game != nil {
		r.Pos(r.Probe).X = float64(r.Tick)
		r.Game(r.Tick)
	}
	r.Server.Send()
	r.Ticks = append(r.Ticks, time.Since(start))
	if c := r.Control; c != nil {
		start = time.Now()
		c.Server.Receive()
		c.Server.Send()
		c.Ticks = append(c.Ticks, time.Since(start))
	}
	for i, c := range r.Clients {
		if r.Active[i] {
			c.Client.Receive()
			c.Client.Send()
		}
	}
	for _, i := range r.Good {
		if lag, ok := r.ProbeLag(i); ok {
			r.LagMax[i] = max(r.LagMax[i], lag)
		}
	}
	if c := r.Control; c != nil {
		for _, cs := range c.Clients {
			cs.Client.Receive()
			cs.Client.Send()
			if lag, ok := r.lag(c.Server, cs); ok {
				c.LagMax = max(c.LagMax, lag)
			}
		}
	}
}

// ProbeLag is how many ticks client i's mirror of the probe is behind.
func (r *Rig) ProbeLag(i int) (int, bool) { return r.lag(r.Server, r.Clients[i]) }

// lag is how many ticks cs's mirror of the probe (served by srv) is behind.
func (r *Rig) lag(srv *replication.Server, cs *harness.ClientSide) (int, bool) {
	id, ok := srv.NetID(r.Probe)
	if !ok {
		return 0, false
	}
	e, ok := cs.Client.Entity(id)
	if !ok {
		return 0, false
	}
	x := (*components.Transform)(cs.World.Get(e, ecs.ComponentID[components.Transform](cs.World))).Pos.X
	sx := r.Pos(r.Probe).X
	return int(sx - x + 0.5), true
}

// RunFor steps at the net rate, in real time, for d (or until stop holds).
func (r *Rig) RunFor(d time.Duration, stop func() bool) {
	tk := time.NewTicker(harness.TickDt)
	defer tk.Stop()
	last := time.Now()
	for end := last.Add(d); time.Now().Before(end); {
		<-tk.C
		now := time.Now()
		r.LongestGap = max(r.LongestGap, now.Sub(last))
		last = now
		r.Step()
		if stop != nil && stop() {
			return
		}
	}
}

// Until steps until cond holds, failing after limit.
func (r *Rig) Until(what string, limit time.Duration, cond func() bool) {
	r.T.Helper()
	r.RunFor(limit, cond)
	require.True(r.T, cond(), "%s: not within %v", what, limit)
}

// Movers spawns n entities that move every tick.
func (r *Rig) Movers(n int, seed uint64) []ecs.Entity {
	rng := rand.New(rand.NewPCG(seed, seed))
	ents := make([]ecs.Entity, n)
	for i := range ents {
		ents[i] = r.Spawn(0, components.Vec3{X: rng.Float64() * 100, Z: rng.Float64() * 100})
	}
	return ents
}
