package sim_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/replication/replicationtest"
	"github.com/archenet/archenet/tests/internal/harness"
	"github.com/archenet/archenet/transport/sim"
	"github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/require"
)

// seatRig is a moving scene whose server keeps seats, with the game's
// seat events recorded.
type seatRig struct {
	*harness.Harness
	events []string
	ents   []ecs.Entity
	rng    *rand.Rand
	hist   *replicationtest.History
	moving int
}

func newSeatRig(t *testing.T, seed uint64, link sim.Link, moving int) *seatRig {
	r := &seatRig{rng: rand.New(rand.NewPCG(seed, 40)), moving: moving}
	r.Harness = harness.NewOn(t, sim.NewNetwork(int64(seed), harness.Epoch), link, nil, func(c *replication.ServerConfig) {
		c.OnConnect = func(id replication.ClientID) { r.events = append(r.events, fmt.Sprintf("join %d", id)) }
		c.OnSuspend = func(id replication.ClientID, _ error) { r.events = append(r.events, fmt.Sprintf("suspend %d", id)) }
		c.OnResume = func(id replication.ClientID) { r.events = append(r.events, fmt.Sprintf("resume %d", id)) }
		c.OnDisconnect = func(id replication.ClientID, why error) {
			r.events = append(r.events, fmt.Sprintf("leave %d", id))
			if errors.Is(why, replication.ErrSeatExpired) {
				r.events = append(r.events, "expired")
			}
		}
	})
	r.AddClient()
	r.AddClient()
	for i := range 120 {
		owner := uint8(0)
		if i < 3 {
			owner = 1 // client 1's own entities
		}
		r.ents = append(r.ents, r.Spawn(owner, components.Vec3{X: float64(i), Z: float64(i % 7)}))
	}
	r.Game = func(int) {
		for _, e := range r.ents[:moving] {
			p := r.Pos(e)
			p.X += r.rng.Float64() - 0.5
			p.Z += r.rng.Float64() - 0.5
		}
	}
	r.hist = replicationtest.NewHistory(r.Registry, 64)
	return r
}

// step runs a tick and records the server's state for the live check.
func (r *seatRig) step() {
	r.Step()
	require.NoError(r.T, r.hist.Record(r.World, r.Server.NetID, r.Server.Tick()))
}

// live checks client ci's mirrors against the server's state at their
// state ticks; it returns how many of the moving entities it shows at a
// state older than lag ticks, or not at all.
func (r *seatRig) live(ci int, lag uint32) (stale int, err error) {
	cs := r.Clients[ci]
	if _, err := r.hist.Check(replicationtest.LiveCheck{Client: cs.World, Me: cs.Client.ID(), StateTick: cs.Client.StateTick}); err != nil {
		return 0, err
	}
	for _, e := range r.ents[:r.moving] {
		id, _ := r.Server.NetID(e)
		if st, ok := cs.Client.StateTick(id); !ok || r.Server.Tick()-st > lag {
			stale++
		}
	}
	return stale, nil
}

// mirrors returns client ci's mirrors by net id.
func (r *seatRig) mirrors(ci int) map[components.NetID]ecs.Entity {
	cs := r.Clients[ci]
	m := map[components.NetID]ecs.Entity{}
	q := cs.World.Query(ecs.All(ecs.ComponentID[components.NetID](cs.World)))
	for q.Next() {
		m[*(*components.NetID)(q.Get(ecs.ComponentID[components.NetID](cs.World)))] = q.Entity()
	}
	return m
}

// A client whose link dies for 5 s (neither end has given up: the resume
// takes over a seat the server still thinks connected) or 25 s (both ends
// timed out: the seat was suspended) comes back on a new connection from
// a new address, to the same seat: the same ClientID, the same mirrors of
// its own entities, no spawn batch sent again (only the entities spawned
// and despawned meanwhile, exactly), and every mirror at the server's
// state within 1 s. The game saw suspend and resume, never leave and join.
func TestResumeAfterOutage(t *testing.T) {
	for _, outage := range []time.Duration{5 * time.Second, 25 * time.Second} {
		t.Run(outage.String(), func(t *testing.T) {
			lat := sim.Conditions{Latency: 30 * time.Millisecond, Jitter: 5 * time.Millisecond}
			r := newSeatRig(t, 7, sim.Link{Up: lat, Down: lat}, 60)
			for range 60 {
				r.step()
			}
			cs := r.Clients[0]
			require.Equal(t, replication.StateReady, cs.Client.State())
			id := cs.Client.ID()
			before := r.mirrors(0)
			spawns, despawns, spawnBytes := cs.Client.Stats.Spawns, cs.Client.Stats.Despawns, r.Server.Stats.SpawnBytes

			cs.Conn.SetLinkDown(true)
			// Meanwhile: three new entities, two removed.
			ticks := int(outage / harness.TickDt)
			for i := range ticks {
				switch i {
				case 10, 20, 30:
					r.ents = append(r.ents, r.Spawn(0, components.Vec3{X: float64(200 + i)}))
				case 40, 50:
					r.World.RemoveEntity(r.ents[len(r.ents)-1-i/10])
					r.ents = slices.Delete(r.ents, len(r.ents)-1-i/10, len(r.ents)-i/10)
				}
				r.step()
			}
			if outage > 10*time.Second {
				require.Equal(t, []replication.ClientID{id}, r.Server.Suspended(), "the server suspended the silent client")
				require.Equal(t, replication.StateClosed, cs.Client.State(), "the client gave up on its link")
			} else {
				require.Empty(t, r.Server.Suspended(), "the server has not noticed yet")
			}

			conn, err := r.Net.DialFrom("server", "client-roaming", r.Link)
			require.NoError(t, err)
			cs.Conn = conn
			require.NoError(t, cs.Client.Resume(conn))
			converged := -1
			for i := range 30 { // 1 s
				r.step()
				stale, err := r.live(0, 3)
				if err == nil && stale == 0 && cs.Client.State() == replication.StateReady && converged < 0 {
					converged = i + 1
				}
			}
			require.Equal(t, replication.StateReady, cs.Client.State(), "%v", cs.Client.Err())
			require.GreaterOrEqual(t, converged, 1, "converged within 1 s of returning")
			require.Equal(t, id, cs.Client.ID(), "the same seat")
			after := r.mirrors(0)
			for nid, e := range before {
				if nid.Owner() == id {
					require.Equal(t, e, after[nid], "its own entity %v keeps its mirror", nid)
				}
			}
			require.Equal(t, uint64(3), cs.Client.Stats.Spawns-spawns, "only the entities spawned meanwhile")
			require.Equal(t, uint64(2), cs.Client.Stats.Despawns-despawns, "only the entities removed meanwhile")
			require.Less(t, r.Server.Stats.SpawnBytes-spawnBytes, uint64(400), "no spawn batch of the world again")
			t.Logf("converged %d ticks after the resume; events %v", converged, r.events)
			require.Equal(t, []string{"join 1", "join 2", "suspend 1", "resume 1"}, r.events[:4], "the game saw suspend and resume")
			require.Len(t, r.events, 4)
			require.Equal(t, 1, r.Server.Stats.Resumed)
			require.Zero(t, r.Server.Stats.ResumesReset)

			r.Game = nil
			for range 3 {
				r.step()
			}
			r.RequireConverged(nil)
		})
	}
}

// A link dead for 40 s is a leave, as without seats: the seat expires 30 s
// after the server gave up on the client, the game hears OnDisconnect with
// ErrSeatExpired, a resume is then refused with ErrResumeRefused, and the
// client joins again as a new player.
func TestSeatExpires(t *testing.T) {
	r := newSeatRig(t, 8, sim.Link{}, 20)
	for range 30 {
		r.step()
	}
	cs := r.Clients[0]
	cs.Conn.SetLinkDown(true)
	for range int(41 * time.Second / harness.TickDt) {
		r.step()
	}
	require.Equal(t, []string{"join 1", "join 2", "suspend 1", "leave 1", "expired"}, r.events)
	require.Equal(t, 1, r.Server.Stats.SeatsExpired)
	require.Empty(t, r.Server.Suspended())

	conn, err := r.Net.Dial("server", r.Link)
	require.NoError(t, err)
	cs.Conn = conn
	require.NoError(t, cs.Client.Resume(conn))
	for range 10 {
		r.step()
	}
	require.Equal(t, replication.StateClosed, cs.Client.State())
	require.ErrorIs(t, cs.Client.Err(), replication.ErrResumeRefused)
	require.ErrorContains(t, cs.Client.Err(), "seat 1 ended")
	require.ErrorIs(t, cs.Client.Resume(conn), replication.ErrNoSeat, "a refused seat is gone")

	conn, err = r.Net.Dial("server", r.Link)
	require.NoError(t, err)
	cs.Conn = conn
	require.NoError(t, cs.Client.Reconnect(conn))
	r.Game = nil
	for range 20 {
		r.step()
	}
	require.Equal(t, replication.StateReady, cs.Client.State())
	r.RequireConverged(nil)
}
