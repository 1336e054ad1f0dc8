package sim_test

import (
	"testing"
	"time"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/replication/replicationtest"
	"github.com/archenet/archenet/replication/schema"
	"github.com/archenet/archenet/tests/internal/harness"
	"github.com/archenet/archenet/transport/sim"
	"github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/require"
)

// Pose2D is a 2D game's own pose: no components.Transform anywhere.
type Pose2D struct {
	X       float64 `net:"range=-1000:1000,step=0.01"`
	Y       float64 `net:"range=-1000:1000,step=0.01"`
	Heading float64 `net:"angle,bits=10"`
}

// Interest on a game's own 2D pose (Interest.Position): a client receives
// what is within the radius of its own entity's pose, nothing farther than
// the leave radius, and an entity that walks out and back comes back; the
// rule replicationtest.Within checks is the same.
func TestInterestOnACustomPosition(t *testing.T) {
	reg := schema.NewRegistry()
	schema.MustRegister[Pose2D](reg)
	net := sim.NewNetwork(5, time.Unix(1000, 0))
	sw := ecs.NewWorld()
	in := &replication.Interest{Radius: 50, Every: 1,
		Position: replication.PositionOf(func(p *Pose2D) components.Vec3 { return components.Vec3{X: p.X, Z: p.Y} })}
	srv, err := replication.NewServer(&sw, net.Listen("server"), replication.ServerConfig{Registry: reg, NetRate: harness.NetRate, Now: net.Now, Logger: harness.Quiet, Interest: in})
	require.NoError(t, err)
	defer srv.Close()
	idRep, idPose, idOwner := ecs.ComponentID[components.Replicated](&sw), ecs.ComponentID[Pose2D](&sw), ecs.ComponentID[components.Owner](&sw)
	spawn := func(x, y float64, owner uint8) ecs.Entity {
		e := sw.NewEntity(idRep, idPose)
		*(*Pose2D)(sw.Get(e, idPose)) = Pose2D{X: x, Y: y}
		if owner != 0 {
			sw.Add(e, idOwner)
			(*components.Owner)(sw.Get(e, idOwner)).Client = owner
		}
		return e
	}
	conn, err := net.Dial("server", sim.Link{})
	require.NoError(t, err)
	cw := ecs.NewWorld()
	cl, err := replication.NewClient(&cw, conn, replication.ClientConfig{Registry: reg, Now: net.Now, Logger: harness.Quiet})
	require.NoError(t, err)
	step := func(n int) {
		for range n {
			srv.Receive()
			srv.Send()
			net.Advance(harness.TickDt)
			cl.Receive()
			cl.Send()
		}
	}
	step(3)
	require.True(t, cl.Ready())
	me := spawn(0, 0, cl.ID()) // the client's own entity: its focus
	near := spawn(30, 20, 0)
	far := spawn(300, -200, 0)
	walker := spawn(0, 45, 0)
	step(5)
	mirrored := func(e ecs.Entity) bool {
		id, _ := srv.NetID(e)
		_, ok := cl.Entity(id)
		return ok
	}
	check := func() error {
		f := *(*Pose2D)(sw.Get(me, idPose))
		c := replicationtest.Check{Registry: reg, Server: &sw, NetID: srv.NetID, Client: &cw, Me: cl.ID(),
			Relevance: replicationtest.Within(&sw, cl.ID(), in, components.Vec3{X: f.X, Z: f.Y}, true)}
		return replicationtest.Converged(c)
	}
	require.True(t, mirrored(me) && mirrored(near) && mirrored(walker))
	require.False(t, mirrored(far), "300 m away: not replicated")
	require.NoError(t, check())

	// The walker steps past the radius but not the leave radius (57.5 m):
	// it stays; past that it goes; back inside the radius it comes back.
	(*Pose2D)(sw.Get(walker, idPose)).Y = 55
	step(5)
	require.True(t, mirrored(walker), "within the hysteresis band: kept")
	require.NoError(t, check())
	(*Pose2D)(sw.Get(walker, idPose)).Y = 60
	step(5)
	require.False(t, mirrored(walker), "past the leave radius: despawned")
	require.NoError(t, check())
	(*Pose2D)(sw.Get(walker, idPose)).Y = 55
	step(5)
	require.False(t, mirrored(walker), "within the band but not within the radius: not back yet")
	(*Pose2D)(sw.Get(walker, idPose)).Y = 49
	step(5)
	require.True(t, mirrored(walker), "back within the radius: spawned again")
	require.NoError(t, check())

	// The focus moves with the client's own pose.
	(*Pose2D)(sw.Get(me, idPose)).X, (*Pose2D)(sw.Get(me, idPose)).Y = 290, -190
	step(5)
	require.True(t, mirrored(far))
	require.False(t, mirrored(near))
	require.NoError(t, check())
}

// A server whose Interest names a position component that is not
// registered says so.
func TestInterestPositionMustBeRegistered(t *testing.T) {
	reg := schema.NewRegistry()
	schema.MustRegister[Pose2D](reg)
	w := ecs.NewWorld()
	_, err := replication.NewServer(&w, nil, replication.ServerConfig{Registry: reg, Interest: &replication.Interest{Radius: 10}})
	require.ErrorContains(t, err, "Interest reads positions from components.Transform, which is not in the registry")
}

// The contract of the interest hooks, for the race detector: Focus runs on
// the simulation goroutine (it may change the game's state: here a plain
// map), Filter on the workers, concurrently (it only reads the world).
func TestInterestHooksContract(t *testing.T) {
	asked := map[replication.ClientID]int{} // not safe for concurrent use, on purpose
	var h *harness.Harness
	in := &replication.Interest{Radius: 40, Every: 1,
		Focus: func(id replication.ClientID) (components.Vec3, bool) {
			asked[id]++
			return components.Vec3{X: float64(id) * 10}, true
		},
		Filter: func(_ replication.ClientID, e ecs.Entity) bool {
			return h.World.Alive(e) // a read of the world
		}}
	h = harness.New(t, 0, sim.Link{}, func(c *replication.ServerConfig) {
		c.Workers = 2
		c.Interest = in
	})
	for i := range 200 {
		h.Spawn(0, components.Vec3{X: float64(i % 100), Z: float64(i / 100)})
	}
	for range 8 {
		h.AddClient()
	}
	h.Run(20)
	require.Len(t, asked, 8)
	for id, n := range asked {
		require.GreaterOrEqual(t, n, 15, "client %d", id)
	}
	for _, cs := range h.Clients {
		c := replicationtest.Check{Registry: h.Registry, Server: h.World, NetID: h.Server.NetID, Client: cs.World, Me: cs.Client.ID(),
			Relevance: replicationtest.Within(h.World, cs.Client.ID(), in, components.Vec3{X: float64(cs.Client.ID()) * 10}, true)}
		require.NoError(t, replicationtest.Converged(c), "client %d", cs.Client.ID())
	}
}
