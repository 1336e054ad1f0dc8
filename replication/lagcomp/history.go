package lagcomp

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"unsafe"

	arche "github.com/mlange-42/arche/ecs"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/ecs"
	"github.com/archenet/archenet/replication/schema"
)

// ErrInvalidConfig reports a bad [Config] or a component that is not
// registered.
var ErrInvalidConfig = errors.New("lagcomp: invalid config")

// Config configures a [History]. Zero fields have documented defaults.
type Config struct {
	// Depth is the number of net ticks kept. Zero: 32 (about 1 s at 30 Hz).
	Depth int
	// MaxRewind bounds how far behind the newest recorded tick a query may
	// reach, in net ticks ([History.Clamp]). Zero: Depth − 1. More than
	// Depth − 1 is an error.
	MaxRewind float64
}

// frame is the recorded state of one net tick.
type frame struct {
	tick  uint32
	valid bool
	ents  []arche.Entity
	lanes []uint64 // len(ents) × nl
	index map[arche.Entity]int32
}

// History records, once per net tick, the quantized state of component T of
// every replicated entity (with components.Replicated), and answers queries
// at fractional net ticks. Not safe for concurrent use: use it on the
// simulation goroutine.
type History[T any] struct {
	cfg    Config
	world  *arche.World
	plan   *schema.Plan
	nl     int
	frames []frame
	newest uint32
	has    bool
	held   int // ticks recorded, up to Depth
	id     arche.ID
	idRep  arche.ID
	filter arche.Mask
	tmp    T
}

// New returns a history of component T (registered in reg, so that its
// quantization is the one clients receive) of world's replicated entities.
func New[T any](world *arche.World, reg *schema.Registry, cfg Config) (*History[T], error) {
	if world == nil || reg == nil {
		return nil, fmt.Errorf("%w: nil world or registry", ErrInvalidConfig)
	}
	plan := reg.ByType(reflect.TypeFor[T]())
	if plan == nil {
		return nil, fmt.Errorf("%w: %s is not in the registry", ErrInvalidConfig, reflect.TypeFor[T]())
	}
	if cfg.Depth == 0 {
		cfg.Depth = 32
	}
	if cfg.Depth < 2 || cfg.Depth > 1024 {
		return nil, fmt.Errorf("%w: Depth %d not in 2..1024", ErrInvalidConfig, cfg.Depth)
	}
	if !(cfg.MaxRewind >= 0 && cfg.MaxRewind <= float64(cfg.Depth-1)) {
		return nil, fmt.Errorf("%w: MaxRewind %v not in 0..Depth−1 (%d)", ErrInvalidConfig, cfg.MaxRewind, cfg.Depth-1)
	}
	if cfg.MaxRewind == 0 {
		cfg.MaxRewind = float64(cfg.Depth - 1)
	}
	h := &History[T]{cfg: cfg, world: world, plan: plan, nl: plan.NumLanes(), frames: make([]frame, cfg.Depth)}
	for i := range h.frames {
		h.frames[i].index = map[arche.Entity]int32{}
	}
	h.id = arche.TypeID(world, reflect.TypeFor[T]())
	h.idRep = arche.ComponentID[components.Replicated](world)
	h.filter = arche.All(h.id, h.idRep)
	return h, nil
}

// Config returns the resolved configuration.
func (h *History[T]) Config() Config { return h.cfg }

// Record stores the state of every replicated entity with T as of net tick
// tick (what that tick's snapshot carries). Ticks must increase; recording
// a tick again replaces it. Allocation-free once the buffers have grown to
// the entity count.
func (h *History[T]) Record(tick uint32) {
	f := &h.frames[int(tick)%len(h.frames)]
	f.tick, f.valid = tick, true
	f.ents, f.lanes = f.ents[:0], f.lanes[:0]
	clear(f.index)
	q := h.world.Query(&h.filter)
	for q.Next() {
		e := q.Entity()
		f.index[e] = int32(len(f.ents))
		f.ents = append(f.ents, e)
		start := len(f.lanes)
		for range h.nl {
			f.lanes = append(f.lanes, 0)
		}
		h.plan.QuantizeBytes(unsafe.Slice((*byte)(q.Get(h.id)), h.plan.Size), f.lanes[start:])
	}
	if !h.has || int32(tick-h.newest) > 0 {
		if h.has {
			h.held = min(h.held+int(tick-h.newest), len(h.frames))
		} else {
			h.held = 1
		}
		h.newest, h.has = tick, true
	}
}

// System returns a net system recording each net tick; tick returns the
// tick the snapshot just sent carries (replication.Server.Tick). Add it
// after the server's Send system.
func (h *History[T]) System(tick func() uint32) ecs.System {
	return ecs.Func(func(*arche.World) { h.Record(tick()) })
}

// Newest returns the newest recorded tick (false before the first).
func (h *History[T]) Newest() (uint32, bool) { return h.newest, h.has }

// Clamp bounds a reported render tick to what an honest client can see:
// not after the newest recorded tick, not more than MaxRewind before it
// (nor before the oldest tick recorded). NaN or infinite reports give the
// oldest allowed tick.
func (h *History[T]) Clamp(view float64) float64 {
	if !h.has {
		return view
	}
	newest := float64(h.newest)
	back := min(h.cfg.MaxRewind, float64(h.held-1))
	// Compare on the unwrapped line around newest (ticks wrap at 2³²).
	d := math.Remainder(view-newest, 1<<32)
	if d != d || d < -back {
		d = -back
	}
	return newest + min(d, 0)
}

// bracket finds the recorded frames around fractional tick view: the state
// is a + f·(b − a). ok is false when view is outside the history (or a tick
// it needs was not recorded).
func (h *History[T]) bracket(view float64) (a, b *frame, f float64, ok bool) {
	if !h.has {
		return nil, nil, 0, false
	}
	d := math.Remainder(view-float64(h.newest), 1<<32) // ≤ 0 inside
	if d != d || d > 0 || d < -float64(len(h.frames)-1) {
		return nil, nil, 0, false
	}
	back := math.Floor(-d)        // whole ticks behind newest
	t0 := h.newest - uint32(back) // the first tick at or after view
	a = &h.frames[int(t0)%len(h.frames)]
	if !a.valid || a.tick != t0 {
		return nil, nil, 0, false
	}
	frac := -d - back // how far view is before t0, in [0, 1)
	if frac == 0 {
		return a, a, 0, true
	}
	t1 := t0 - 1
	b = &h.frames[int(t1)%len(h.frames)]
	if !b.valid || b.tick != t1 {
		return nil, nil, 0, false
	}
	return b, a, 1 - frac, true // from t0−1 to t0
}

func (f *frame) state(i int32, nl int) []uint64 { return f.lanes[int(i)*nl : (int(i)+1)*nl] }

// At writes into dst the state of e at fractional net tick view, as a
// client rendering at that tick interpolated it. ok is false if e was not
// in both recorded ticks around view (spawned or removed in between, or
// view outside the history).
func (h *History[T]) At(e arche.Entity, view float64, dst *T) bool {
	a, b, f, ok := h.bracket(view)
	if !ok {
		return false
	}
	ia, okA := a.index[e]
	ib, okB := b.index[e]
	if !okA || !okB {
		return false
	}
	schema.InterpolateValue(h.plan, a.state(ia, h.nl), b.state(ib, h.nl), f, dst)
	return true
}

// Each calls fn with every entity present in both recorded ticks around
// view and its interpolated state (valid during the call), until fn
// returns false. It reports false if view is outside the history.
//
// The history holds what clients were shown, so e may have been removed
// from the world since: check World.Alive before asking the world about it.
func (h *History[T]) Each(view float64, fn func(e arche.Entity, v *T) bool) bool {
	a, b, f, ok := h.bracket(view)
	if !ok {
		return false
	}
	for ib, e := range b.ents {
		ia, ok := a.index[e]
		if !ok {
			continue
		}
		schema.InterpolateValue(h.plan, a.state(ia, h.nl), b.state(int32(ib), h.nl), f, &h.tmp)
		if !fn(e, &h.tmp) {
			break
		}
	}
	return true
}

// Bytes returns the memory the history holds now (lanes and entity lists;
// the indexes add about 40 bytes per entity per tick).
func (h *History[T]) Bytes() int {
	n := 0
	for i := range h.frames {
		n += cap(h.frames[i].lanes)*8 + cap(h.frames[i].ents)*int(unsafe.Sizeof(arche.Entity{}))
	}
	return n
}
