package harness

import (
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

// Harness steps one server world and N client worlds tick by tick over a
// simulated network: Step runs the server's Receive, the game and the
// server's Send, advances the network by one net tick and runs every
// client's Receive and Send.
type Harness struct {
	T        testing.TB
	Net      *sim.Network
	Registry *schema.Registry
	World    *ecs.World // the server's
	Server   *replication.Server
	Clients  []*ClientSide
	Link     sim.Link       // the link of clients added later
	Game     func(tick int) // server game logic, run each tick before Send
	Tick     int            // steps run
	// ClientConfig, if set, adjusts the configuration of clients added later.
	ClientConfig func(*replication.ClientConfig)
	// ServerTime is the wall time of the last Step's server part (Receive,
	// the game, Send).
	ServerTime time.Duration
}

// ClientSide is one client of a Harness: its world, its replication client
// and its end of the simulated connection.
type ClientSide struct {
	World  *ecs.World
	Client *replication.Client
	Conn   *sim.Conn
}

// Epoch is the simulated clock's start.
var Epoch = time.Unix(1000, 0)

// New returns a harness over a simulated network (seed 1) whose server's
// configuration tweak adjusts (if not nil), with nClients clients on link.
func New(t testing.TB, nClients int, link sim.Link, tweak func(*replication.ServerConfig)) *Harness {
	h := NewOn(t, sim.NewNetwork(1, Epoch), link, nil, tweak)
	for range nClients {
		h.AddClient()
	}
	return h
}

// NewCustom is New without clients, with the server's listener wrapped.
func NewCustom(t testing.TB, wrap func(*Harness, transport.Listener) transport.Listener, tweak func(*replication.ServerConfig)) *Harness {
	return NewOn(t, sim.NewNetwork(1, Epoch), sim.Link{}, wrap, tweak)
}

// NewOn returns a harness without clients over net, whose clients will
// dial on link, with the server's listener wrapped by wrap (if not nil).
func NewOn(t testing.TB, net *sim.Network, link sim.Link, wrap func(*Harness, transport.Listener) transport.Listener, tweak func(*replication.ServerConfig)) *Harness {
	h := &Harness{T: t, Net: net, Registry: NewRegistry(), Link: link}
	sw := ecs.NewWorld()
	h.World = &sw
	cfg := replication.ServerConfig{Registry: h.Registry, NetRate: NetRate, Now: h.Net.Now, Logger: Quiet}
	if tweak != nil {
		tweak(&cfg)
	}
	var l transport.Listener = h.Net.Listen("server")
	if wrap != nil {
		l = wrap(h, l)
	}
	srv, err := replication.NewServer(h.World, l, cfg)
	require.NoError(t, err)
	h.Server = srv
	return h
}

// AddClient dials a client on h.Link (ClientConfig adjusts its
// configuration) and adds it to h.Clients.
func (h *Harness) AddClient() *ClientSide {
	conn, err := h.Net.Dial("server", h.Link)
	require.NoError(h.T, err)
	return h.add(conn)
}

// AddClientFrom is AddClient from the address from.
func (h *Harness) AddClientFrom(from string) *ClientSide {
	conn, err := h.Net.DialFrom("server", from, h.Link)
	require.NoError(h.T, err)
	return h.add(conn)
}

func (h *Harness) add(conn *sim.Conn) *ClientSide {
	w := ecs.NewWorld()
	cfg := replication.ClientConfig{Registry: h.Registry, Now: h.Net.Now, Logger: Quiet}
	if h.ClientConfig != nil {
		h.ClientConfig(&cfg)
	}
	c, err := replication.NewClient(&w, conn, cfg)
	require.NoError(h.T, err)
	cs := &ClientSide{World: &w, Client: c, Conn: conn}
	h.Clients = append(h.Clients, cs)
	return cs
}

// Step runs one net tick (see Harness).
func (h *Harness) Step() {
	h.Tick++
	t0 := time.Now()
	h.Server.Receive()
	if h.Game != nil {
		h.Game(h.Tick)
	}
	h.Server.Send()
	h.ServerTime = time.Since(t0)
	h.Net.Advance(TickDt)
	for _, c := range h.Clients {
		c.Client.Receive()
		c.Client.Send()
	}
}

// Run runs n steps.
func (h *Harness) Run(n int) {
	for i := 0; i < n; i++ {
		h.Step()
	}
}

// Spawn creates a replicated server entity.
func (h *Harness) Spawn(owner uint8, pos components.Vec3, extra ...ecs.ID) ecs.Entity {
	ids := []ecs.ID{ecs.ComponentID[components.Replicated](h.World), ecs.ComponentID[components.Transform](h.World)}
	if owner != 0 {
		ids = append(ids, ecs.ComponentID[components.Owner](h.World))
	}
	ids = append(ids, extra...)
	e := h.World.NewEntity(ids...)
	tr := (*components.Transform)(h.World.Get(e, ids[1]))
	tr.Pos, tr.Rot = pos, components.QuatIdentity()
	if owner != 0 {
		(*components.Owner)(h.World.Get(e, ecs.ComponentID[components.Owner](h.World))).Client = owner
	}
	return e
}

// Pos returns the position of the server's entity e, to read or move.
func (h *Harness) Pos(e ecs.Entity) *components.Vec3 {
	return &(*components.Transform)(h.World.Get(e, ecs.ComponentID[components.Transform](h.World))).Pos
}

// Converged reports whether client ci mirrors exactly the server's
// replicated entities relevant to it (all of them unless relevant is set),
// at the server's quantized state (replicationtest.Converged).
func (h *Harness) Converged(ci int, relevant func(e ecs.Entity) bool) error {
	cs := h.Clients[ci]
	c := replicationtest.Check{Registry: h.Registry, Server: h.World, NetID: h.Server.NetID, Client: cs.World, Me: cs.Client.ID()}
	if relevant != nil {
		c.Relevance = replicationtest.Only(relevant)
	}
	return replicationtest.Converged(c)
}

// RequireConverged fails unless every client converged; relevant, if set,
// says which entities are relevant to client ci.
func (h *Harness) RequireConverged(relevant func(ci int, e ecs.Entity) bool) {
	h.T.Helper()
	for ci := range h.Clients {
		var rel func(ecs.Entity) bool
		if relevant != nil {
			ci := ci
			rel = func(e ecs.Entity) bool { return relevant(ci, e) }
		}
		require.NoError(h.T, h.Converged(ci, rel))
	}
}

// WrapListener hands out the server ends of accepted connections through wrap.
type WrapListener struct {
	transport.Listener
	Wrap func(transport.Conn) transport.Conn
}

// PollAccept accepts a connection and wraps it.
func (l WrapListener) PollAccept() (transport.Conn, bool) {
	c, ok := l.Listener.PollAccept()
	if !ok {
		return nil, false
	}
	return l.Wrap(c), true
}
