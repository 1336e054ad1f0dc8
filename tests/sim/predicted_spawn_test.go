package sim_test

import (
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/tests/internal/harness"
	"github.com/archenet/archenet/transport/sim"
	"github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/require"
)

// spawnRig: clients send "spawn key K at tick F" requests in their input
// section; the server's game creates a projectile (Transform, Velocity,
// Owner) at tick F at the position both sides derive from the key, and
// keys it with Server.PredictedSpawn. The shooter predicts the projectile
// with Client.SpawnPredicted and moves it in its own present, lead ticks
// ahead of the server.
type spawnRig struct {
	*harness.Harness
	lead     int
	requests map[replication.ClientID][]uint32 // keys sent by each client this tick
	queued   []spawnReq
	refuse   map[uint32]bool // keys the server's game refuses
	created  map[uint32]ecs.Entity
	denied   []error
	shots    map[uint32]ecs.Entity // the shooter's own projectiles (provisional or adopted)
	hist     map[int]map[uint32]components.Vec3
	frozen   bool // projectiles stop (convergence checks)
}

type spawnReq struct {
	owner replication.ClientID
	key   uint32
}

var projVel = components.Vec3{X: 6, Z: -3}

// start is where the projectile of key starts (both sides).
func start(key uint32) components.Vec3 { return components.Vec3{X: float64(key % 50), Z: 10} }

func newSpawnRig(t *testing.T, maxSpawns int) *spawnRig {
	r := &spawnRig{lead: 4, requests: map[replication.ClientID][]uint32{}, refuse: map[uint32]bool{},
		created: map[uint32]ecs.Entity{}, shots: map[uint32]ecs.Entity{}, hist: map[int]map[uint32]components.Vec3{}}
	oneWay := sim.Conditions{Latency: 50 * time.Millisecond} // 100 ms RTT
	r.Harness = harness.New(t, 0, sim.Link{Up: oneWay, Down: oneWay}, func(c *replication.ServerConfig) {
		c.Limits.MaxPredictedSpawns = maxSpawns
		c.Input = func(id replication.ClientID, _ uint32, b []byte) error {
			for ; len(b) >= 4; b = b[4:] {
				r.queued = append(r.queued, spawnReq{id, binary.LittleEndian.Uint32(b)})
			}
			return nil
		}
	})
	r.Game = r.serverGame
	return r
}

func (r *spawnRig) addShooter() *harness.ClientSide {
	var cs *harness.ClientSide
	r.ClientConfig = func(c *replication.ClientConfig) {
		c.Input = func(dst []byte) []byte {
			for _, k := range r.requests[cs.Client.ID()] {
				dst = binary.LittleEndian.AppendUint32(dst, k)
			}
			return dst
		}
	}
	cs = r.AddClient()
	r.ClientConfig = nil
	return cs
}

// serverGame: requests whose tick has come spawn (keyed); projectiles move.
func (r *spawnRig) serverGame(tick int) {
	idTr, idVel := ecs.ComponentID[components.Transform](r.World), ecs.ComponentID[components.Velocity](r.World)
	for _, e := range r.created {
		if r.World.Alive(e) && !r.frozen {
			(*components.Transform)(r.World.Get(e, idTr)).Pos = r.Pos(e).Add(projVel.Scale(1.0 / harness.NetRate))
		}
	}
	keep := r.queued[:0]
	for _, q := range r.queued {
		switch {
		case int(q.key) > tick:
			keep = append(keep, q) // its tick has not come
		case int(q.key) < tick || r.refuse[q.key] || r.created[q.key] != (ecs.Entity{}):
			// late, refused or a repeat: no spawn
		default:
			e := r.Spawn(q.owner, start(q.key), idVel)
			*(*components.Velocity)(r.World.Get(e, idVel)) = components.Velocity{Linear: projVel}
			if err := r.Server.PredictedSpawn(e, q.key); err != nil {
				r.denied = append(r.denied, err)
				r.World.RemoveEntity(e) // over the allowance: the game does not create it
				continue
			}
			r.created[q.key] = e
		}
	}
	r.queued = keep
	h := map[uint32]components.Vec3{}
	for k, e := range r.created {
		if r.World.Alive(e) {
			h[k] = *r.Pos(e)
		}
	}
	r.hist[tick] = h
}

// fire predicts the projectile of key on cs at its present tick (= key)
// and asks the server for it.
func (r *spawnRig) fire(cs *harness.ClientSide, key uint32) ecs.Entity {
	idTr, idVel := ecs.ComponentID[components.Transform](cs.World), ecs.ComponentID[components.Velocity](cs.World)
	e, err := cs.Client.SpawnPredicted(key, idTr, idVel)
	require.NoError(r.T, err)
	*(*components.Transform)(cs.World.Get(e, idTr)) = components.Transform{Pos: start(key), Rot: components.QuatIdentity()}
	*(*components.Velocity)(cs.World.Get(e, idVel)) = components.Velocity{Linear: projVel}
	r.shots[key] = e
	r.requests[cs.Client.ID()] = append(r.requests[cs.Client.ID()], key)
	return e
}

// clientGame moves the shooter's projectiles in its present (tick + lead):
// from the server's newest state, extrapolated to the present tick.
func (r *spawnRig) clientGame(cs *harness.ClientSide) {
	idTr, idNet := ecs.ComponentID[components.Transform](cs.World), ecs.ComponentID[components.NetID](cs.World)
	present := r.Tick + r.lead
	for key, e := range r.shots {
		if !cs.World.Alive(e) {
			delete(r.shots, key)
			continue
		}
		tr := (*components.Transform)(cs.World.Get(e, idTr))
		id := *(*components.NetID)(cs.World.Get(e, idNet))
		if st, ok := cs.Client.StateTick(id); ok { // adopted: the server's state of tick st
			tr.Pos = tr.Pos.Add(projVel.Scale(float64(present-int(st)) / harness.NetRate))
			continue
		}
		tr.Pos = start(key).Add(projVel.Scale(float64(present-int(key)) / harness.NetRate))
	}
}

func (r *spawnRig) stepAll(shooter *harness.ClientSide) {
	r.Step()
	r.requests = map[replication.ClientID][]uint32{}
	r.clientGame(shooter)
}

func countWith[T any](w *ecs.World) int {
	q := w.Query(ecs.All(ecs.ComponentID[T](w)))
	n := q.Count()
	q.Close()
	return n
}

// A client's projectile exists on its screen the tick it fires; once the
// server's spawn arrives there is exactly one entity for it on the shooter
// (the provisional one, adopted) and on every other client; the shooter's
// projectile keeps the server's path.
func TestPredictedSpawnAdopted(t *testing.T) {
	r := newSpawnRig(t, 0)
	shooter, other := r.addShooter(), r.AddClient()
	r.Run(20)
	require.True(t, shooter.Client.Ready() && other.Client.Ready())
	key := uint32(r.Tick + r.lead)
	e := r.fire(shooter, key)
	require.Equal(t, 1, countWith[components.Velocity](shooter.World), "on screen the tick it fires")
	id := *(*components.NetID)(shooter.World.Get(e, ecs.ComponentID[components.NetID](shooter.World)))
	require.Equal(t, uint32(replication.ProvisionalGen), id.Gen)

	adoptedAt := 0
	for i := range 30 {
		r.stepAll(shooter)
		require.LessOrEqual(t, countWith[components.Velocity](shooter.World), 1, "never a duplicate")
		if adoptedAt == 0 && shooter.Client.Stats.SpawnsAdopted == 1 {
			adoptedAt = i + 1
		}
	}
	require.NotZero(t, adoptedAt, "adopted")
	t.Logf("adopted after %d net ticks (100 ms RTT, lead %d)", adoptedAt, r.lead)
	require.True(t, shooter.World.Alive(e), "the provisional entity became the mirror")
	require.Equal(t, 1, countWith[components.Velocity](shooter.World))
	require.Equal(t, 1, countWith[components.Velocity](other.World), "an ordinary spawn elsewhere")
	srvID, _ := r.Server.NetID(r.created[key])
	got := *(*components.NetID)(shooter.World.Get(e, ecs.ComponentID[components.NetID](shooter.World)))
	require.Equal(t, srvID, got, "the server's handle")
	require.False(t, shooter.World.Has(e, ecs.ComponentID[components.Visual](shooter.World)), "not interpolated")
	require.Zero(t, shooter.Client.Stats.SpawnsExpired)

	// Converged: the shooter shows, at its present tick, the server's
	// position for that tick (the server reaches it lead ticks later).
	drawn := *(*components.Transform)(shooter.World.Get(e, ecs.ComponentID[components.Transform](shooter.World)))
	present := r.Tick + r.lead
	for range r.lead {
		r.stepAll(shooter)
	}
	want := r.hist[present][key]
	require.InDelta(t, want.X, drawn.Pos.X, 0.002)
	require.InDelta(t, want.Z, drawn.Pos.Z, 0.002)
}

// A spawn the server refuses disappears on the client after
// PredictedSpawnTimeout (1 s by default); a client that asks for more
// spawns than its allowance gets no more than the allowance, and the
// server keeps serving everyone.
func TestPredictedSpawnRefusedAndHostile(t *testing.T) {
	const allowance = 8
	r := newSpawnRig(t, allowance)
	shooter, other := r.addShooter(), r.AddClient()
	r.Run(20)
	key := uint32(r.Tick + r.lead)
	r.refuse[key] = true
	e := r.fire(shooter, key)
	fired := r.Net.Now()
	for shooter.World.Alive(e) {
		require.Less(t, r.Net.Now().Sub(fired), 2*time.Second)
		r.stepAll(shooter)
	}
	gone := r.Net.Now().Sub(fired)
	t.Logf("refused spawn removed after %v", gone)
	require.Greater(t, gone, time.Second)
	require.LessOrEqual(t, gone, time.Second+harness.TickDt)
	require.Equal(t, uint64(1), shooter.Client.Stats.SpawnsExpired)

	// Hostile: a request every tick, never letting any expire on the server
	// (projectiles live forever here).
	for range 40 {
		key := uint32(r.Tick + r.lead)
		r.requests[shooter.Client.ID()] = append(r.requests[shooter.Client.ID()], key)
		r.Step()
	}
	r.frozen = true
	r.Run(10)
	alive := 0
	for _, e := range r.created {
		if r.World.Alive(e) {
			alive++
		}
	}
	require.Equal(t, allowance, alive, "no more than the allowance")
	require.NotEmpty(t, r.denied)
	require.True(t, errors.Is(r.denied[0], replication.ErrSpawnAllowance), "%v", r.denied[0])
	require.NoError(t, r.Converged(1, nil), "the other client is unaffected")
	require.Equal(t, allowance, countWith[components.Velocity](other.World))
}
