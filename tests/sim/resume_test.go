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
	"github.com/archenet/archenet/transport"
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

// run runs n steps.
func (r *seatRig) run(n int) {
	for range n {
		r.step()
	}
}

// settle stops the motion and requires every client converged.
func (r *seatRig) settle() {
	r.Game = nil
	r.run(3)
	r.RequireConverged(nil)
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
			r.run(60)
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

			r.settle()
		})
	}
}

// A link dead for 40 s is a leave, as without seats: the seat expires 30 s
// after the server gave up on the client, the game hears OnDisconnect with
// ErrSeatExpired, a resume is then refused with ErrResumeRefused, and the
// client joins again as a new player.
func TestSeatExpires(t *testing.T) {
	r := newSeatRig(t, 8, sim.Link{}, 20)
	r.run(30)
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
	r.run(10)
	require.Equal(t, replication.StateClosed, cs.Client.State())
	require.ErrorIs(t, cs.Client.Err(), replication.ErrResumeRefused)
	require.ErrorContains(t, cs.Client.Err(), "seat 1 ended")
	require.ErrorIs(t, cs.Client.Resume(conn), replication.ErrNoSeat, "a refused seat is gone")

	conn, err = r.Net.Dial("server", r.Link)
	require.NoError(t, err)
	cs.Conn = conn
	require.NoError(t, cs.Client.Reconnect(conn))
	r.Game = nil
	r.run(20)
	require.Equal(t, replication.StateReady, cs.Client.State())
	r.RequireConverged(nil)
}

// A new client of the same player (a reloaded page) comes back to the seat
// with the ticket the old one saved (ClientConfig.ResumeTicket): the same
// ClientID, its replication started over (it holds nothing), converged;
// the game saw suspend and resume.
func TestResumeFreshClient(t *testing.T) {
	r := newSeatRig(t, 9, sim.Link{}, 30)
	r.run(30)
	old := r.Clients[0]
	ticket := old.Client.ResumeTicket()
	require.NotEmpty(t, ticket)
	old.Conn.SetLinkDown(true) // (the page is gone)
	r.Clients = r.Clients[1:]
	r.run(60)
	r.ClientConfig = func(c *replication.ClientConfig) { c.ResumeTicket = ticket }
	page := r.AddClientFrom("reloaded-page")
	r.ClientConfig = nil
	r.run(10)
	require.Equal(t, replication.StateReady, page.Client.State(), "%v", page.Client.Err())
	require.Equal(t, replication.ClientID(1), page.Client.ID(), "the same seat")
	require.Equal(t, 1, r.Server.Stats.ResumesReset)
	require.Equal(t, []string{"join 1", "join 2", "suspend 1", "resume 1"}, r.events)
	require.NotEqual(t, ticket, page.Client.ResumeTicket(), "the resume spent the secret")
	r.settle()
}

// A resume with a forged, used, other seat's or unknown ticket is refused
// with its reason (and wraps ErrResumeRefused); the seat itself is
// untouched and still resumes with its own ticket.
func TestResumeRefused(t *testing.T) {
	r := newSeatRig(t, 10, sim.Link{}, 30)
	r.run(30)
	a, b := r.Clients[0], r.Clients[1]
	used := a.Client.ResumeTicket()
	conn, err := r.Net.DialFrom("server", "a-again", r.Link)
	require.NoError(t, err)
	a.Conn = conn
	require.NoError(t, a.Client.Resume(conn)) // (spends used's secret)
	r.run(5)
	require.Equal(t, replication.StateReady, a.Client.State())
	forged := slices.Clone(a.Client.ResumeTicket())
	forged[5] ^= 1 // (a bit of the secret: the ticket's layout is version, flags, client, secret…)
	other := slices.Clone(b.Client.ResumeTicket())
	other[2] = 1 // (b's secret, a's seat)
	unknown := slices.Clone(b.Client.ResumeTicket())
	unknown[2], unknown[5] = 9, unknown[5]^1
	for _, tc := range []struct {
		name   string
		ticket []byte
		reason string
	}{
		{"forged", forged, "wrong secret for seat 1"},
		{"replayed", used, "the secret of seat 1 was used already"},
		{"other seat", other, "the ticket names seat 1 with the secret of another seat"},
		{"unknown", unknown, "no seat 9 here"},
	} {
		r.ClientConfig = func(c *replication.ClientConfig) { c.ResumeTicket = tc.ticket }
		cs := r.AddClientFrom("attacker")
		r.ClientConfig = nil
		r.run(3)
		require.Equal(t, replication.StateClosed, cs.Client.State(), tc.name)
		require.ErrorIs(t, cs.Client.Err(), replication.ErrResumeRefused, tc.name)
		require.ErrorContains(t, cs.Client.Err(), tc.reason, tc.name)
		r.Clients = r.Clients[:2]
	}
	require.Equal(t, 4, r.Server.Stats.ResumesRefused)
	require.Equal(t, replication.StateReady, a.Client.State(), "the seat is untouched")
	require.Equal(t, []string{"join 1", "join 2", "suspend 1", "resume 1"}, r.events)
}

// What a resume costs against a late join of the same scene, 2,000
// entities of which some move: a client back after 5 s receives what
// changed meanwhile, a late joiner the whole world. Both are measured over
// the same second (after which both show every moving entity within 3
// ticks), beyond what a client connected throughout received in it (the
// motion itself).
func TestResumeCost(t *testing.T) {
	for _, moving := range []int{200, 2000} {
		t.Run(fmt.Sprintf("%d moving", moving), func(t *testing.T) {
			if harness.RaceEnabled && moving == 2000 {
				t.Skip("a byte figure; the race detector has the 200-moving case (9 s of this one)")
			}
			lat := sim.Conditions{Latency: 30 * time.Millisecond}
			h := harness.NewOn(t, sim.NewNetwork(11, harness.Epoch), sim.Link{Up: lat, Down: lat}, nil, nil)
			a, steady := h.AddClient(), h.AddClient()
			rng := rand.New(rand.NewPCG(11, 2))
			var ents []ecs.Entity
			for i := range 2000 {
				ents = append(ents, h.Spawn(0, components.Vec3{X: float64(i % 50), Z: float64(i / 50)}))
			}
			h.Game = func(int) {
				for _, e := range ents[:moving] {
					p := h.Pos(e)
					p.X += rng.Float64() - 0.5
				}
			}
			h.Run(90)
			require.Equal(t, replication.StateReady, a.Client.State())
			a.Conn.SetLinkDown(true)
			h.Run(150)
			conn, err := h.Net.DialFrom("server", "a-roaming", h.Link)
			require.NoError(t, err)
			a.Conn = conn
			resumeFrom, steadyFrom := a.Client.Stats.BytesIn, steady.Client.Stats.BytesIn
			require.NoError(t, a.Client.Resume(conn))
			late := h.AddClient()
			h.Run(30)
			motion := steady.Client.Stats.BytesIn - steadyFrom
			resumed, joined := a.Client.Stats.BytesIn-resumeFrom-motion, late.Client.Stats.BytesIn-motion
			require.Equal(t, replication.StateReady, a.Client.State())
			require.Equal(t, replication.StateReady, late.Client.State())
			for _, cs := range []*harness.ClientSide{a, late} {
				for _, e := range ents[:moving] {
					id, _ := h.Server.NetID(e)
					st, ok := cs.Client.StateTick(id)
					require.True(t, ok && h.Server.Tick()-st <= 3, "client %d shows %v at tick %d (server %d)", cs.Client.ID(), id, st, h.Server.Tick())
				}
			}
			ratio := float64(resumed) / float64(joined)
			t.Logf("2000 entities, %d moving: beyond the motion's %d bytes a second, a resume after 5 s costs %d bytes, a late join %d (%.1f%%)",
				moving, motion, resumed, joined, 100*ratio)
			if moving == 200 {
				require.Less(t, ratio, 0.07, "a resume costs a fraction of a join (4.1% measured)")
			} else {
				require.Less(t, ratio, 0.6, "a resume costs less than a join (47% measured)")
			}
			h.Game = nil
			h.Run(5)
			h.RequireConverged(nil)
		})
	}
}

// 1,000 hostile resumes a second (forged secrets for a real seat, its
// used secret, unknown seats) are each refused, and the server's tick
// under them is close to without them: ticks with attempts and ticks
// without alternate, and their times compare at the 90th percentile. The players
// stay live and current throughout.
func TestResumeFlood(t *testing.T) {
	r := newSeatRig(t, 12, sim.Link{}, 60)
	r.run(30)
	a := r.Clients[0]
	used := slices.Clone(a.Client.ResumeTicket())
	conn, err := r.Net.DialFrom("server", "a-again", r.Link)
	require.NoError(t, err)
	a.Conn = conn
	require.NoError(t, a.Client.Resume(conn))
	r.run(5)
	hello := func(i int) []byte {
		tk := slices.Clone(used)
		switch i % 3 {
		case 1:
			tk[4] ^= byte(i) | 1 // forged
		case 2:
			tk[2] = byte(3 + i%200) // unknown seat
		}
		return transport.Hello{Version: replication.ProtocolVersion, ProtocolHash: r.Registry.Hash(), Resume: tk[:len(tk)-1-int(tk[len(tk)-1])]}.Append(nil)
	}
	const perAttackTick = 2 * 1000 / harness.NetRate // (every other tick: 1,000 a second)
	var quiet, attacked []time.Duration
	attempts := 0
	for tick := range 180 {
		if tick%2 == 0 {
			for range perAttackTick {
				c, err := r.Net.DialFrom("server", fmt.Sprintf("attacker-%d", attempts%50), sim.Link{})
				require.NoError(t, err)
				require.NoError(t, c.SendMessage(hello(attempts)))
				attempts++
			}
		}
		r.step()
		if tick%2 == 1 { // (a Hello arrives at the server's next tick)
			attacked = append(attacked, r.ServerTime)
		} else {
			quiet = append(quiet, r.ServerTime)
		}
		for ci := range r.Clients {
			stale, err := r.live(ci, 3)
			require.NoError(t, err)
			require.Zero(t, stale, "client %d at tick %d", ci, tick)
		}
	}
	r.run(3)
	require.Equal(t, attempts, r.Server.Stats.ResumesRefused, "every hostile resume refused")
	slices.Sort(quiet)
	slices.Sort(attacked)
	p90 := func(d []time.Duration) time.Duration { return d[len(d)*9/10] }
	t.Logf("%d hostile resumes: server tick p90 %v with them, %v without (worst %v, %v)", attempts, p90(attacked), p90(quiet), attacked[len(attacked)-1], quiet[len(quiet)-1])
	require.Less(t, p90(attacked), 3*p90(quiet)+2*time.Millisecond, "the attempts cost the tick little")
	require.Equal(t, []string{"join 1", "join 2", "suspend 1", "resume 1"}, r.events)
}

// Suspended seats are bounded per source address
// (ServerLimits.MaxSuspendedPerAddress): of six clients behind one address
// whose links die, four keep their seats and two leave at once.
func TestSuspendedPerAddress(t *testing.T) {
	r := newSeatRig(t, 14, sim.Link{}, 10)
	var flat []*harness.ClientSide
	for range 6 {
		flat = append(flat, r.AddClientFrom("flat-7"))
	}
	r.run(10)
	for _, cs := range flat {
		require.Equal(t, replication.StateReady, cs.Client.State())
		cs.Conn.SetLinkDown(true)
	}
	r.run(int(11 * time.Second / harness.TickDt))
	require.Len(t, r.Server.Suspended(), 4, "the address's bound")
	require.Equal(t, 4, r.Server.Stats.Suspended)
	require.Equal(t, 6, r.Server.Stats.Disconnected+len(r.Server.Suspended()), "the others left")
	require.Len(t, r.Server.Clients(), 2, "the two clients elsewhere play on")
}
