package sim_test

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/tests/internal/harness"
	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/sim"
	"github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/require"
)

func TestReconnectAfterLinkDown(t *testing.T) {
	link := sim.Link{IdleTimeout: time.Second}
	h := harness.New(t, 2, link, nil)
	rng := rand.New(rand.NewPCG(2, 9))
	ents := make([]ecs.Entity, 50)
	for i := range ents {
		ents[i] = h.Spawn(0, components.Vec3{X: float64(i)})
	}
	h.Game = churn(h, rng, ents)
	h.Run(30)
	h.RequireConverged(nil)
	cs := h.Clients[1]
	before := map[ecs.Entity]bool{}
	q := cs.World.Query(ecs.All(ecs.ComponentID[components.NetID](cs.World)))
	for q.Next() {
		before[q.Entity()] = true
	}
	cs.Conn.SetLinkDown(true)
	h.Run(45) // 1.5 s: the idle timeout closes both ends
	require.Equal(t, replication.StateClosed, cs.Client.State())
	require.True(t, errors.Is(cs.Client.Err(), transport.ErrClosed), "%v", cs.Client.Err())
	require.Len(t, h.Server.Clients(), 1, "the server dropped the silent client; the other stays")

	conn, err := h.Net.Dial("server", link)
	require.NoError(t, err)
	cs.Conn = conn
	require.NoError(t, cs.Client.Reconnect(conn))
	h.Run(20)
	h.Game = nil
	h.Run(3)
	h.RequireConverged(nil)
	// Every mirror is a new entity: the old ones were removed on reconnect.
	q = cs.World.Query(ecs.All(ecs.ComponentID[components.NetID](cs.World)))
	n := 0
	for q.Next() {
		n++
	}
	require.Equal(t, 50, n)
	require.Equal(t, replication.StateReady, cs.Client.State())
}
