package game

import (
	"errors"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	arche "github.com/mlange-42/arche/ecs"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/ecs"
	"github.com/archenet/archenet/input"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/replication/lagcomp"
	"github.com/archenet/archenet/transport"
)

// ServerOptions configures a [ServerGame].
type ServerOptions struct {
	// Listener accepts clients (QUIC or transport/sim). Required.
	Listener transport.Listener
	// NPCs is the number of wandering, shooting bots the server simulates.
	NPCs int
	// Interest is the interest radius in metres; 0 sends every entity to
	// every client.
	Interest float64
	// Seed seeds the NPCs' randomness.
	Seed uint64
	// NoLagCompensation judges player shots against where avatars are on
	// the server, not where the shooter saw them (for comparison).
	NoLagCompensation bool
	// Workers is replication.ServerConfig.Workers (a host of many matches
	// runs each on one). 0: its default.
	Workers int
	// MaxClientsPerAddress is replication.ServerConfig.Limits.MaxClientsPerAddress:
	// negative when the bots connect from this machine. 0: its default.
	MaxClientsPerAddress int
	// Now is the clock of the replication layer (RTT, timeouts). Nil: time.Now.
	Now func() time.Time
	// Logger receives connection events. Nil: slog.Default().
	Logger *slog.Logger
}

// npc is the server-only state of a wandering bot.
type npc struct {
	Turn   float64 // rad/s
	FireIn int     // ticks until the next shot
}

// player is the server's state of one connected client.
type player struct {
	id     replication.ClientID
	avatar arche.Entity
	has    bool
	pushes uint64 // hits by projectiles: state changes the client cannot predict
}

// ServerStats are the game server's cumulative counters.
type ServerStats struct {
	Ticks                               uint64
	ProjectilesSpawned, ProjectilesGone uint64
	Hits                                uint64
	// PlayerShots and PlayerHits count the projectiles players fired and
	// those that hit another player's avatar.
	PlayerShots, PlayerHits uint64
	// Input ticks consumed with the client's own frame / without it, and
	// frames that came after their tick, summed over every player that has
	// left or is connected.
	InputReceived, InputMissing, InputLate uint64
	// InputOutage counts the missing input ticks past input.Config.Hold,
	// stepped with the outage input (keys released).
	InputOutage uint64
	// InputRejected counts input sections refused (malformed, flooding, or
	// coded against a frame the server no longer holds).
	InputRejected uint64
	// FeedLines counts the hit-feed events sent (each to the clients that
	// see the victim); Aimed the NPC shots aimed at an avatar.
	FeedLines, Aimed uint64
}

// ServerGame is the authoritative arena: an arche world stepped by an
// archenet scheduler at 60 Hz, replicated at 30 Hz.
type ServerGame struct {
	opts  ServerOptions
	world *arche.World
	sched *ecs.Scheduler
	srv   *replication.Server
	// joined and left are the clients the replication server reported
	// (ServerConfig.OnConnect / OnDisconnect) since the last syncPlayers.
	joined, left []replication.ClientID
	auth         *input.Authority[Avatar, ShooterInput]
	feed         *replication.ServerEndpoint[HitFeed]
	hist         *lagcomp.History[components.Transform] // what clients were shown
	rng          *rand.Rand
	log          *slog.Logger

	players [256]*player
	order   []*player // connected players in join order (deterministic iteration)

	idRep, idTrans, idVel, idOwner, idPred, idAvatar, idProj, idNPC arche.ID

	spawnQueue []projectileSpawn
	removeQ    []arche.Entity

	last    time.Time
	started bool
	stats   ServerStats
	closed  bool
}

type projectileSpawn struct {
	pos, vel components.Vec3
	shooter  uint8
	lag      float64      // the shooter's view lag, simulation ticks
	target   arche.Entity // the avatar an NPC aimed at
}

// NewServerGame creates the world, the replication server and the NPCs.
func NewServerGame(opts ServerOptions) (*ServerGame, error) {
	if opts.Listener == nil {
		return nil, errors.New("arena: ServerOptions.Listener is required")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	w := arche.NewWorld()
	g := &ServerGame{opts: opts, world: &w, rng: rand.New(rand.NewPCG(opts.Seed, 0xa4e4a)), log: opts.Logger}
	g.idRep = arche.ComponentID[components.Replicated](g.world)
	g.idTrans = arche.ComponentID[components.Transform](g.world)
	g.idVel = arche.ComponentID[components.Velocity](g.world)
	g.idOwner = arche.ComponentID[components.Owner](g.world)
	g.idPred = arche.ComponentID[components.Predicted](g.world)
	g.idAvatar = arche.ComponentID[Avatar](g.world)
	g.idProj = arche.ComponentID[Projectile](g.world)
	g.idNPC = arche.ComponentID[npc](g.world)

	reg := newRegistry()
	var err error
	// The authority steps every avatar with its owner's input, the step the
	// owner predicts with, and fires when the step says so.
	g.auth, err = input.NewAuthority(g.world, input.AuthorityConfig[Avatar, ShooterInput]{
		Registry: reg, Step: stepAvatar, OnStep: g.onAvatarStep, Outage: outageInput,
	})
	if err != nil {
		return nil, err
	}
	cfg := replication.ServerConfig{
		Registry:   reg,
		NetRate:    netRate,
		NetDivisor: netDivisor,
		// Snapshot ticks are the scheduler's net ticks (g.sched is set
		// below, before the first Send).
		Tick: func() uint32 { return g.sched.Info().NetTick },
		// Joins and leaves are queued: avatars change between systems.
		OnConnect:    func(c replication.ClientID) { g.joined = append(g.joined, c) },
		OnDisconnect: func(c replication.ClientID, _ error) { g.left = append(g.left, c) },
		// A browser page may take seconds after its Welcome to start its
		// game loop (compiling its wasm, its first GL frame, on a slow
		// device or a busy machine); a full server still hands the slot of
		// a join that acknowledged nothing to a new client after a quarter
		// of this.
		Limits:  replication.ServerLimits{MaxClientsPerAddress: opts.MaxClientsPerAddress, JoinTimeout: 10 * time.Second},
		Workers: opts.Workers,
		Now:     opts.Now,
		Logger:  opts.Logger,
	}
	if opts.Interest > 0 {
		cfg.Interest = &replication.Interest{Radius: opts.Interest, Focus: g.focus}
	}
	// Input, input acks and feedback go through the authority's logs.
	if err = g.auth.Configure(&cfg); err != nil {
		return nil, err
	}
	// Net tick n is simulation tick n·netDivisor (ServerConfig.Tick), which
	// clients use to stamp inputs (checked in afterSend).
	if g.srv, err = replication.NewServer(g.world, opts.Listener, cfg); err != nil {
		return nil, err
	}
	if g.feed, err = replication.ServerMessages[HitFeed](g.srv); err != nil {
		return nil, err
	}
	if g.sched, err = ecs.New(g.world, ecs.Config{TickRate: simRate, NetDivisor: netDivisor}); err != nil {
		return nil, err
	}
	g.sched.AddNetSystem(g.srv.ReceiveSystem())
	g.sched.AddNetSystem(ecs.Func(g.syncPlayers))
	g.sched.AddSystem(g.auth.System())
	g.sched.AddSystem(ecs.Func(g.stepNPCs))
	g.sched.AddSystem(ecs.Func(g.stepProjectiles))
	g.sched.AddSystem(g.auth.RoundSystem()) // after the knockback of stepProjectiles
	g.sched.AddSystem(ecs.Func(g.endOfTick))
	g.sched.AddNetSystem(g.srv.SendSystem())
	g.sched.AddNetSystem(ecs.Func(g.afterSend))
	// Lag compensation: the transforms each net tick's snapshot carried.
	if g.hist, err = lagcomp.New[components.Transform](g.world, reg, lagcomp.Config{Depth: 32}); err != nil {
		return nil, err
	}
	g.sched.AddNetSystem(g.hist.System(g.srv.Tick))

	for i := 0; i < opts.NPCs; i++ {
		g.spawnNPC()
	}
	return g, nil
}

// Frame advances the simulation to now (fixed 60 Hz ticks; a frame may run
// zero or several).
func (g *ServerGame) Frame(now time.Time) {
	if !g.started {
		g.started, g.last = true, now
		return
	}
	g.sched.Advance(now.Sub(g.last))
	g.last = now
}

// Step runs exactly one simulation tick (tests).
func (g *ServerGame) Step() { g.sched.Step() }

// Close disconnects every client and closes the listener.
func (g *ServerGame) Close() {
	if g.closed {
		return
	}
	g.closed = true
	g.sched.Close() // finalizes SendSystem: Server.Close, listener close
	_ = g.srv.Close()
}

// Tick returns the last simulation tick run.
func (g *ServerGame) Tick() uint64 { return g.sched.Info().Tick }

// Replication returns the replication server.
func (g *ServerGame) Replication() *replication.Server { return g.srv }

// Stats returns the game counters; input counters include connected
// players' logs.
func (g *ServerGame) Stats() ServerStats {
	s := g.stats
	st := g.auth.Stats()
	s.InputReceived, s.InputMissing, s.InputLate, s.InputOutage = st.Received, st.Missing, st.Late, st.Outage
	s.InputRejected = st.Malformed + st.NoBaseline + st.Flooded
	return s
}

// Pushes returns how many times client id's avatar was hit (a state change
// its prediction cannot know about).
func (g *ServerGame) Pushes(id replication.ClientID) uint64 {
	if p := g.players[id]; p != nil {
		return p.pushes
	}
	return 0
}

// InputStats returns the input log counters of client id.
func (g *ServerGame) InputStats(id replication.ClientID) (input.Stats, bool) {
	return g.auth.ClientStats(id)
}

// Entities returns the number of replicated entities.
func (g *ServerGame) Entities() int {
	q := g.world.Query(arche.All(g.idRep))
	n := q.Count()
	q.Close()
	return n
}

// RTT returns the mean transport RTT over connected clients (0 if unknown).
func (g *ServerGame) RTT() time.Duration {
	var sum time.Duration
	n := 0
	for _, id := range g.srv.Clients() {
		if ci, ok := g.srv.Client(id); ok && ci.RTT > 0 {
			sum += ci.RTT
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / time.Duration(n)
}

// ConnectedClients returns the number of clients past the handshake.
func (g *ServerGame) ConnectedClients() int { return len(g.srv.Clients()) }

// BytesDown returns the bytes sent to clients so far (snapshots and spawn
// messages).
func (g *ServerGame) BytesDown() (snapshots, spawns uint64) {
	return g.srv.Stats.SnapshotBytes, g.srv.Stats.SpawnBytes
}

// MessageBytes returns the bytes of game messages sent (the hit feed),
// summed over clients.
func (g *ServerGame) MessageBytes() uint64 { return g.srv.Stats.MessageBytes }

func (g *ServerGame) player(c replication.ClientID) *player {
	if p := g.players[c]; p != nil {
		return p
	}
	p := &player{id: c}
	g.players[c] = p
	g.order = append(g.order, p)
	return p
}

// syncPlayers spawns an avatar for every client that joined and removes the
// avatars of clients that left (net ticks, after Receive).
func (g *ServerGame) syncPlayers(*arche.World) {
	for _, id := range g.joined {
		if p := g.player(id); !p.has {
			g.spawnAvatar(p)
		}
	}
	g.joined = g.joined[:0]
	for _, id := range g.left {
		p := g.players[id]
		if p == nil {
			continue
		}
		if p.has && g.world.Alive(p.avatar) {
			g.world.RemoveEntity(p.avatar)
		}
		g.players[id] = nil
		g.order = slices.DeleteFunc(g.order, func(q *player) bool { return q == p })
	}
	g.left = g.left[:0]
}

func (g *ServerGame) spawnAvatar(p *player) {
	e := g.world.NewEntity(g.idRep, g.idTrans, g.idOwner, g.idPred, g.idAvatar)
	(*components.Replicated)(g.world.Get(e, g.idRep)).Priority = 4
	(*components.Owner)(g.world.Get(e, g.idOwner)).Client = p.id
	av := (*Avatar)(g.world.Get(e, g.idAvatar))
	// Spread players on a circle around the centre.
	a := float64(p.id) * 2.4
	av.X, av.Z = 20*math.Cos(a), 20*math.Sin(a)
	*(*components.Transform)(g.world.Get(e, g.idTrans)) = components.Transform{Pos: components.Vec3{X: av.X, Z: av.Z}, Rot: yawRot(av.Yaw)}
	p.avatar, p.has = e, true
	g.log.Info("arena: avatar spawned", "client", p.id)
}

func (g *ServerGame) spawnNPC() {
	e := g.world.NewEntity(g.idRep, g.idTrans, g.idVel, g.idNPC)
	tr := (*components.Transform)(g.world.Get(e, g.idTrans))
	tr.Pos = components.Vec3{X: (g.rng.Float64()*2 - 1) * arenaHalf * 0.9, Z: (g.rng.Float64()*2 - 1) * arenaHalf * 0.9}
	yaw := g.rng.Float64() * 2 * math.Pi
	tr.Rot = yawRot(yaw)
	sin, cos := math.Sincos(yaw)
	(*components.Velocity)(g.world.Get(e, g.idVel)).Linear = components.Vec3{X: cos * npcSpeed, Z: sin * npcSpeed}
	n := (*npc)(g.world.Get(e, g.idNPC))
	n.FireIn = npcFireMinTick + g.rng.IntN(npcFireMaxTick-npcFireMinTick)
}

// onAvatarStep is the authority's OnStep: a step that fired queues a
// projectile.
func (g *ServerGame) onAvatarStep(e arche.Entity, before, after *Avatar, in *ShooterInput) {
	if !fired(before, after) {
		return
	}
	pos, vel := shot(after)
	shooter := (*components.Owner)(g.world.Get(e, g.idOwner)).Client
	// What the shooter saw when it fired (bounded by its measured round
	// trip): the projectile is judged against that.
	lag := 0.0
	if view, ok := g.auth.ViewTick(shooter); ok {
		lag = float64(g.sched.Info().Tick) - view*netDivisor
	}
	g.spawnQueue = append(g.spawnQueue, projectileSpawn{pos: pos, vel: vel, shooter: shooter, lag: lag})
}

// stepNPCs makes the NPCs wander and fire.
func (g *ServerGame) stepNPCs(*arche.World) {
	q := g.world.Query(arche.All(g.idNPC, g.idTrans, g.idVel))
	for q.Next() {
		n := (*npc)(q.Get(g.idNPC))
		tr := (*components.Transform)(q.Get(g.idTrans))
		v := (*components.Velocity)(q.Get(g.idVel))
		if g.rng.IntN(60) == 0 {
			n.Turn = (g.rng.Float64()*2 - 1) * 1.5
		}
		yaw := math.Atan2(v.Linear.Z, v.Linear.X) + n.Turn*simDt
		// Turn back toward the centre near the walls.
		if math.Abs(tr.Pos.X) > arenaHalf*0.9 || math.Abs(tr.Pos.Z) > arenaHalf*0.9 {
			yaw = math.Atan2(-tr.Pos.Z, -tr.Pos.X)
		}
		sin, cos := math.Sincos(yaw)
		v.Linear = components.Vec3{X: cos * npcSpeed, Z: sin * npcSpeed}
		tr.Pos = tr.Pos.Add(v.Linear.Scale(simDt))
		tr.Rot = yawRot(yaw)
		if n.FireIn--; n.FireIn <= 0 {
			n.FireIn = npcFireMinTick + g.rng.IntN(npcFireMaxTick-npcFireMinTick)
			aim := yaw
			target, at, ok := g.nearestAvatar(tr.Pos, npcAimRange)
			if ok {
				aim = math.Atan2(at.Z-tr.Pos.Z, at.X-tr.Pos.X)
			}
			aim += (g.rng.Float64()*2 - 1) * npcAimSpread
			s, c := math.Sincos(aim)
			dir := components.Vec3{X: c, Z: s}
			g.spawnQueue = append(g.spawnQueue, projectileSpawn{pos: tr.Pos.Add(dir), vel: dir.Scale(projectileVel), target: target})
		}
	}
}

// nearestAvatar returns the avatar nearest to p within r and its position.
func (g *ServerGame) nearestAvatar(p components.Vec3, r float64) (arche.Entity, components.Vec3, bool) {
	best, ok := r*r, false
	var at components.Vec3
	var e arche.Entity
	for _, pl := range g.order {
		if !pl.has {
			continue
		}
		av := (*Avatar)(g.world.Get(pl.avatar, g.idAvatar))
		dx, dz := av.X-p.X, av.Z-p.Z
		if d := dx*dx + dz*dz; d < best {
			best, ok, at, e = d, true, components.Vec3{X: av.X, Z: av.Z}, pl.avatar
		}
	}
	return e, at, ok
}

// stepProjectiles spawns the shots of this tick, moves projectiles, pushes
// the avatars they hit and removes them when their TTL runs out.
func (g *ServerGame) stepProjectiles(*arche.World) {
	tick := g.sched.Info().Tick
	for _, s := range g.spawnQueue {
		e := g.world.NewEntity(g.idRep, g.idTrans, g.idVel, g.idProj)
		*(*components.Transform)(g.world.Get(e, g.idTrans)) = components.Transform{Pos: s.pos, Rot: components.QuatIdentity()}
		(*components.Velocity)(g.world.Get(e, g.idVel)).Linear = s.vel
		*(*Projectile)(g.world.Get(e, g.idProj)) = Projectile{Shooter: s.shooter, Target: components.RefTo(s.target), TTL: projectileTTL, Lag: s.lag}
		if !s.target.IsZero() {
			g.stats.Aimed++
		}
		g.stats.ProjectilesSpawned++
		if s.shooter != 0 {
			// The shooter predicted this projectile, keyed by the input
			// tick that fired it (this tick): its client adopts it.
			g.world.Add(e, g.idOwner)
			(*components.Owner)(g.world.Get(e, g.idOwner)).Client = s.shooter
			if err := g.srv.PredictedSpawn(e, uint32(tick)); err != nil {
				g.log.Warn("arena: predicted spawn refused", "client", s.shooter, "err", err)
			}
			g.stats.PlayerShots++
		}
	}
	g.spawnQueue = g.spawnQueue[:0]

	q := g.world.Query(arche.All(g.idProj, g.idTrans, g.idVel))
	for q.Next() {
		pr := (*Projectile)(q.Get(g.idProj))
		tr := (*components.Transform)(q.Get(g.idTrans))
		v := (*components.Velocity)(q.Get(g.idVel)).Linear
		tr.Pos = tr.Pos.Add(v.Scale(simDt))
		pr.TTL--
		gone := pr.TTL == 0 || math.Abs(tr.Pos.X) > arenaHalf+5 || math.Abs(tr.Pos.Z) > arenaHalf+5
		for _, p := range g.order {
			if gone || !p.has || p.id == pr.Shooter {
				continue
			}
			av := (*Avatar)(g.world.Get(p.avatar, g.idAvatar))
			at := g.targetAt(p, pr, float64(tick))
			dx, dz := at.X-tr.Pos.X, at.Z-tr.Pos.Z
			if dx*dx+dz*dz < hitRadius*hitRadius {
				if pr.Shooter != 0 {
					g.stats.PlayerHits++
				}
				f := knockback / projectileVel
				av.VX += v.X * f
				av.VZ += v.Z * f
				p.pushes++
				g.stats.Hits++
				gone = true
				// The hit feed: to the clients that see the victim.
				if err := g.feed.SendAbout(p.avatar, HitFeed{Victim: components.RefTo(p.avatar), Shooter: pr.Shooter}, replication.Reliable); err == nil {
					g.stats.FeedLines++
				}
			}
		}
		if gone {
			g.removeQ = append(g.removeQ, q.Entity())
		}
	}
	for _, e := range g.removeQ {
		g.world.RemoveEntity(e)
		g.stats.ProjectilesGone++
	}
	g.removeQ = g.removeQ[:0]
}

// endOfTick derives the replicated Transform of every avatar from its
// rounded state (the authority's RoundSystem ran before).
func (g *ServerGame) endOfTick(*arche.World) {
	info := g.sched.Info()
	g.stats.Ticks = info.Tick
	for _, p := range g.order {
		if !p.has {
			continue
		}
		av := (*Avatar)(g.world.Get(p.avatar, g.idAvatar))
		*(*components.Transform)(g.world.Get(p.avatar, g.idTrans)) = components.Transform{Pos: components.Vec3{X: av.X, Z: av.Z}, Rot: yawRot(av.Yaw)}
	}
}

func (g *ServerGame) afterSend(*arche.World) {
	if info := g.sched.Info(); uint64(g.srv.Tick())*netDivisor != info.Tick {
		g.log.Warn("arena: net tick does not match the simulation tick", "net", g.srv.Tick(), "sim", info.Tick)
	}
}

// targetAt is where projectile pr tests player p's avatar at tick: as the
// shooter saw it — its state at the shooter's render time, tick − Lag, as
// the shooter's client interpolated it — for a player's shot; where it is
// now for an NPC's (or without lag compensation, or outside the history).
func (g *ServerGame) targetAt(p *player, pr *Projectile, tick float64) components.Vec3 {
	if pr.Shooter != 0 && !g.opts.NoLagCompensation {
		var tr components.Transform
		view := g.hist.Clamp((tick - pr.Lag) / netDivisor)
		if g.hist.At(p.avatar, view, &tr) {
			return tr.Pos
		}
	}
	av := (*Avatar)(g.world.Get(p.avatar, g.idAvatar))
	return components.Vec3{X: av.X, Z: av.Z}
}

// Rewinds returns the bounds and statistics of the view ticks the players
// reported with their shots (input.Authority.ViewTick).
func (g *ServerGame) Rewinds() *lagcomp.Rewinds { return g.auth.Rewinds() }

// focus is the interest focus of a client: its avatar.
func (g *ServerGame) focus(c replication.ClientID) (components.Vec3, bool) {
	p := g.players[c]
	if p == nil || !p.has {
		return components.Vec3{}, false
	}
	av := (*Avatar)(g.world.Get(p.avatar, g.idAvatar))
	return components.Vec3{X: av.X, Z: av.Z}, true
}
