package replication

import (
	"errors"
	"math"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/snapshot"
	"github.com/mlange-42/arche/ecs"
)

// Interest configures per-client relevance: each client receives the
// entities within Radius of its focus point (found with a spatial hash
// grid), entities without a Transform (global state), and the entities it
// owns. An entity that is relevant stays relevant until it is farther than
// Radius × (1 + Hysteresis), so an entity on the border does not flap
// between spawned and despawned.
type Interest struct {
	// Radius of the area of interest in metres. Required (> 0).
	Radius float64
	// Hysteresis widens the leave radius: 0 means 0.15.
	Hysteresis float64
	// CellSize of the spatial hash grid. 0: Radius/2.
	CellSize float64
	// Focus returns a client's point of interest. Nil (or ok = false): the
	// position of the first entity the client owns that has a Transform;
	// a client with no such entity gets only global and owned entities.
	Focus func(c ClientID) (pos components.Vec3, ok bool)
	// Filter, if set, must also accept an entity for it to be relevant.
	Filter func(c ClientID, e ecs.Entity) bool
	// Every recomputes relevance every N-th net tick (entities spawned in
	// between wait for the next update). 0: every 2nd net tick (15 Hz at
	// 30 Hz); 1: every tick.
	Every int
}

func (i *Interest) validate() error {
	if !(i.Radius > 0) || math.IsInf(i.Radius, 0) {
		return errors.New("replication: Interest.Radius must be positive")
	}
	if i.Hysteresis < 0 {
		return errors.New("replication: Interest.Hysteresis must not be negative")
	}
	if i.Every < 0 {
		return errors.New("replication: Interest.Every must not be negative")
	}
	return nil
}

type cellKey struct{ x, z int32 }

// interestGrid is a spatial hash over the x/z plane of every replicated
// entity with a Transform, rebuilt each net tick; cell lists keep their
// memory across ticks.
type interestGrid struct {
	cfg     Interest
	every   uint32
	fresh   snapshot.Bitset // slots (re)allocated since the last update
	leave   float64
	cell    float64
	cells   map[cellKey][]uint32
	pos     []components.Vec3 // by slot
	hasPos  snapshot.Bitset
	global  snapshot.Bitset // alive without Transform
	owned   map[ClientID]components.Vec3
	ownedOK map[ClientID]bool
	ownedBy map[ClientID][]uint32 // slots owned by each client
}

func newInterestGrid(cfg *Interest) *interestGrid {
	g := &interestGrid{cfg: *cfg, cells: map[cellKey][]uint32{}, owned: map[ClientID]components.Vec3{}, ownedOK: map[ClientID]bool{},
		ownedBy: map[ClientID][]uint32{}}
	h := cfg.Hysteresis
	if h == 0 {
		h = 0.15
	}
	g.leave = cfg.Radius * (1 + h)
	g.every = uint32(cfg.Every)
	if g.every == 0 {
		g.every = 2
	}
	g.cell = cfg.CellSize
	if g.cell <= 0 {
		g.cell = cfg.Radius / 2
	}
	return g
}

func (g *interestGrid) key(p components.Vec3) cellKey {
	return cellKey{int32(math.Floor(p.X / g.cell)), int32(math.Floor(p.Z / g.cell))}
}

func (g *interestGrid) rebuild(s *Server) {
	for k, v := range g.cells {
		if len(v) == 0 {
			delete(g.cells, k) // forget cells that stayed empty a tick
			continue
		}
		g.cells[k] = v[:0]
	}
	g.hasPos.Reset()
	g.global.Reset()
	clear(g.ownedOK)
	for k, v := range g.ownedBy {
		g.ownedBy[k] = v[:0]
	}
	for len(g.pos) < len(s.slots) {
		g.pos = append(g.pos, components.Vec3{})
	}
	for slot := range s.slots {
		si := &s.slots[slot]
		if !si.alive {
			continue
		}
		if o := si.meta.Owner; o != 0 {
			g.ownedBy[o] = append(g.ownedBy[o], uint32(slot))
		}
		if !s.world.Has(si.entity, s.idTrans) {
			g.global.Set(uint32(slot))
			continue
		}
		p := (*components.Transform)(s.world.Get(si.entity, s.idTrans)).Pos
		g.pos[slot] = p
		g.hasPos.Set(uint32(slot))
		k := g.key(p)
		g.cells[k] = append(g.cells[k], uint32(slot))
		if o := si.meta.Owner; o != 0 && !g.ownedOK[o] {
			g.owned[o], g.ownedOK[o] = p, true
		}
	}
}

// due reports whether relevance is recomputed this net tick.
func (g *interestGrid) due(tick uint32) bool { return tick%g.every == 0 }

// effective narrows a client's last computed relevance to this tick: alive
// slots that were not reallocated since the relevance was computed.
func (g *interestGrid) effective(s *Server, c *peer) {
	for i := range c.relevant {
		c.relevant[i] &= s.alive.Word(i) &^ g.fresh.Word(i)
	}
}

// relevantFor computes c.relevant for this tick.
func (g *interestGrid) relevantFor(s *Server, c *peer) {
	prev := c.relevant
	next := c.relevantNext[:0]
	for len(next) < len(s.alive) {
		next = append(next, 0)
	}
	clear(next)
	filter := g.cfg.Filter
	accept := func(slot uint32) bool {
		return filter == nil || filter(c.id, s.slots[slot].entity)
	}
	for wi, w := range g.global {
		for ; w != 0; w &= w - 1 {
			if slot := uint32(wi*64 + tz64(w)); accept(slot) {
				next.Set(slot)
			}
		}
	}
	var focus components.Vec3
	ok := false
	if g.cfg.Focus != nil {
		focus, ok = g.cfg.Focus(c.id)
	}
	if !ok {
		focus, ok = g.owned[c.id], g.ownedOK[c.id]
	}
	if ok {
		r := int32(math.Ceil(g.leave / g.cell))
		k := g.key(focus)
		enter2, leave2 := g.cfg.Radius*g.cfg.Radius, g.leave*g.leave
		for dx := -r; dx <= r; dx++ {
			for dz := -r; dz <= r; dz++ {
				// Skip cells entirely outside the leave radius.
				cx0, cz0 := float64(k.x+dx)*g.cell, float64(k.z+dz)*g.cell
				nx := math.Max(cx0, math.Min(focus.X, cx0+g.cell)) - focus.X
				nz := math.Max(cz0, math.Min(focus.Z, cz0+g.cell)) - focus.Z
				if nx*nx+nz*nz > leave2 {
					continue
				}
				for _, slot := range g.cells[cellKey{k.x + dx, k.z + dz}] {
					p := g.pos[slot]
					ddx, ddz := p.X-focus.X, p.Z-focus.Z
					d2 := ddx*ddx + ddz*ddz
					if (d2 <= enter2 || (d2 <= leave2 && prev.Has(slot))) && accept(slot) {
						next.Set(slot)
					}
				}
			}
		}
	}
	// Owned entities are always relevant to their owner.
	for _, slot := range g.ownedBy[c.id] {
		next.Set(slot)
	}
	c.relevantNext = prev
	c.relevant = next
}
