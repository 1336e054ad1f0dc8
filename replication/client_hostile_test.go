package replication

import (
	"io"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/internal/entity"
	"github.com/archenet/archenet/replication/internal/wire"
	"github.com/archenet/archenet/replication/schema"
	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/sim"
	"github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/require"
)

// hostileServer is a sim connection a test plays the server on: it answers
// the client's Hello with a Welcome and then sends whatever the test wants.
type hostileServer struct {
	net    *sim.Network
	server transport.Conn
	client *Client
	world  *ecs.World
}

func newHostileServer(t *testing.T, cfg ClientConfig) *hostileServer {
	t.Helper()
	n := sim.NewNetwork(1, time.Unix(1000, 0))
	l := n.Listen("server")
	conn, err := n.Dial("server", sim.Link{})
	require.NoError(t, err)
	w := ecs.NewWorld()
	cfg.Logger = quietLogger
	c, err := NewClient(&w, conn, cfg)
	require.NoError(t, err)
	sc, ok := l.PollAccept()
	require.True(t, ok)
	n.Advance(time.Millisecond)
	_, ok = sc.PollMessage() // the Hello
	require.True(t, ok)
	info := wire.Welcome{TickRate: 30, Depth: 32, Tick: 1, NetDivisor: 1}
	require.NoError(t, sc.SendMessage(transport.Welcome{ClientID: 1, Payload: info.Append(nil)}.Append(nil)))
	n.Advance(time.Millisecond)
	c.Receive()
	require.Equal(t, StateJoined, c.State())
	return &hostileServer{net: n, server: sc, client: c, world: &w}
}

// send delivers a reliable message to the client and lets it process it.
func (h *hostileServer) send(t *testing.T, m []byte) {
	t.Helper()
	require.NoError(t, h.server.SendMessage(m))
	h.net.Advance(time.Millisecond)
	h.client.Receive()
}

// A compromised server names the largest slot there is: the client mirrors
// it without allocating in proportion to the slot number.
func TestClientMirrorsDoNotGrowWithUntrustedSlots(t *testing.T) {
	reg := hostileRegistry()
	h := newHostileServer(t, ClientConfig{Registry: reg})
	plans := reg.Plans()
	lanes := make([]uint64, plans[0].NumLanes())
	tr := components.Transform{Pos: components.Vec3{X: 1}, Rot: components.QuatIdentity()}
	schema.QuantizeValue(plans[0], &tr, lanes)

	var sw wire.SpawnWriter
	for _, slot := range []uint32{entity.MaxSlots - 1, entity.MaxSlots - 2, 5_000_000} {
		sw.Add(plans, wire.SpawnEntry{Slot: slot, Meta: entity.Meta{Gen: 1, Set: 1}, Lanes: lanes}, false)
	}
	msg := sw.Bytes(2, nil)

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	h.send(t, msg)
	runtime.ReadMemStats(&after)
	require.NoError(t, h.client.Err())
	require.Equal(t, 3, h.client.Mirrors())
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("spawns at slots up to 2^24-1: %d bytes allocated", allocated)
	require.Less(t, allocated, uint64(1<<20), "allocation must not follow the slot number")

	// The far mirrors work like any other: found by handle, removed by despawn.
	id := components.NetID{Handle: components.MakeHandle(0, entity.MaxSlots-1), Gen: 1}
	e, ok := h.client.Entity(id)
	require.True(t, ok)
	got := (*components.Transform)(h.world.Get(e, ecs.ComponentID[components.Transform](h.world)))
	require.InDelta(t, 1.0, got.Pos.X, 1e-3)
	sw.Reset()
	sw.Add(plans, wire.SpawnEntry{Despawn: true, Slot: entity.MaxSlots - 1, Meta: entity.Meta{Gen: 1}}, false)
	h.send(t, sw.Bytes(3, nil))
	require.Equal(t, 2, h.client.Mirrors())
	_, ok = h.client.Entity(id)
	require.False(t, ok)
	require.False(t, h.world.Alive(e))
}

var quietLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// TestClientLivenessCheckAllocatesNothing: the liveness check that runs in
// every Receive names the server only in the error it returns, so a frame
// with nothing to report allocates nothing for it (a sim address's String
// allocates, as a UDP address's does).
func TestClientLivenessCheckAllocatesNothing(t *testing.T) {
	reg := schema.NewRegistry()
	schema.MustRegister[components.Transform](reg)
	h := newHostileServer(t, ClientConfig{Registry: reg})
	now := h.client.cfg.Now()
	require.Zero(t, testing.AllocsPerRun(50, func() { h.client.checkLiveness(now) }))
	require.Contains(t, (*serverName)(h.client).String(), "server")
}

type hostileHP struct {
	HP   int16  `net:"range=0:100"`
	Ammo uint16 `net:"range=0:500,owner"`
}

func hostileRegistry() *schema.Registry {
	reg := schema.NewRegistry()
	schema.MustRegister[components.Transform](reg)
	schema.MustRegister[hostileHP](reg)
	return reg
}
