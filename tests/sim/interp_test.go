package sim_test

import (
	"testing"
	"time"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/interp"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/tests/internal/harness"
	"github.com/archenet/archenet/transport/sim"
	"github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/require"
)

// TestInterpolatedMirrors: with Interpolation on, remote mirrors get a
// buffer and a Visual that the interp system moves smoothly behind the
// authoritative state; the client's own entity is left out by Interpolate;
// connection and snapshot callbacks fire.
func TestInterpolatedMirrors(t *testing.T) {
	var connected, disconnected []uint8
	h := harness.New(t, 0, sim.Link{Up: sim.Conditions{Latency: 40e6, Jitter: 10e6}, Down: sim.Conditions{Latency: 40e6, Jitter: 10e6}},
		func(c *replication.ServerConfig) {
			c.OnConnect = func(id uint8) { connected = append(connected, id) }
			c.OnDisconnect = func(id uint8, _ error) { disconnected = append(disconnected, id) }
		})
	conn, err := h.Net.Dial("server", h.Link)
	require.NoError(t, err)
	w := ecs.NewWorld()
	snapshots := 0
	cl, err := replication.NewClient(&w, conn, replication.ClientConfig{Registry: h.Registry, Now: h.Net.Now, Logger: harness.Quiet,
		Interpolation: true,
		Interpolate:   func(owner uint8, _ uint64) bool { return owner != 1 },
		OnSnapshot:    func(uint32, time.Time) { snapshots++ }})
	require.NoError(t, err)
	h.Clients = append(h.Clients, &harness.ClientSide{World: &w, Client: cl, Conn: conn})

	mover := h.Spawn(0, components.Vec3{})
	mine := h.Spawn(1, components.Vec3{X: 5})
	h.Run(8)
	require.NotNil(t, cl.InterpClock())
	sys := interp.NewSystem(cl.InterpClock(), 0)
	sys.Initialize(&w)
	mid, _ := h.Server.NetID(mover)
	oid, _ := h.Server.NetID(mine)
	me, _ := cl.Entity(mid)
	oe, _ := cl.Entity(oid)
	require.True(t, w.Has(me, ecs.ComponentID[interp.Buffer](&w)))
	require.True(t, w.Has(me, ecs.ComponentID[components.Visual](&w)))
	require.False(t, w.Has(oe, ecs.ComponentID[interp.Buffer](&w)), "own entity not interpolated")

	// The mover goes at 3 m/s (0.1 m per tick); Visual follows behind,
	// smoothly.
	vid := ecs.ComponentID[components.Visual](&w)
	var lastX float64
	maxStep := 0.0
	for i := 0; i < 90; i++ {
		h.Pos(mover).X += 0.1
		h.Step()
		cl.InterpClock().Advance(h.Net.Now())
		sys.Update(&w)
		x := (*components.Visual)(w.Get(me, vid)).Pos.X
		if i > 30 {
			maxStep = max(maxStep, x-lastX)
			require.GreaterOrEqual(t, x, lastX, "never moves backwards")
		}
		lastX = x
	}
	truth := h.Pos(mover).X
	behind := truth - lastX
	t.Logf("visual %.3f m behind the server (delay %v), max step %.3f m per 33 ms", behind, cl.InterpClock().Delay(), maxStep)
	require.Greater(t, behind, 0.0)
	require.Less(t, behind, 1.0) // ~ (latency + interpolation delay) × 3 m/s
	require.Less(t, maxStep, 0.2)
	require.Greater(t, snapshots, 80)
	ci, _ := h.Server.Client(1)
	require.Equal(t, 80*time.Millisecond, ci.RTT, "the simulator's base RTT")
	require.Greater(t, ci.AckDelay, ci.RTT, "the ack delay includes tick waits")
	require.Equal(t, []uint8{1}, connected)
	cl.Close() // (the player leaves: its seat is freed at once)
	for i := 0; i < 30 && len(disconnected) == 0; i++ {
		h.Step()
	}
	require.Equal(t, []uint8{1}, disconnected)
}

func TestOwnPredictedNotInterpolatedByDefault(t *testing.T) {
	h := harness.New(t, 0, sim.Link{}, nil)
	conn, err := h.Net.Dial("server", h.Link)
	require.NoError(t, err)
	w := ecs.NewWorld()
	cl, err := replication.NewClient(&w, conn, replication.ClientConfig{Registry: h.Registry, Now: h.Net.Now, Logger: harness.Quiet, Interpolation: true})
	require.NoError(t, err)
	h.Clients = append(h.Clients, &harness.ClientSide{World: &w, Client: cl, Conn: conn})
	pid := ecs.ComponentID[components.Predicted](h.World)
	mine := h.Spawn(1, components.Vec3{}, pid)
	other := h.Spawn(2, components.Vec3{X: 1}, pid)
	plain := h.Spawn(1, components.Vec3{X: 2})
	h.Run(4)
	buf := ecs.ComponentID[interp.Buffer](&w)
	for e, want := range map[ecs.Entity]bool{mine: false, other: true, plain: true} {
		id, _ := h.Server.NetID(e)
		me, ok := cl.Entity(id)
		require.True(t, ok)
		require.Equal(t, want, w.Has(me, buf), "%v", id)
	}
}
