package game

import (
	"math"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/schema"
)

// Game constants shared by server and clients. The simulation runs at
// simRate; every netDivisor-th tick is a network tick (snapshot rate
// simRate/netDivisor).
const (
	simRate    = 60
	netDivisor = 2
	netRate    = simRate / netDivisor
	simDt      = 1.0 / simRate

	arenaHalf      = 50.0 // the arena is [−50, 50]² metres on the x/z plane
	avatarSpeed    = 6.0  // m/s
	avatarAccel    = 10.0 // 1/s: how fast velocity follows the keys
	fireCooldown   = 20   // ticks between an avatar's shots
	projectileTTL  = 60   // ticks (1 s)
	projectileVel  = 18.0 // m/s
	hitRadius      = 0.6  // m: a projectile this close to an avatar pushes it
	knockback      = 5.0  // m/s added on a hit
	npcSpeed       = 3.0  // m/s
	npcFireMinTick = 40
	npcFireMaxTick = 100
	npcAimRange    = 15.0 // m: NPCs shoot at avatars this close
	npcAimSpread   = 0.1  // rad
)

// Movement keys of [ShooterInput].Keys.
const (
	keyForward = 1 << iota
	keyBack
	keyLeft
	keyRight
)

// ShooterInput is one tick of a player's input: held movement keys, the aim
// direction, and the fire button.
type ShooterInput struct {
	Keys uint8   `net:"range=0:15"`
	Yaw  float64 `net:"angle,bits=12"`
	Fire bool
}

// outageInput is the input the server applies while a player's inputs are
// cut off, and the player predicts then (input.AuthorityConfig.Outage,
// input.PlayerConfig.Outage): keys released, no fire, aim kept.
func outageInput(last ShooterInput) ShooterInput {
	return ShooterInput{Yaw: last.Yaw}
}

// Avatar is the predicted state of a player's avatar: what the server and
// the owning client both step with [stepAvatar]. Every field is owner-only:
// other clients draw the avatar from its interpolated Transform.
type Avatar struct {
	X        float64 `net:"range=-64:64,step=0.001,owner"`
	Z        float64 `net:"range=-64:64,step=0.001,owner"`
	VX       float64 `net:"range=-32:32,step=0.001,owner"`
	VZ       float64 `net:"range=-32:32,step=0.001,owner"`
	Yaw      float64 `net:"angle,bits=12,owner"`
	Cooldown uint8   `net:"range=0:63,owner"`
}

// Projectile marks a short-lived shot. TTL and Lag are server-only: the
// client learns of the end through the despawn.
type Projectile struct {
	Shooter uint8 `net:"range=0:255"` // owner client of the shooter, 0 for an NPC
	// Target is the avatar an NPC aimed its shot at (none for a player's):
	// a replicated reference, which a client reads as that avatar's mirror
	// (none while it does not see it), e.g. to warn its player of the shots
	// coming at it.
	Target components.Ref
	TTL    uint16  `net:"-"`
	Lag    float64 `net:"-"` // the shooter's view lag in simulation ticks
}

// HitFeed is a line of the arena's hit feed: an avatar was hit, by a
// player (Shooter, its client) or an NPC (0). The server sends it about
// the victim (an entity-scoped event): exactly the clients that see the
// victim get it, after its spawn; its Tick lets them show it when their
// interpolated view reaches the hit.
type HitFeed struct {
	Victim  components.Ref
	Shooter uint8 `net:"range=0:255"`
}

// newRegistry returns the replicated components, in the same order on
// server and clients (the protocol hash covers it).
func newRegistry() *schema.Registry {
	reg := schema.NewRegistry()
	schema.MustRegister[components.Transform](reg)
	schema.MustRegister[components.Velocity](reg)
	schema.MustRegister[Projectile](reg)
	schema.MustRegister[Avatar](reg)
	// Marks avatars: their owners predict them (input.Player) instead of
	// interpolating them.
	schema.MustRegister[components.Predicted](reg)
	schema.MustRegisterMessage[HitFeed](reg)
	return reg
}

// stepAvatar is the deterministic avatar step the server runs with the
// input it received and the owning client runs with the input it sent.
// Both ends feed it rounded inputs and rounded states, so they compute
// bit-identical results.
func stepAvatar(s *Avatar, in *ShooterInput, dt float64) {
	s.Yaw = in.Yaw
	var fx, fz float64
	if in.Keys&keyForward != 0 {
		fx++
	}
	if in.Keys&keyBack != 0 {
		fx--
	}
	if in.Keys&keyLeft != 0 {
		fz++
	}
	if in.Keys&keyRight != 0 {
		fz--
	}
	if fx != 0 && fz != 0 {
		fx, fz = fx*math.Sqrt2/2, fz*math.Sqrt2/2
	}
	sin, cos := math.Sincos(s.Yaw)
	wx := (fx*cos - fz*sin) * avatarSpeed
	wz := (fx*sin + fz*cos) * avatarSpeed
	a := math.Min(1, avatarAccel*dt)
	s.VX += (wx - s.VX) * a
	s.VZ += (wz - s.VZ) * a
	s.X += s.VX * dt
	s.Z += s.VZ * dt
	// Walls: stop at the edge.
	if s.X < -arenaHalf || s.X > arenaHalf {
		s.X = math.Max(-arenaHalf, math.Min(arenaHalf, s.X))
		s.VX = 0
	}
	if s.Z < -arenaHalf || s.Z > arenaHalf {
		s.Z = math.Max(-arenaHalf, math.Min(arenaHalf, s.Z))
		s.VZ = 0
	}
	if s.Cooldown > 0 {
		s.Cooldown--
	} else if in.Fire {
		s.Cooldown = fireCooldown
	}
}

// shot returns where the projectile of a shot fired by an avatar in state s
// starts and its velocity. A shot fired in the step of tick T is created at
// start during tick T and moved by one step in the same tick; at the end of
// tick t it is at start + vel·(t − T + 1)·simDt (server and shooter alike).
func shot(s *Avatar) (start, vel components.Vec3) {
	sin, cos := math.Sincos(s.Yaw)
	dir := components.Vec3{X: cos, Z: sin}
	return components.Vec3{X: s.X, Z: s.Z}.Add(dir), dir.Scale(projectileVel)
}

// fired reports whether the step from before to after fired a shot.
func fired(before, after *Avatar) bool { return before.Cooldown == 0 && after.Cooldown == fireCooldown }

// yawRot is the rotation about the vertical axis by yaw.
func yawRot(yaw float64) components.Quat {
	return components.QuatAxisAngle(components.Vec3{Y: 1}, -yaw)
}

// avatarVisual is the drawn pose of an avatar state.
func avatarVisual(s *Avatar) components.Visual {
	return components.Visual{Pos: components.Vec3{X: s.X, Z: s.Z}, Rot: yawRot(s.Yaw)}
}

// SimRate and NetRate are the arena's simulation and snapshot rates (Hz).
const (
	SimRate = simRate
	NetRate = netRate
)

// Exported for front ends that drive a [Bot] through [BotOptions.Control]
// and draw the arena.
const (
	// KeyForward, KeyBack, KeyLeft and KeyRight are the movement bits of
	// [ShooterInput].Keys. They move relative to the aim (Yaw): forward
	// toward it, left/right strafing.
	KeyForward = keyForward
	KeyBack    = keyBack
	KeyLeft    = keyLeft
	KeyRight   = keyRight
	// ArenaHalf is half the side of the square arena [−ArenaHalf,
	// ArenaHalf]² on the x/z plane, in metres.
	ArenaHalf = arenaHalf
	// HitRadius is how close (metres) a projectile must come to an avatar
	// to hit it.
	HitRadius = hitRadius
)
