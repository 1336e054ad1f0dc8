package main

import (
	"math"
	"math/rand/v2"

	"github.com/archenet/archenet/components"
)

// TraceGenConfig configures [GenerateTrace].
type TraceGenConfig struct {
	Seed    uint64
	Bodies  int     // 0: 50
	Seconds float64 // 0: 5
	Rate    int     // 0: 60
}

// GenerateTrace makes a deterministic trace of cubes dropped onto a floor:
// they fall, bounce, tumble and come to rest. A fifth of the bodies appear
// after one second and a tenth disappear for the last second, so the trace
// carries spawns and despawns. The physics is a toy (point contacts, no
// body–body collisions); what matters is a realistic mix of fast, slow and
// resting bodies for the replication codec.
func GenerateTrace(cfg TraceGenConfig) *Trace {
	if cfg.Bodies <= 0 {
		cfg.Bodies = 50
	}
	if cfg.Seconds <= 0 {
		cfg.Seconds = 5
	}
	if cfg.Rate <= 0 {
		cfg.Rate = 60
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x7a11))
	const (
		gravity     = 9.81
		half        = 0.5 // cube half extent: the centre rests at y = half
		restitution = 0.45
		friction    = 0.75 // horizontal velocity kept per bounce
		substeps    = 4
	)
	type body struct {
		pos, vel components.Vec3
		rot      components.Quat
		ang      components.Vec3 // angular velocity, rad/s, world frame
		resting  bool
	}
	bodies := make([]body, cfg.Bodies)
	side := int(math.Ceil(math.Sqrt(float64(cfg.Bodies))))
	for i := range bodies {
		b := &bodies[i]
		b.pos = components.Vec3{
			X: float64(i%side)*3 - float64(side)*1.5 + rng.Float64()*0.5,
			Y: 3 + rng.Float64()*12,
			Z: float64(i/side)*3 - float64(side)*1.5 + rng.Float64()*0.5,
		}
		b.vel = components.Vec3{X: rng.Float64()*4 - 2, Y: rng.Float64() * 3, Z: rng.Float64()*4 - 2}
		axis := components.Vec3{X: rng.NormFloat64(), Y: rng.NormFloat64(), Z: rng.NormFloat64()}
		axis = axis.Scale(1 / axis.Len())
		b.rot = components.QuatAxisAngle(axis, rng.Float64()*2*math.Pi)
		b.ang = components.Vec3{X: rng.Float64()*8 - 4, Y: rng.Float64()*8 - 4, Z: rng.Float64()*8 - 4}
	}
	ticks := int(math.Round(cfg.Seconds * float64(cfg.Rate)))
	late := cfg.Bodies - cfg.Bodies/5 // ids ≥ late appear after one second
	gone := cfg.Bodies / 10           // ids < gone disappear for the last second
	lateTick, goneTick := cfg.Rate, ticks-cfg.Rate
	dt := 1 / float64(cfg.Rate) / substeps
	t := &Trace{Rate: cfg.Rate}
	for tick := 0; tick < ticks; tick++ {
		for s := 0; s < substeps; s++ {
			for i := range bodies {
				b := &bodies[i]
				if b.resting || (i >= late && tick < lateTick) {
					continue
				}
				b.vel.Y -= gravity * dt
				b.pos = b.pos.Add(b.vel.Scale(dt))
				w := components.Quat{X: b.ang.X, Y: b.ang.Y, Z: b.ang.Z}
				dq := w.Mul(b.rot)
				b.rot = components.Quat{
					X: b.rot.X + dq.X*dt/2, Y: b.rot.Y + dq.Y*dt/2, Z: b.rot.Z + dq.Z*dt/2, W: b.rot.W + dq.W*dt/2,
				}.Normalize()
				if b.pos.Y < half {
					b.pos.Y = half
					b.vel.Y = -b.vel.Y * restitution
					b.vel.X *= friction
					b.vel.Z *= friction
					b.ang = b.ang.Scale(0.6)
					if b.vel.Y < 0.4 && b.vel.X*b.vel.X+b.vel.Z*b.vel.Z < 0.04 && b.ang.Len() < 0.5 {
						b.resting = true
					}
				}
			}
		}
		f := TraceFrame{Tick: tick}
		for i := range bodies {
			if (i >= late && tick < lateTick) || (i < gone && tick >= goneTick) {
				continue
			}
			f.Bodies = append(f.Bodies, TraceBody{ID: i, Pos: bodies[i].pos, Rot: bodies[i].rot})
		}
		t.Frames = append(t.Frames, f)
	}
	return t
}
