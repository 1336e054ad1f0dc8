package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/transport/sim"
	"github.com/mlange-42/arche/ecs"
)

// CostConfig is a cost scenario (-cost): what a join, or a stall, costs a
// client of a board of dormant tiles (components.Replicated{Dormant: true},
// changed through Server.MarkDirty), over the simulated network.
type CostConfig struct {
	// Kind is "join" (a client joins a running board) or "stall" (a client's
	// link goes down for Stall while tiles change, then comes back).
	Kind  string
	Side  int           // the board is Side × Side tiles
	Stall time.Duration // "stall": how long the link is down
	// Changes is how many tiles change (one MarkDirty each, spread over
	// the stall), "stall" only.
	Changes int
	Rate    int // net ticks per second
	Latency time.Duration
	Seed    int64
}

// CostReport is what a cost scenario measured, in payload bytes the
// client received.
type CostReport struct {
	Cfg CostConfig
	// Join: the late joiner's first Window: SpawnBytes (the reliable spawn
	// batches, which carry every tile's state) and SnapshotBytes (the
	// datagrams).
	// Stall: from the link's return until the client holds the server's
	// state, plus Window: the same two, and RefBytes, the bytes the spawn
	// batches would take for the tiles that changed (their full state).
	SpawnBytes, SnapshotBytes, RefBytes uint64
	// InStepBytes (stall): what a client in step throughout received in
	// the same time (the datagrams of ticks with nothing to send, which
	// every client gets); Recovery is Ratio beyond them.
	InStepBytes uint64
	Window      time.Duration
	// Records counts the entity records the client decoded in the window.
	Records uint64
	// Converged: the client held the server's quantized state at the end;
	// RecoverTicks is when, in net ticks after the link's return (stall).
	Converged    bool
	RecoverTicks int
}

// Ratio is the client's bytes against the reference: the spawn bytes
// (join) or the changed tiles' full state (stall).
func (r *CostReport) Ratio() float64 {
	ref := r.SpawnBytes
	if r.Cfg.Kind == "stall" {
		ref = r.RefBytes
	}
	if ref == 0 {
		return 0
	}
	return float64(r.SpawnBytes+r.SnapshotBytes) / float64(ref)
}

// Recovery is a stall's bytes beyond those of a client in step throughout
// against the changed tiles' full state: what the stall cost.
func (r *CostReport) Recovery() float64 {
	if r.RefBytes == 0 {
		return 0
	}
	return (float64(r.SpawnBytes+r.SnapshotBytes) - float64(r.InStepBytes)) / float64(r.RefBytes)
}

func (r *CostReport) write(w io.Writer) {
	c := r.Cfg
	switch c.Kind {
	case "join":
		fmt.Fprintf(w, "cost join: %d×%d dormant tiles, %d Hz, %v one-way; the late joiner's first %v: spawn %d B, snapshots %d B (%d records): %.2f× the spawn bytes\n",
			c.Side, c.Side, c.Rate, c.Latency, r.Window, r.SpawnBytes, r.SnapshotBytes, r.Records, r.Ratio())
	case "stall":
		fmt.Fprintf(w, "cost stall: %d×%d dormant tiles (each changed once before), %d Hz, %v one-way; link down %v while %d tiles changed; back in step %d ticks after the link returned; in that and %v more: spawn %d B, snapshots %d B (%d records): %.2f× the changed tiles' full state (%d B); a client in step throughout got %d B meanwhile: %.2f× beyond it\n",
			c.Side, c.Side, c.Rate, c.Latency, c.Stall, c.Changes, r.RecoverTicks, r.Window, r.SpawnBytes, r.SnapshotBytes, r.Records, r.Ratio(), r.RefBytes, r.InStepBytes, r.Recovery())
	}
	if !r.Converged {
		fmt.Fprintln(w, "cost: NOT CONVERGED")
	}
}

func (c CostConfig) validate() error {
	switch {
	case c.Kind != "join" && c.Kind != "stall":
		return fmt.Errorf("-cost %q: want join or stall", c.Kind)
	case c.Side < 1 || c.Side > 256 || c.Rate < 1 || c.Rate > 1000 || c.Latency < 0:
		return errors.New("-cost: board side 1..256, rate 1..1000, latency ≥ 0")
	case c.Kind == "stall" && (c.Stall <= 0 || c.Changes < 0 || c.Changes > c.Side*c.Side):
		return errors.New("-cost stall: -stall > 0 and -changes within the board")
	}
	return nil
}

// costRig is a server with a dormant board and two clients: one present
// throughout, one that joins late or stalls.
type costRig struct {
	net   *sim.Network
	world *ecs.World
	srv   *replication.Server
	tiles []ecs.Entity
	tid   ecs.ID
	dt    time.Duration
	cs    []*costClient
	link  sim.Link
	// addClient dials one more client.
	addClient func() (*costClient, error)
}

type costClient struct {
	w    *ecs.World
	c    *replication.Client
	conn *sim.Conn
}

func newCostRig(c CostConfig) (*costRig, error) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	r := &costRig{net: sim.NewNetwork(c.Seed, time.Unix(1_000_000, 0)), dt: time.Second / time.Duration(c.Rate)}
	w := ecs.NewWorld()
	r.world = &w
	r.tid = ecs.ComponentID[components.Transform](r.world)
	reg := hostingRegistry()
	// A stalled client is kept (a game that tolerates stalls this long).
	limits := replication.ServerLimits{MaxClientsPerAddress: -1, ClientTimeout: time.Hour, JoinTimeout: -1}
	srv, err := replication.NewServer(r.world, r.net.Listen("server"), replication.ServerConfig{Registry: reg, NetRate: c.Rate,
		Now: r.net.Now, Logger: quiet, Limits: limits})
	if err != nil {
		return nil, err
	}
	r.srv = srv
	rid := ecs.ComponentID[components.Replicated](r.world)
	for y := range c.Side {
		for x := range c.Side {
			e := r.world.NewEntity(r.tid)
			tr := (*components.Transform)(r.world.Get(e, r.tid))
			tr.Pos, tr.Rot = components.Vec3{X: float64(x), Z: float64(y)}, components.QuatIdentity()
			r.world.Add(e, rid)
			(*components.Replicated)(r.world.Get(e, rid)).Dormant = true
			r.tiles = append(r.tiles, e)
		}
	}
	cond := sim.Conditions{Latency: c.Latency}
	r.link = sim.Link{Up: cond, Down: cond}
	mk := func() (*costClient, error) {
		conn, err := r.net.Dial("server", r.link)
		if err != nil {
			return nil, err
		}
		cw := ecs.NewWorld()
		cl, err := replication.NewClient(&cw, conn, replication.ClientConfig{Registry: reg, Now: r.net.Now, Logger: quiet, Timeout: time.Hour})
		if err != nil {
			return nil, err
		}
		cc := &costClient{w: &cw, c: cl, conn: conn}
		r.cs = append(r.cs, cc)
		return cc, nil
	}
	if _, err := mk(); err != nil {
		return nil, err
	}
	r.addClient = mk
	return r, nil
}

func (r *costRig) step() {
	r.srv.Receive()
	r.srv.Send()
	r.net.Advance(r.dt)
	for _, c := range r.cs {
		c.c.Receive()
		c.c.Send()
	}
}

// converged reports whether client c holds every tile at the server's
// quantized state.
func (r *costRig) converged(c *costClient) bool {
	cid := ecs.ComponentID[components.Transform](c.w)
	for _, e := range r.tiles {
		id, ok := r.srv.NetID(e)
		if !ok {
			return false
		}
		m, ok := c.c.Entity(id)
		if !ok {
			return false
		}
		want := *(*components.Transform)(r.world.Get(e, r.tid))
		got := *(*components.Transform)(c.w.Get(m, cid))
		if d := want.Pos.Sub(got.Pos); d.X*d.X+d.Y*d.Y+d.Z*d.Z > 1e-6 {
			return false
		}
	}
	return true
}

// runCostScenario runs c and measures it.
func runCostScenario(c CostConfig) (*CostReport, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	r, err := newCostRig(c)
	if err != nil {
		return nil, err
	}
	rep := &CostReport{Cfg: c, Window: 3 * time.Second}
	window := int(rep.Window / r.dt)
	for range c.Rate * 2 { // the board settles with the first client
		r.step()
	}
	switch c.Kind {
	case "join":
		late, err := r.addClient()
		if err != nil {
			return nil, err
		}
		for range window {
			r.step()
		}
		st := late.c.Stats
		rep.SpawnBytes, rep.SnapshotBytes, rep.Records = st.MessageBytesIn, st.DatagramBytesIn, st.Records
		rep.Converged = r.converged(late)
	case "stall":
		s, err := r.addClient()
		if err != nil {
			return nil, err
		}
		for range c.Rate * 2 {
			r.step()
		}
		// Every tile changes once while the client is in step, so that its
		// snapshot views hold them all (not only the spawns).
		for _, e := range r.tiles {
			(*components.Transform)(r.world.Get(e, r.tid)).Pos.Y = 0.5
			r.srv.MarkDirty(e)
		}
		for range c.Rate * 2 {
			r.step()
		}
		rng := rand.New(rand.NewPCG(uint64(c.Seed), 41))
		ticks := max(int(c.Stall/r.dt), 1)
		s.conn.SetLinkDown(true)
		changed := map[ecs.Entity]bool{}
		for i := range ticks {
			// Changes spread over the stall; a tile may change more than once.
			for k := c.Changes * i / ticks; k < c.Changes*(i+1)/ticks; k++ {
				e := r.tiles[rng.IntN(len(r.tiles))]
				(*components.Transform)(r.world.Get(e, r.tid)).Pos.Y += 1
				r.srv.MarkDirty(e)
				changed[e] = true
			}
			r.step()
		}
		rep.RefBytes = uint64(len(changed)) * spawnBytesPerTile(r)
		before, inStep := s.c.Stats, r.cs[0].c.Stats
		s.conn.SetLinkDown(false)
		for rep.RecoverTicks = 1; rep.RecoverTicks <= c.Rate*60; rep.RecoverTicks++ {
			r.step()
			if r.converged(s) {
				rep.Converged = true
				break
			}
		}
		for range window {
			r.step()
		}
		st := s.c.Stats
		rep.SpawnBytes, rep.SnapshotBytes = st.MessageBytesIn-before.MessageBytesIn, st.DatagramBytesIn-before.DatagramBytesIn
		rep.Records = st.Records - before.Records
		in := r.cs[0].c.Stats
		rep.InStepBytes = in.MessageBytesIn - inStep.MessageBytesIn + in.DatagramBytesIn - inStep.DatagramBytesIn
	}
	for _, cc := range r.cs {
		cc.c.Close()
	}
	_ = r.srv.Close()
	return rep, nil
}

// spawnBytesPerTile is what the spawn batches took per tile for the first
// client (the batches carry each tile's full state).
func spawnBytesPerTile(r *costRig) uint64 {
	return r.cs[0].c.Stats.MessageBytesIn / uint64(len(r.tiles))
}

// runCost runs a cost scenario and prints its report.
func runCost(c CostConfig, stdout, stderr io.Writer) int {
	rep, err := runCostScenario(c)
	if err != nil {
		fmt.Fprintf(stderr, "loadtest: %v\n", err)
		return 2
	}
	rep.write(stdout)
	if !rep.Converged {
		return 1
	}
	return 0
}
