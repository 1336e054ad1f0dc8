package game

import (
	"math"
	"time"

	"github.com/mlange-42/arche/ecs"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/input"
)

// shots is a bot's shooting: its predicted projectiles (input.Projectiles
// moves them on its predicted timeline) and the latency with which its
// shots appear on its own screen.
type shots struct {
	own      *input.Projectiles[components.Transform]
	pending  []time.Time // fire times of shots not yet on screen
	seen     map[ecs.Entity]bool
	latency  time.Duration // summed over LatencyN shots
	latencyN int
}

// onPredict is the player's OnPredict: a predicted step that fired spawns
// the projectile at once (unless NoPredictedShots), keyed by its tick, at
// the end of that tick (the server moves it on in the tick it fires).
func (b *Bot) onPredict(tick uint32, before, after *Avatar, _ *ShooterInput) {
	if !fired(before, after) {
		return
	}
	b.shots.pending = append(b.shots.pending, b.opts.Now())
	if b.opts.NoPredictedShots {
		return
	}
	start, vel := shot(after)
	e, err := b.shots.own.Spawn(tick, components.Transform{Pos: start.Add(vel.Scale(simDt)), Rot: components.QuatIdentity()}, b.idVel, b.idProj)
	if err != nil {
		return // too many waiting: the server's spawn will show it
	}
	*(*Projectile)(b.world.Get(e, b.idProj)) = Projectile{Shooter: b.cl.ID()}
	(*components.Velocity)(b.world.Get(e, b.idVel)).Linear = vel
}

// moveProjectile is the projectiles' step: what the server's does.
func (b *Bot) moveProjectile(e ecs.Entity, tr *components.Transform, dt float64) {
	tr.Pos = tr.Pos.Add((*components.Velocity)(b.world.Get(e, b.idVel)).Linear.Scale(dt))
}

// measureShots measures when the bot's shots appear on its screen: the
// provisional projectile at once, or (without prediction) the server's
// spawn a round trip later.
func (b *Bot) measureShots() {
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
