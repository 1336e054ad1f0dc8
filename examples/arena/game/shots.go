package game

import (
	"math"
	"time"

	"github.com/mlange-42/arche/ecs"

	"github.com/archenet/archenet/components"
)

// ownShot is a projectile this bot fired, as its client shows it: in the
// bot's present (its newest predicted tick), from the server's newest state
// once the server's spawn adopted it, else from where it was fired.
type ownShot struct {
	entity     ecs.Entity
	fired      uint32 // the input tick that fired it (its predicted-spawn key)
	start, vel components.Vec3
	authTick   uint32 // simulation tick of authPos (0: none yet)
	authPos    components.Vec3
	authNet    uint32 // the server tick of the state last read
}

// shots is a bot's shooting: predicted projectiles and the latency with
// which its shots appear on its own screen.
type shots struct {
	own      map[ecs.Entity]*ownShot
	pending  []time.Time // fire times of shots not yet on screen
	seen     map[ecs.Entity]bool
	latency  time.Duration // summed over LatencyN shots
	latencyN int
}

// onPredict is the player's OnPredict: a predicted step that fired spawns
// the projectile at once (unless NoPredictedShots), keyed by its tick.
func (b *Bot) onPredict(tick uint32, before, after *Avatar, _ *ShooterInput) {
	if !fired(before, after) {
		return
	}
	b.shots.pending = append(b.shots.pending, b.opts.Now())
	if b.opts.NoPredictedShots {
		return
	}
	start, vel := shot(after)
	e, err := b.cl.SpawnPredicted(tick, b.idTrans, b.idVel, b.idProj)
	if err != nil {
		return // too many waiting: the server's spawn will show it
	}
	*(*Projectile)(b.world.Get(e, b.idProj)) = Projectile{Shooter: b.cl.ID()}
	(*components.Velocity)(b.world.Get(e, b.idVel)).Linear = vel
	s := &ownShot{entity: e, fired: tick, start: start, vel: vel}
	b.shots.own[e] = s
	b.placeShot(s, tick)
}

// moveShots puts the bot's predicted projectiles at its present tick and
// measures when shots appear on screen.
func (b *Bot) moveShots() {
	present := b.player.Tick()
	for e, s := range b.shots.own {
		if !b.world.Alive(e) {
			delete(b.shots.own, e)
			continue
		}
		id := *(*components.NetID)(b.world.Get(e, b.idNetID))
		if st, ok := b.cl.StateTick(id); ok && st != s.authNet {
			// The replication client just wrote the server's state of st.
			s.authNet, s.authTick = st, uint32(b.cl.SimTick(st))
			s.authPos = (*components.Transform)(b.world.Get(e, b.idTrans)).Pos
		}
		b.placeShot(s, present)
	}
	// A shot of ours shows up: the provisional one at once, or (without
	// prediction) the server's spawn a round trip later.
	me := b.cl.ID()
	q := b.world.Query(ecs.All(b.idProj))
	for q.Next() {
		if e := q.Entity(); !b.shots.seen[e] && (*Projectile)(q.Get(b.idProj)).Shooter == me && len(b.shots.pending) > 0 {
			b.shots.seen[e] = true
			b.shots.latency += b.opts.Now().Sub(b.shots.pending[0])
			b.shots.latencyN++
			b.shots.pending = b.shots.pending[1:]
		}
	}
	for e := range b.shots.seen {
		if !b.world.Alive(e) {
			delete(b.shots.seen, e)
		}
	}
}

// placeShot sets a predicted projectile's transform at tick t: the end of
// tick t is start + vel·(t − fired + 1)·dt (see shot), or the server's
// state moved on to t.
func (b *Bot) placeShot(s *ownShot, t uint32) {
	pos := s.start.Add(s.vel.Scale(float64(int32(t-s.fired)+1) * simDt))
	if s.authTick != 0 {
		pos = s.authPos.Add(s.vel.Scale(float64(int32(t-s.authTick)) * simDt))
	}
	*(*components.Transform)(b.world.Get(s.entity, b.idTrans)) = components.Transform{Pos: pos, Rot: components.QuatIdentity()}
}

// aim turns toward the nearest other avatar as drawn (within npcAimRange)
// and fires at it; it reports false when there is none.
func (b *Bot) aim(s *Avatar) (yaw float64, ok bool) {
	best := npcAimRange * npcAimRange
	q := b.world.Query(ecs.All(b.idAvatar, b.idVisual))
	for q.Next() {
		p := (*components.Visual)(q.Get(b.idVisual)).Pos
		dx, dz := p.X-s.X, p.Z-s.Z
		if d := dx*dx + dz*dz; d < best && q.Entity() != b.avatarEntity() {
			best, yaw, ok = d, math.Atan2(dz, dx), true
		}
	}
	return yaw, ok
}

func (b *Bot) avatarEntity() ecs.Entity {
	e, _ := b.player.Entity()
	return e
}

// SpawnLatency returns the mean time from firing to the projectile on the
// bot's own screen, and the number of shots measured.
func (b *Bot) SpawnLatency() (time.Duration, int) {
	if b.shots.latencyN == 0 {
		return 0, 0
	}
	return b.shots.latency / time.Duration(b.shots.latencyN), b.shots.latencyN
}
