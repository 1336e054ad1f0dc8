package input

import (
	"fmt"
	"reflect"

	arche "github.com/mlange-42/arche/ecs"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/ecs"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/replication/schema"
)

// maxCoastSteps bounds the ticks one Update advances an entity (after a
// stall the rest are skipped).
const maxCoastSteps = 256

// Projectiles predicts this client's own entities that move without input —
// its shots' projectiles — on the [Player]'s timeline: each is created the
// input tick it is fired ([Projectiles.Spawn], a replication.Client
// predicted spawn keyed by that tick), advanced every input tick with the
// game's step (the server's step of the same entities), and, once the
// server's spawn has adopted it, re-simulated from each new server state of
// it to the predicted tick. So it is drawn where the server will have it,
// and the game does not move it by hand. The component T is replicated (in
// the client's registry); the entity is never interpolated. Not safe for
// concurrent use.
type Projectiles[T any] struct {
	cl    *replication.Client
	now   func() uint32 // the player's predicted tick
	step  func(e arche.Entity, t *T, dt float64)
	plan  *schema.Plan
	world *arche.World
	idT   arche.ID
	idNet arche.ID
	dt    float64
	ents  map[arche.Entity]*coast[T]
	ids   []arche.ID
	a, b  []uint64 // scratch lanes
	stats ProjectileStats
}

// coast is one predicted entity's timeline.
type coast[T any] struct {
	tick     uint32 // the simulation tick its T is at
	stateNet uint32 // the server state's net tick last rebased on (0: none)
	pred     T      // its T as Update left it (the replication client may overwrite the component)
}

// ProjectileStats are a [Projectiles]' counters.
type ProjectileStats struct {
	Spawned uint64 // entities spawned with Spawn
	Adopted uint64 // of those, adopted by the server's spawn
	// MaxCorrection is the largest difference, in quantized steps of a
	// field of T, between an entity's prediction and the server's state
	// moved on to the same tick, when a server state arrived: 0 when the
	// client's step and start match the server's.
	MaxCorrection uint64
}

// NewProjectiles predicts the client's projectiles with component T and
// the game's step of one simulation tick (it may read the entity's other
// components, a velocity say, from the client's world), on player's
// timeline. T must be in the client's registry.
func NewProjectiles[T, S, I any](player *Player[S, I], step func(e arche.Entity, t *T, dt float64)) (*Projectiles[T], error) {
	if player == nil || step == nil {
		return nil, fmt.Errorf("%w: NewProjectiles needs a Player and a step", ErrInvalidConfig)
	}
	cl := player.cl
	plan := cl.Registry().ByType(reflect.TypeFor[T]())
	if plan == nil {
		return nil, fmt.Errorf("%w: %s is not in the client's registry", ErrInvalidConfig, reflect.TypeFor[T]())
	}
	w := cl.World()
	return &Projectiles[T]{
		cl: cl, now: player.Tick, step: step, plan: plan, world: w,
		idT: arche.TypeID(w, reflect.TypeFor[T]()), idNet: arche.ComponentID[components.NetID](w),
		ents: map[arche.Entity]*coast[T]{},
		a:    make([]uint64, plan.NumLanes()), b: make([]uint64, plan.NumLanes()),
	}, nil
}

// Spawn creates the projectile fired at input tick (typically in the
// Player's OnPredict), with start its T at the end of that tick and comps
// its other components (replication.Client.SpawnPredicted keyed by tick:
// the server's game keys its twin with Server.PredictedSpawn(e, tick)). It
// fails as SpawnPredicted does.
func (p *Projectiles[T]) Spawn(tick uint32, start T, comps ...arche.ID) (arche.Entity, error) {
	p.ids = append(append(p.ids[:0], comps...), p.idT)
	e, err := p.cl.SpawnPredicted(tick, p.ids...)
	if err != nil {
		return e, err
	}
	*(*T)(p.world.Get(e, p.idT)) = start
	p.ents[e] = &coast[T]{tick: tick, pred: start}
	p.stats.Spawned++
	return e, nil
}

// Update advances every projectile to the player's predicted tick: a
// provisional one from its own state, an adopted one from the server's
// newest state of it (when a new one arrived) on. Run it after the
// Player's Update, every frame ([Projectiles.System]). Allocation-free.
func (p *Projectiles[T]) Update() {
	if p.dt == 0 {
		if rate := p.cl.NetRate() * p.cl.NetDivisor(); rate > 0 {
			p.dt = 1 / float64(rate) // exactly the server's ecs.TickInfo.Dt
		} else {
			return
		}
	}
	target := p.now()
	for e, c := range p.ents {
		if !p.world.Alive(e) || !p.world.Has(e, p.idT) {
			delete(p.ents, e)
			continue
		}
		t := (*T)(p.world.Get(e, p.idT))
		id := *(*components.NetID)(p.world.Get(e, p.idNet))
		if st, ok := p.cl.StateTick(id); ok && id.Gen != replication.ProvisionalGen && st != c.stateNet {
			p.rebase(e, c, t, st)
		}
		for n := 0; int32(target-c.tick) > 0 && n < maxCoastSteps; n++ {
			p.step(e, t, p.dt)
			c.tick++
		}
		if int32(target-c.tick) > 0 {
			c.tick = target // (a stall: the rest is skipped)
		}
		c.pred = *t
	}
}

// rebase takes the server's state of net tick st, just written into t:
// the entity continues from it. The first one is the adoption. The
// prediction it replaces is compared with it, moved on to the same tick.
func (p *Projectiles[T]) rebase(e arche.Entity, c *coast[T], t *T, st uint32) {
	if c.stateNet == 0 {
		p.stats.Adopted++
	}
	c.stateNet = st
	from := uint32(p.cl.SimTick(st))
	// The prediction was at c.tick; the server's state is at from (earlier):
	// move a copy of the server's on to c.tick and compare.
	if d := int32(c.tick - from); d >= 0 && d < maxCoastSteps {
		moved := *t
		for range d {
			p.step(e, &moved, p.dt)
		}
		schema.QuantizeValue(p.plan, &moved, p.a)
		schema.QuantizeValue(p.plan, &c.pred, p.b)
		p.stats.MaxCorrection = max(p.stats.MaxCorrection, p.predictedDiff())
	}
	c.tick = from
}

// predictedDiff is the largest lane difference between p.a (the server's
// state moved on) and p.b (the prediction), in quantized steps.
func (p *Projectiles[T]) predictedDiff() uint64 {
	var m uint64
	for i, l := range p.plan.Lanes() {
		d := l.Delta(p.b[i], p.a[i])
		if d < 0 {
			d = -d
		}
		m = max(m, uint64(d))
	}
	return m
}

// Stats returns the counters.
func (p *Projectiles[T]) Stats() ProjectileStats { return p.stats }

// System returns an ecs.System running [Projectiles.Update]; add it after
// the Player's.
func (p *Projectiles[T]) System() ecs.System { return ecs.Func(func(*arche.World) { p.Update() }) }
