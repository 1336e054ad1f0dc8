package main

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/archenet/archenet/components"
)

// TraceGenConfig configures [GenerateTrace].
type TraceGenConfig struct {
	Seed    uint64
	Bodies  int     // 0: 50
	Seconds float64 // 0: 5
	Rate    int     // 0: 60
	// BurstAt, if set, is when an explosion at the middle of the floor
	// throws every body within BurstRadius metres of it up and out, spinning,
	// at once (seconds from the start).
	BurstAt     float64
	BurstRadius float64
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
	burstTick := -1
	if cfg.BurstAt > 0 {
		burstTick = int(math.Round(cfg.BurstAt * float64(cfg.Rate)))
	}
	for tick := 0; tick < ticks; tick++ {
		if tick == burstTick {
			for i := range bodies {
				b := &bodies[i]
				out := components.Vec3{X: b.pos.X, Z: b.pos.Z}
				d := out.Len()
				if d > cfg.BurstRadius {
					continue
				}
				if d > 0 {
					out = out.Scale(1 / d)
				}
				power := 1 - d/cfg.BurstRadius
				b.vel = components.Vec3{X: out.X * 8 * power, Y: 4 + 8*power + rng.Float64()*2, Z: out.Z * 8 * power}
				b.ang = components.Vec3{X: rng.Float64()*16 - 8, Y: rng.Float64()*16 - 8, Z: rng.Float64()*16 - 8}
				b.resting = false
			}
		}
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

// DrumConfig configures [GenerateDrum].
type DrumConfig struct {
	Seed    uint64
	Bodies  int     // 0: 250
	Seconds float64 // 0: 10
	Rate    int     // 0: 30
}

// GenerateDrum makes a deterministic high-motion trace: cubes tumbling in a
// drum (radius 6 m, 8 m long, axis along z) that turns at 1.5 rad/s. The
// wall carries a cube up until it lets go somewhere past the side; it flies,
// spinning, until it hits the wall again, which damps its spin and carries
// it on. Every body moves every tick, in position and rotation. As with
// GenerateTrace the physics is a toy (no body–body contacts); what matters
// is a scene the replication codec cannot coast through.
func GenerateDrum(cfg DrumConfig) *Trace {
	if cfg.Bodies <= 0 {
		cfg.Bodies = 250
	}
	if cfg.Seconds <= 0 {
		cfg.Seconds = 10
	}
	if cfg.Rate <= 0 {
		cfg.Rate = 30
	}
	const (
		radius  = 6.0
		halfLen = 4.0
		omega   = 1.5 // rad/s, counter-clockwise seen from +z
		gravity = 9.81
		inner   = radius - 0.5 // where a cube's centre rides on the wall
		steps   = 8            // substeps per tick
	)
	rng := rand.New(rand.NewPCG(cfg.Seed, 0xd7a11))
	type body struct {
		pos, vel components.Vec3
		rot      components.Quat
		ang      components.Vec3 // rad/s, world frame
		carried  bool
		release  float64 // angle (from straight down) at which the wall lets go
	}
	newRelease := func() float64 { return math.Pi/2 + rng.Float64()*math.Pi/2 }
	bodies := make([]body, cfg.Bodies)
	for i := range bodies {
		b := &bodies[i]
		a := (rng.Float64() - 0.5) * math.Pi / 1.5 // around the bottom
		r := inner - rng.Float64()*0.01
		b.pos = components.Vec3{X: r * math.Sin(a), Y: -r * math.Cos(a), Z: (rng.Float64()*2 - 1) * (halfLen - 0.5)}
		axis := components.Vec3{X: rng.NormFloat64(), Y: rng.NormFloat64(), Z: rng.NormFloat64()}
		b.rot = components.QuatAxisAngle(axis.Scale(1/axis.Len()), rng.Float64()*2*math.Pi)
		b.ang = components.Vec3{X: rng.Float64()*2 - 1, Y: rng.Float64()*2 - 1, Z: omega}
		b.carried, b.release = true, newRelease()
	}
	dt := 1 / float64(cfg.Rate) / steps
	ticks := int(math.Round(cfg.Seconds * float64(cfg.Rate)))
	t := &Trace{Rate: cfg.Rate}
	for tick := 0; tick < ticks; tick++ {
		for s := 0; s < steps; s++ {
			for i := range bodies {
				b := &bodies[i]
				if b.carried {
					// Ride the wall: turn with the drum about the z axis.
					a := math.Atan2(b.pos.X, -b.pos.Y) + omega*dt
					b.pos.X, b.pos.Y = inner*math.Sin(a), -inner*math.Cos(a)
					if a > b.release {
						b.carried = false
						// Let go with the wall's velocity, and a kick of spin.
						b.vel = components.Vec3{X: inner * omega * math.Cos(a), Y: inner * omega * math.Sin(a), Z: rng.Float64() - 0.5}
						b.ang = components.Vec3{X: rng.Float64()*10 - 5, Y: rng.Float64()*10 - 5, Z: rng.Float64()*10 - 5}
					}
				} else {
					b.vel.Y -= gravity * dt
					b.pos = b.pos.Add(b.vel.Scale(dt))
					if d := math.Hypot(b.pos.X, b.pos.Y); d >= inner {
						b.pos.X, b.pos.Y = b.pos.X*inner/d, b.pos.Y*inner/d
						b.carried, b.release = true, newRelease()
						b.ang = b.ang.Scale(0.3).Add(components.Vec3{Z: omega})
					}
				}
				if b.pos.Z > halfLen-0.5 || b.pos.Z < -(halfLen-0.5) {
					b.pos.Z = math.Max(-(halfLen - 0.5), math.Min(halfLen-0.5, b.pos.Z))
					b.vel.Z = -b.vel.Z
				}
				w := components.Quat{X: b.ang.X, Y: b.ang.Y, Z: b.ang.Z}
				dq := w.Mul(b.rot)
				b.rot = components.Quat{
					X: b.rot.X + dq.X*dt/2, Y: b.rot.Y + dq.Y*dt/2, Z: b.rot.Z + dq.Z*dt/2, W: b.rot.W + dq.W*dt/2,
				}.Normalize()
			}
		}
		f := TraceFrame{Tick: tick, Bodies: make([]TraceBody, len(bodies))}
		for i := range bodies {
			f.Bodies[i] = TraceBody{ID: i, Pos: bodies[i].pos, Rot: bodies[i].rot}
		}
		t.Frames = append(t.Frames, f)
	}
	return t
}

// scenes are the generated traces -scene and -gen-trace know, by name.
var scenes = map[string]func(seed uint64) *Trace{
	"falling": func(seed uint64) *Trace { return GenerateTrace(TraceGenConfig{Seed: seed}) },
	// 300 cubes fall and come to rest; at 5 s an explosion throws about
	// half of them up at once.
	"falling-burst": func(seed uint64) *Trace {
		return GenerateTrace(TraceGenConfig{Seed: seed, Bodies: 300, Seconds: 8, BurstAt: 5, BurstRadius: 20})
	},
	// 250 cubes tumbling in a turning drum at 30 Hz: all move, all the time.
	"drum": func(seed uint64) *Trace { return GenerateDrum(DrumConfig{Seed: seed}) },
}

func sceneNames() string {
	names := make([]string, 0, len(scenes))
	for n := range scenes {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}
