package main

import (
	"math"
	"math/rand/v2"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/mlange-42/arche/ecs"
)

// scene is the synthetic world: entities scattered over a square world, a
// fraction of them wandering, and one wandering avatar per connected client
// (owned by it, so the server's interest follows it).
type scene struct {
	r       *rig
	rng     *rand.Rand
	movers  []walker
	avatars [256]*walker // by client id
	nAvatar int
	moving  bool
	dt      float64

	idRep, idOwner ecs.ID
	idState        ecs.ID // PlayerState (-owner-fields)
	tick           int
}

// walker moves at a constant speed along a slowly turning heading (yaw,
// radians from +Z towards +X), bouncing off the world's edges.
type walker struct {
	e              ecs.Entity
	heading, speed float64
	turn           float64 // rad/s, random walk
}

func newScene(r *rig) *scene {
	s := &scene{
		r: r, rng: rand.New(rand.NewPCG(uint64(r.cfg.Seed), 0x5ce9e)), moving: true,
		dt:    1 / float64(r.cfg.Rate),
		idRep: ecs.ComponentID[components.Replicated](r.sw), idOwner: ecs.ComponentID[components.Owner](r.sw),
	}
	if r.cfg.OwnerFields {
		s.idState = ecs.ComponentID[PlayerState](r.sw)
	}
	nMoving := int(math.Round(r.cfg.Moving * float64(r.cfg.Entities)))
	for i := 0; i < r.cfg.Entities; i++ {
		w := s.spawn(0)
		if i < nMoving {
			s.movers = append(s.movers, w)
		}
	}
	return s
}

func (s *scene) spawn(owner replication.ClientID) walker {
	ids := []ecs.ID{s.idRep, s.r.tid}
	if owner != 0 {
		ids = append(ids, s.idOwner)
		if s.r.cfg.OwnerFields {
			ids = append(ids, s.idState)
		}
	}
	e := s.r.sw.NewEntity(ids...)
	w := walker{e: e, heading: s.rng.Float64() * 2 * math.Pi, speed: 1 + s.rng.Float64()*4}
	tr := (*components.Transform)(s.r.sw.Get(e, s.r.tid))
	tr.Pos = components.Vec3{X: s.rng.Float64() * s.r.cfg.World, Z: s.rng.Float64() * s.r.cfg.World}
	tr.Rot = yaw(w.heading)
	if owner != 0 {
		(*components.Owner)(s.r.sw.Get(e, s.idOwner)).Client = owner
	}
	return w
}

func yaw(h float64) components.Quat { return components.QuatAxisAngle(components.Vec3{Y: 1}, h) }

// update is the server's game logic for one net tick.
func (s *scene) update() {
	if s.nAvatar < len(s.r.peers) {
		for _, id := range s.r.srv.Clients() {
			if s.avatars[id] == nil {
				w := s.spawn(id)
				s.avatars[id] = &w
				s.nAvatar++
			}
		}
	}
	if !s.moving {
		return
	}
	for i := range s.movers {
		s.walk(&s.movers[i])
	}
	s.tick++
	for _, a := range s.avatars {
		if a != nil {
			s.walk(a)
			if s.r.cfg.OwnerFields {
				st := (*PlayerState)(s.r.sw.Get(a.e, s.idState))
				st.Ammo, st.Cooldown = uint16(s.tick%1000), uint8(s.tick%64)
			}
		}
	}
}

func (s *scene) walk(w *walker) {
	w.turn = math.Max(-1, math.Min(1, w.turn+(s.rng.Float64()-0.5)*0.4))
	w.heading += w.turn * s.dt
	tr := (*components.Transform)(s.r.sw.Get(w.e, s.r.tid))
	sin, cos := math.Sincos(w.heading)
	p := tr.Pos.Add(components.Vec3{X: sin, Z: cos}.Scale(w.speed * s.dt))
	size := s.r.cfg.World
	if p.X < 0 || p.X > size {
		p.X = math.Max(0, math.Min(size, p.X))
		w.heading = -w.heading
	}
	if p.Z < 0 || p.Z > size {
		p.Z = math.Max(0, math.Min(size, p.Z))
		w.heading = math.Pi - w.heading
	}
	tr.Pos, tr.Rot = p, yaw(w.heading)
}

// focus returns the position of p's avatar.
func (s *scene) focus(p *peer) (components.Vec3, bool) {
	a := s.avatars[p.c.ID()]
	if a == nil || p.c.ID() == 0 {
		return components.Vec3{}, false
	}
	return (*components.Transform)(s.r.sw.Get(a.e, s.r.tid)).Pos, true
}
