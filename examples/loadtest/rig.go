package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"runtime/pprof"
	"time"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/replication/schema"
	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/quic"
	"github.com/archenet/archenet/transport/sim"
	"github.com/mlange-42/arche/ecs"
)

// Config is one load test run. Zero values are not defaulted here; main's
// flags carry the defaults.
type Config struct {
	Transport string  // "sim" or "quic"
	Clients   int     // 1..254
	Entities  int     // synthetic scene entities (besides one avatar per client)
	Moving    float64 // fraction of scene entities that move every tick
	// OwnerFields: each avatar also carries a PlayerState, whose fields
	// only its owner gets (owner-only), changing every tick
	OwnerFields bool
	World       float64 // side of the square world, metres
	Interest    float64 // interest radius, metres; 0 = every client sees everything
	Ticks       int     // measured net ticks
	Rate        int     // net ticks per second
	Loss        float64 // sim: datagram and message loss per direction
	Latency     time.Duration
	Jitter      time.Duration
	Seed        int64
	// Settle is the number of ticks without loss and movement before the
	// convergence check. 0: 30 plus four one-way delays.
	Settle int
	// Trace, if set, replaces the synthetic scene (see replay.go).
	Trace     *Trace
	TraceName string // for the report
	// PosStep and QuatBits set the replicated precision of the Transform
	// (its position step in metres, its quaternion bits per component), so
	// that bytes can be compared with another library at its precision.
	// 0: the Transform's own (1 mm, 10 bits).
	PosStep  float64
	QuatBits int
	// Workers is ServerConfig.Workers: goroutines building the clients'
	// datagrams. 0: GOMAXPROCS.
	Workers int
	// MaxBytesPerSecond caps every client's snapshot budget
	// (ServerConfig.MaxBytesPerSecond). 0: the server's default.
	MaxBytesPerSecond int
	// FidelityClients is how many clients (the first ones) fidelity is
	// measured on. 0: up to 8.
	FidelityClients int
	// FidelityAfter is how many measured ticks pass before fidelity is
	// sampled (the clients' first second). 0: one second of ticks.
	FidelityAfter int
	// Progress receives a line every 10% of the run. Nil: none.
	Progress io.Writer
	// Logger receives replication logs. Nil: discarded.
	Logger *slog.Logger
	// LabelServer tags the server's work with the pprof label
	// side=server, so a CPU profile can be focused on it
	// (go tool pprof -tagfocus side=server).
	LabelServer bool
}

func (c *Config) validate() error {
	switch {
	case c.Transport != "sim" && c.Transport != "quic":
		return fmt.Errorf("transport %q: want sim or quic", c.Transport)
	case c.Clients < 1 || c.Clients > 254:
		return fmt.Errorf("clients %d: want 1..254", c.Clients)
	case c.Entities < 0:
		return fmt.Errorf("entities %d: want ≥ 0", c.Entities)
	case !(c.Moving >= 0 && c.Moving <= 1):
		return fmt.Errorf("moving %v: want 0..1", c.Moving)
	case !(c.World > 0) || math.IsInf(c.World, 0):
		return fmt.Errorf("world %v: want > 0", c.World)
	case !(c.Interest >= 0) || math.IsInf(c.Interest, 0):
		return fmt.Errorf("interest %v: want ≥ 0", c.Interest)
	case c.Ticks < 1:
		return fmt.Errorf("ticks %d: want ≥ 1", c.Ticks)
	case c.Rate < 1 || c.Rate > 1000:
		return fmt.Errorf("rate %d: want 1..1000", c.Rate)
	case !(c.Loss >= 0 && c.Loss < 1):
		return fmt.Errorf("loss %v: want 0 ≤ loss < 1", c.Loss)
	case c.Latency < 0 || c.Jitter < 0:
		return errors.New("latency and jitter must not be negative")
	case c.Transport == "quic" && (c.Loss != 0 || c.Latency != 0 || c.Jitter != 0):
		return errors.New("-loss, -latency and -jitter need -transport sim")
	case c.PosStep < 0 || c.QuatBits < 0:
		return errors.New("-pos-step and -quat-bits must not be negative")
	}
	return nil
}

// posStep and quatBits are the replicated precision in effect.
func (c *Config) posStep() float64 {
	if c.PosStep > 0 {
		return c.PosStep
	}
	return 0.001
}

func (c *Config) quatBits() int {
	if c.QuatBits > 0 {
		return c.QuatBits
	}
	return 10
}

func (c *Config) settleTicks() int {
	if c.Settle > 0 {
		return c.Settle
	}
	oneWay := (c.Latency + c.Jitter).Seconds()
	return 30 + int(math.Ceil(4*oneWay*float64(c.Rate)))
}

// rig is one server world and its clients in this process, stepped net tick
// by net tick: over transport/sim in simulated time, or over QUIC on
// 127.0.0.1 in real time.
type rig struct {
	cfg Config
	reg *schema.Registry
	sw  *ecs.World
	srv *replication.Server
	tid ecs.ID // server world's Transform id

	simNet  *sim.Network
	quicL   *quic.Listener
	peers   []*peer
	dt      time.Duration
	nextAt  time.Time // QUIC: wall-clock deadline of the next tick
	game    func()    // server game logic, between Receive and Send
	after   func()    // after the clients' step
	meter   *meter    // nil outside the measured window
	fid     *fidelity // nil: fidelity not measured
	ctx     context.Context
	labeled context.Context
}

// peer is one client world.
type peer struct {
	w     *ecs.World
	c     *replication.Client
	simC  *sim.Conn
	quicC *quic.Conn

	// Meter state: datagram counters at the previous tick.
	datagrams, dropped, bytesIn uint64
	serverTick                  uint32
	records                     uint64 // Stats.Records at the last step
}

// newRegistry registers the Transform at the configured precision.
func newRegistry(cfg Config) (*schema.Registry, error) {
	reg := schema.NewRegistry()
	var opts []schema.Option
	if cfg.PosStep > 0 {
		opts = append(opts, schema.WithTag("Pos", fmt.Sprintf("world,step=%g", cfg.PosStep)))
	}
	if cfg.QuatBits > 0 {
		opts = append(opts, schema.WithTag("Rot", fmt.Sprintf("quat,bits=%d", cfg.QuatBits)))
	}
	if _, err := schema.Register[components.Transform](reg, opts...); err != nil {
		return nil, err
	}
	if cfg.OwnerFields {
		if _, err := schema.Register[PlayerState](reg); err != nil {
			return nil, err
		}
	}
	return reg, nil
}

// PlayerState is a player's own state on its avatar (-owner-fields): only
// the owning client gets it, as a game's ammunition or cooldowns.
type PlayerState struct {
	Ammo     uint16 `net:"range=0:999,owner"`
	Cooldown uint8  `net:"range=0:63,owner"`
}

func newRig(cfg Config, interest *replication.Interest) (*rig, error) {
	reg, err := newRegistry(cfg)
	if err != nil {
		return nil, err
	}
	r := &rig{cfg: cfg, reg: reg, dt: time.Second / time.Duration(cfg.Rate), ctx: context.Background()}
	if cfg.Logger == nil {
		r.cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	r.labeled = r.ctx
	if cfg.LabelServer {
		r.labeled = pprof.WithLabels(r.ctx, pprof.Labels("side", "server"))
	}
	sw := ecs.NewWorld()
	r.sw = &sw
	r.tid = ecs.ComponentID[components.Transform](r.sw)
	scfg := replication.ServerConfig{
		Registry: r.reg, NetRate: cfg.Rate, Interest: interest, Logger: r.cfg.Logger,
		MaxBytesPerSecond: cfg.MaxBytesPerSecond, Workers: cfg.Workers,
		// (Every simulated client runs on this machine.)
		Limits: replication.ServerLimits{MaxClients: cfg.Clients, MaxClientsPerAddress: -1},
	}
	if cfg.Transport == "sim" {
		r.simNet = sim.NewNetwork(cfg.Seed, time.Unix(1_000_000, 0))
		scfg.Now = r.simNet.Now
		r.srv, err = replication.NewServer(r.sw, r.simNet.Listen("server"), scfg)
		if err != nil {
			return nil, err
		}
		cond := sim.Conditions{Latency: cfg.Latency, Jitter: cfg.Jitter, Loss: cfg.Loss}
		for i := 0; i < cfg.Clients; i++ {
			conn, err := r.simNet.Dial("server", sim.Link{Up: cond, Down: cond})
			if err != nil {
				return nil, err
			}
			if err := r.addPeer(conn, r.simNet.Now); err != nil {
				return nil, err
			}
			r.peers[i].simC = conn
		}
		return r, nil
	}
	cert, err := quic.GenerateDevCert(time.Hour)
	if err != nil {
		return nil, err
	}
	r.quicL, err = quic.Listen("127.0.0.1:0", &quic.Config{TLS: cert.ServerTLS(), AcceptBacklog: cfg.Clients, MaxPendingPerAddress: -1, NewConnectionRate: -1})
	if err != nil {
		return nil, err
	}
	r.srv, err = replication.NewServer(r.sw, r.quicL, scfg)
	if err != nil {
		_ = r.quicL.Close()
		return nil, err
	}
	ctx, cancel := context.WithTimeout(r.ctx, 30*time.Second)
	defer cancel()
	for i := 0; i < cfg.Clients; i++ {
		conn, err := quic.Dial(ctx, r.quicL.Addr().String(), &quic.Config{TLS: cert.ClientTLS()})
		if err != nil {
			r.close()
			return nil, fmt.Errorf("dial client %d: %w", i+1, err)
		}
		if err := r.addPeer(conn, time.Now); err != nil {
			_ = conn.Close()
			r.close()
			return nil, err
		}
		r.peers[i].quicC = conn
		r.srv.Receive() // take it out of the accept backlog
	}
	r.nextAt = time.Now()
	return r, nil
}

func (r *rig) addPeer(conn transport.Conn, now func() time.Time) error {
	w := ecs.NewWorld()
	c, err := replication.NewClient(&w, conn, replication.ClientConfig{Registry: r.reg, Now: now, Logger: r.cfg.Logger})
	if err != nil {
		return err
	}
	r.peers = append(r.peers, &peer{w: &w, c: c})
	return nil
}

// close disconnects everything; under QUIC it waits until every
// connection's goroutines have exited.
func (r *rig) close() {
	if r.srv != nil {
		_ = r.srv.Close()
	}
	for _, p := range r.peers {
		if p.quicC != nil {
			_ = p.quicC.Close()
			<-p.quicC.Done()
		}
	}
	if r.quicL != nil {
		_ = r.quicL.Close()
	}
}

// step runs one net tick: server Receive, game logic, server Send, then
// the network and every client. Only Receive and Send are timed as server
// work.
func (r *rig) step() {
	if r.simNet == nil {
		r.stepClients()
	}
	var recv, send time.Duration
	r.server(func() {
		t0 := time.Now()
		r.srv.Receive()
		recv = time.Since(t0)
	})
	if r.game != nil {
		r.game()
	}
	frame, clients, helpers := r.srv.Stats.BuildFrame, r.srv.Stats.BuildClients, r.srv.Stats.HelperTime
	r.server(func() {
		t0 := time.Now()
		r.srv.Send()
		send = time.Since(t0)
	})
	if r.meter != nil {
		r.meter.server(recv, send, r.srv.Stats.BuildFrame-frame, r.srv.Stats.BuildClients-clients)
		// CPU: the caller's goroutine runs (never blocks) through Receive
		// and Send, and the worker helpers spin while awake; their time
		// is counted when they park, so a tick gets the last tick's.
		r.meter.cpu = append(r.meter.cpu, ms(recv+send+r.srv.Stats.HelperTime-helpers))
	}
	if r.fid != nil {
		r.fid.record(r, r.srv.Tick())
	}
	if r.simNet != nil {
		r.simNet.Advance(r.dt)
		r.stepClients()
	} else {
		r.nextAt = r.nextAt.Add(r.dt)
		if d := time.Until(r.nextAt); d > 0 {
			time.Sleep(d)
		} else if d < -time.Second {
			r.nextAt = time.Now() // far behind: do not try to catch up
		}
	}
	if r.after != nil {
		r.after()
	}
	if r.meter != nil {
		r.meter.tickDone(r)
		if r.fid != nil {
			if r.meter.ticks == max(1, r.cfg.fidelityAfter()) {
				r.fid.from = r.srv.Tick()
			}
			r.fid.sample(r)
		}
	}
}

func (c *Config) fidelityAfter() int {
	if c.FidelityAfter > 0 {
		return c.FidelityAfter
	}
	return c.Rate
}

// startFidelity begins recording the server's poses; sampling starts
// FidelityAfter measured ticks later.
func (r *rig) startFidelity(checkMissing bool) {
	n := r.cfg.FidelityClients
	if n <= 0 {
		n = min(8, len(r.peers))
	}
	r.fid = newFidelity(r.cfg.posStep(), r.cfg.quatBits(), n, checkMissing)
}

func (r *rig) server(fn func()) {
	if r.cfg.LabelServer {
		pprof.SetGoroutineLabels(r.labeled)
		fn()
		pprof.SetGoroutineLabels(r.ctx)
		return
	}
	fn()
}

func (r *rig) stepClients() {
	for _, p := range r.peers {
		p.c.Receive()
		if r.meter != nil {
			r.meter.client(p)
		}
		p.c.Send()
	}
}

// ready reports how many clients have their initial world.
func (r *rig) ready() int {
	n := 0
	for _, p := range r.peers {
		if p.c.Ready() {
			n++
		}
	}
	return n
}

// connect steps until every client is ready and done() holds, for at most
// ten seconds of ticks.
func (r *rig) connect(done func() bool) (int, error) {
	limit := 10 * r.cfg.Rate
	for i := 1; i <= limit; i++ {
		r.step()
		if r.ready() == len(r.peers) && (done == nil || done()) {
			return i, nil
		}
		for _, p := range r.peers {
			if p.c.State() == replication.StateClosed {
				return i, fmt.Errorf("client %d closed while connecting: %v", p.c.ID(), p.c.Err())
			}
		}
	}
	return limit, fmt.Errorf("%d of %d clients ready after %d ticks", r.ready(), len(r.peers), limit)
}

// calm removes loss from every simulated link (latency and jitter stay).
func (r *rig) calm() {
	for _, p := range r.peers {
		if p.simC == nil {
			continue
		}
		up, down := p.simC.Conditions()
		up.Loss, down.Loss = 0, 0
		p.simC.SetConditions(up, down)
	}
}

// downBytes returns what the server sent client p: snapshot datagrams and
// reliable spawn/despawn messages (payload bytes).
func (r *rig) downBytes(p *peer) uint64 {
	if p.c.ID() == 0 {
		return 0
	}
	ci, ok := r.srv.Client(p.c.ID())
	if !ok {
		return 0
	}
	return ci.SnapshotBytes + ci.SpawnBytes
}
