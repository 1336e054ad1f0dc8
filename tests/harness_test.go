package tests

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/replication/replicationtest"
	"github.com/archenet/archenet/replication/schema"
	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/sim"
	"github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/require"
)

// Health is a replicated component with an owner-only field.
type Health struct {
	HP   int16  `net:"range=0:1000"`
	Ammo uint16 `net:"range=0:500,owner"`
}

// Team is a small replicated tag component.
type Team struct {
	ID uint8 `net:"range=0:7"`
}

func newRegistry() *schema.Registry {
	reg := schema.NewRegistry()
	schema.MustRegister[components.Transform](reg)
	schema.MustRegister[components.Velocity](reg)
	schema.MustRegister[Health](reg)
	schema.MustRegister[Team](reg)
	schema.MustRegister[components.Predicted](reg)
	return reg
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

const netRate = 30

var tickDt = time.Second / netRate

// harness steps one server world and N client worlds tick by tick over a
// simulated network.
type harness struct {
	t       *testing.T
	net     *sim.Network
	reg     *schema.Registry
	sw      *ecs.World
	srv     *replication.Server
	clients []*clientSide
	link    sim.Link
	game    func(tick int) // server game logic, run each tick before Send
	tick    int
	// clientCfg, if set, adjusts the configuration of clients added later.
	clientCfg func(*replication.ClientConfig)
}

type clientSide struct {
	w    *ecs.World
	c    *replication.Client
	conn *sim.Conn
}

func newHarness(t *testing.T, nClients int, link sim.Link, tweak func(*replication.ServerConfig)) *harness {
	h := &harness{t: t, net: sim.NewNetwork(1, time.Unix(1000, 0)), reg: newRegistry(), link: link}
	sw := ecs.NewWorld()
	h.sw = &sw
	cfg := replication.ServerConfig{Registry: h.reg, NetRate: netRate, Now: h.net.Now, Logger: quiet}
	if tweak != nil {
		tweak(&cfg)
	}
	srv, err := replication.NewServer(h.sw, h.net.Listen("server"), cfg)
	require.NoError(t, err)
	h.srv = srv
	for i := 0; i < nClients; i++ {
		h.addClient()
	}
	return h
}

func (h *harness) addClient() *clientSide {
	conn, err := h.net.Dial("server", h.link)
	require.NoError(h.t, err)
	w := ecs.NewWorld()
	cfg := replication.ClientConfig{Registry: h.reg, Now: h.net.Now, Logger: quiet}
	if h.clientCfg != nil {
		h.clientCfg(&cfg)
	}
	c, err := replication.NewClient(&w, conn, cfg)
	require.NoError(h.t, err)
	cs := &clientSide{w: &w, c: c, conn: conn}
	h.clients = append(h.clients, cs)
	return cs
}

func (h *harness) step() {
	h.tick++
	h.srv.Receive()
	if h.game != nil {
		h.game(h.tick)
	}
	h.srv.Send()
	h.net.Advance(tickDt)
	for _, c := range h.clients {
		c.c.Receive()
		c.c.Send()
	}
}

func (h *harness) run(n int) {
	for i := 0; i < n; i++ {
		h.step()
	}
}

// spawn creates a replicated server entity.
func (h *harness) spawn(owner uint8, pos components.Vec3, extra ...ecs.ID) ecs.Entity {
	ids := []ecs.ID{ecs.ComponentID[components.Replicated](h.sw), ecs.ComponentID[components.Transform](h.sw)}
	if owner != 0 {
		ids = append(ids, ecs.ComponentID[components.Owner](h.sw))
	}
	ids = append(ids, extra...)
	e := h.sw.NewEntity(ids...)
	tr := (*components.Transform)(h.sw.Get(e, ids[1]))
	tr.Pos, tr.Rot = pos, components.QuatIdentity()
	if owner != 0 {
		(*components.Owner)(h.sw.Get(e, ecs.ComponentID[components.Owner](h.sw))).Client = owner
	}
	return e
}

// converged reports whether client ci mirrors exactly the server's
// replicated entities relevant to it (all of them unless relevant is set),
// at the server's quantized state (replicationtest.Converged).
func (h *harness) converged(ci int, relevant func(e ecs.Entity) bool) error {
	cs := h.clients[ci]
	c := replicationtest.Check{Registry: h.reg, Server: h.sw, NetID: h.srv.NetID, Client: cs.w, Me: cs.c.ID()}
	if relevant != nil {
		c.Relevance = replicationtest.Only(relevant)
	}
	return replicationtest.Converged(c)
}

func (h *harness) requireConverged(relevant func(ci int, e ecs.Entity) bool) {
	h.t.Helper()
	for ci := range h.clients {
		var rel func(ecs.Entity) bool
		if relevant != nil {
			ci := ci
			rel = func(e ecs.Entity) bool { return relevant(ci, e) }
		}
		require.NoError(h.t, h.converged(ci, rel))
	}
}

var _ = transport.CodeNormal
