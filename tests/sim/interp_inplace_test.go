package sim_test

import (
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/interp"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/replication/schema"
	"github.com/archenet/archenet/tests/internal/harness"
	"github.com/archenet/archenet/transport/sim"
	"github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/require"
)

// Pos2 is a 2D game's state: no Transform anywhere.
type Pos2 struct {
	X   float64 `net:"range=-500:500,step=0.01"`
	Z   float64 `net:"range=-500:500,step=0.01"`
	Yaw float64 `net:"angle,bits=10"`
}

// With InterpolatedComponents, a 2D component is interpolated in place on
// remote mirrors: between snapshots it moves smoothly (finer than the
// snapshot steps and the quantization grid), behind the server by about the
// render delay, and the turning angle wraps the short way; the client's own
// predicted entity is left alone; the system can be added before the
// Welcome.
func TestInterpolatedComponentInPlace(t *testing.T) {
	reg := schema.NewRegistry()
	schema.MustRegister[Pos2](reg)
	schema.MustRegister[components.Predicted](reg)
	cond := sim.Conditions{Latency: 30 * time.Millisecond, Jitter: 5 * time.Millisecond}
	net := sim.NewNetwork(3, time.Unix(1000, 0))
	sw := ecs.NewWorld()
	srv, err := replication.NewServer(&sw, net.Listen("server"), replication.ServerConfig{Registry: reg, NetRate: harness.NetRate, Now: net.Now, Logger: harness.Quiet})
	require.NoError(t, err)
	conn, err := net.Dial("server", sim.Link{Up: cond, Down: cond})
	require.NoError(t, err)
	cw := ecs.NewWorld()
	cl, err := replication.NewClient(&cw, conn, replication.ClientConfig{Registry: reg, Now: net.Now, Logger: harness.Quiet,
		InterpolatedComponents: []reflect.Type{reflect.TypeFor[Pos2]()}})
	require.NoError(t, err)
	isys := cl.InterpolationSystem() // before the Welcome: a no-op until then
	isys.Initialize(&cw)

	idPos, idRep := ecs.ComponentID[Pos2](&sw), ecs.ComponentID[components.Replicated](&sw)
	idOwner, idPred := ecs.ComponentID[components.Owner](&sw), ecs.ComponentID[components.Predicted](&sw)
	mover := sw.NewEntity(idRep, idPos)
	mine := sw.NewEntity(idRep, idPos, idOwner, idPred)
	(*components.Owner)(sw.Get(mine, idOwner)).Client = 1
	pos := func(e ecs.Entity) *Pos2 { return (*Pos2)(sw.Get(e, idPos)) }

	// The server runs at 30 Hz; the client renders at 120 Hz.
	const frames = 4
	var prev Pos2
	maxStep, maxYawStep := 0.0, 0.0
	for tick := 1; tick <= 120; tick++ {
		p := pos(mover)
		p.X += 0.2                                                // 6 m/s
		p.Yaw = math.Remainder(3.0+0.05*float64(tick), 2*math.Pi) // crosses ±π at tick 3
		pos(mine).Z += 0.2
		srv.Receive()
		srv.Send()
		for f := range frames {
			net.Advance(harness.TickDt / frames)
			cl.Receive()
			if f == 0 {
				cl.Send()
			}
			isys.Update(&cw)
			id, _ := srv.NetID(mover)
			e, ok := cl.Entity(id)
			if !ok || tick < 30 {
				continue
			}
			got := *(*Pos2)(cw.Get(e, ecs.ComponentID[Pos2](&cw)))
			if tick == 30 && f == 0 {
				prev = got
				continue
			}
			maxStep = max(maxStep, got.X-prev.X)
			require.GreaterOrEqual(t, got.X, prev.X, "never backwards")
			maxYawStep = max(maxYawStep, math.Abs(math.Remainder(got.Yaw-prev.Yaw, 2*math.Pi)))
			prev = got
		}
	}
	require.Zero(t, testing.AllocsPerRun(20, func() { isys.Update(&cw) }), "interpolation allocates nothing per frame")
	st := cl.InterpolationStats()
	require.Equal(t, 1, st.Interpolating+st.Extrapolating, "one tracked mirror: %+v", st)
	behind := pos(mover).X - prev.X
	t.Logf("in-place X %.3f m behind the server (render delay %v); largest step per 8.3 ms frame %.4f m, yaw %.4f rad",
		behind, cl.InterpClock().Delay(), maxStep, maxYawStep)
	require.Less(t, maxStep, 0.2*0.5, "moves in frame-sized steps, not snapshot-sized ones")
	require.Less(t, maxYawStep, 0.05, "the angle turns smoothly, also across ±π")
	require.Greater(t, behind, 0.2)
	require.Less(t, behind, 2.0)

	// The own predicted entity has no track; its value is the raw state.
	oid, _ := srv.NetID(mine)
	oe, ok := cl.Entity(oid)
	require.True(t, ok)
	require.False(t, cw.Has(oe, ecs.ComponentID[interp.Track](&cw)))
}
