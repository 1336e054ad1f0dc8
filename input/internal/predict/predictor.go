package predict

import (
	"fmt"
	"math/bits"
	"reflect"

	"github.com/archenet/archenet/input/internal/inputerr"
	"github.com/archenet/archenet/replication/schema"
)

// Config configures a [Predictor]. Its zero value keeps 128 ticks of
// history at a 60 Hz step.
type Config struct {
	// History is the number of ticks of (input, predicted state) kept; a
	// server state older than that cannot be reconciled and is ignored
	// ([TooOld]). Zero: 128 (rounded up to a power of two).
	History int
	// Dt is the step in seconds passed to the step function. Zero: 1/60.
	Dt float64
}

// Status says what [Predictor.Reconcile] did. Its values are
// input.ReconcileStatus's, which it converts to.
type Status uint8

const (
	// Match: the prediction at the server's tick was exact.
	Match Status = iota
	// Corrected: it differed; the predictor rewound to the server's state
	// and re-simulated the ticks after it.
	Corrected
	// Stale: a state not newer than one already reconciled.
	Stale
	// TooOld: older than the history; ignored.
	TooOld
	// Reset: nothing to compare (first state, or the server is ahead of
	// the prediction): the predictor restarted from the server's state at
	// its tick.
	Reset
)

var statusNames = [...]string{"match", "corrected", "stale", "too old", "reset"}

// String names the status ("match", "corrected", "stale", "too old", "reset").
func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("ReconcileStatus(%d)", uint8(s))
}

// Correction is the result of [Predictor.Reconcile] (package input hands
// it to the game as an input.Correction).
type Correction[S any] struct {
	Status Status
	// Replayed is the number of ticks re-simulated.
	Replayed int
	// InputMissing reports that the server did not have this client's input
	// for the reconciled tick (it applied the input of an older tick).
	InputMissing bool
	// Old and New are the current predicted state before and after the
	// correction (equal unless Status is Corrected or Reset).
	Old, New S
	// MaxError is the largest difference between Old and New in quantized
	// steps, over all lanes of S: 0 means the visible state did not change.
	MaxError uint64
}

// Predictor runs client-side prediction of one entity this client owns:
// [Predictor.Predict] applies the game's step with the local input each
// tick and keeps a ring of (tick, input, rounded predicted state as
// quantized lanes); [Predictor.Reconcile] compares the server's authoritative state for
// a tick with the prediction for that tick, lane by lane, and on any
// difference rewinds to the server's state and re-simulates the later ticks
// with the stored inputs. Not safe for concurrent use.
type Predictor[S, I any] struct {
	plan  *schema.Plan
	step  func(state *S, in *I, dt float64)
	dt    float64
	mask  uint32
	nl    int
	ticks []uint32
	ins   []I
	lanes []uint64 // predicted state after each tick

	state   S
	tick    uint32
	started bool

	reconciled    uint32
	hasReconciled bool
	scratch       []uint64
	old           []uint64

	stats Stats
}

// Stats counts a [Predictor]'s work: ticks predicted (replays excluded),
// and reconciliations by outcome, with the ticks the corrections replayed.
type Stats struct {
	Predicted, Matches, Corrections, Replayed, Stale, TooOld, Resets uint64
}

// New returns a Predictor for state S (with its schema plan, the
// precision the server sends S with) and input I, stepped with the game's
// deterministic step function (input.StepFunc). It fails with
// inputerr.ErrInvalidConfig if plan is not S's plan, step is nil or cfg is
// out of range. Allocates the history once.
func New[S, I any](plan *schema.Plan, step func(state *S, in *I, dt float64), cfg Config) (*Predictor[S, I], error) {
	if plan == nil || plan.Type != reflect.TypeFor[S]() {
		return nil, fmt.Errorf("%w: plan is not the plan of %s", inputerr.ErrInvalidConfig, reflect.TypeFor[S]())
	}
	if step == nil {
		return nil, fmt.Errorf("%w: nil step function", inputerr.ErrInvalidConfig)
	}
	if cfg.History < 0 || cfg.History > 1<<16 || cfg.Dt < 0 || cfg.Dt != cfg.Dt {
		return nil, fmt.Errorf("%w: predictor history %d or step %v out of range", inputerr.ErrInvalidConfig, cfg.History, cfg.Dt)
	}
	if cfg.History == 0 {
		cfg.History = 128
	}
	if cfg.Dt == 0 {
		cfg.Dt = 1.0 / 60
	}
	size := 1 << bits.Len(uint(cfg.History-1))
	nl := plan.NumLanes()
	return &Predictor[S, I]{
		plan: plan, step: step, dt: cfg.Dt, mask: uint32(size - 1), nl: nl,
		ticks:   make([]uint32, size),
		ins:     make([]I, size),
		lanes:   make([]uint64, size*nl),
		scratch: make([]uint64, nl),
		old:     make([]uint64, nl),
	}, nil
}

func (p *Predictor[S, I]) slot(tick uint32) int { return int(tick & p.mask) }

func (p *Predictor[S, I]) slotLanes(i int) []uint64 { return p.lanes[i*p.nl : (i+1)*p.nl] }

// round rounds p.state and stores its lanes in dst.
func (p *Predictor[S, I]) round(dst []uint64) {
	schema.QuantizeValue(p.plan, &p.state, dst)
	schema.DequantizeValue(p.plan, dst, &p.state)
}

// Reset starts predicting from state, the state at the end of tick (e.g.
// the entity's first authoritative state). The history is cleared.
func (p *Predictor[S, I]) Reset(tick uint32, state *S) {
	for i := range p.ticks {
		p.ticks[i] = tick + 1 // never matches a tick ≤ tick until written
	}
	p.state = *state
	i := p.slot(tick)
	p.round(p.slotLanes(i))
	p.ticks[i] = tick
	var zero I
	p.ins[i] = zero
	p.tick, p.started = tick, true
	p.reconciled, p.hasReconciled = tick, true
}

// Predict simulates tick with input in (already rounded by
// frames.Sender.Push), rounds the result, records it and returns the
// predicted state (valid until the next call). Ticks skipped since the last
// Predict are simulated with the previous input, as frames.Sender.Push
// sends them. A tick not after the last one is ignored. Before
// [Predictor.Reset], prediction starts from the zero state. Allocation-free; cost: one step and one
// quantize/dequantize per tick (more after a gap, at most History).
func (p *Predictor[S, I]) Predict(tick uint32, in *I) *S {
	if !p.started {
		var zero S
		p.Reset(tick-1, &zero)
	}
	d := int32(tick - p.tick)
	if d <= 0 {
		return &p.state
	}
	if gap := int(d) - 1; gap > 0 {
		prev := p.ins[p.slot(p.tick)]
		for t := tick - uint32(min(gap, len(p.ticks)-1)); t != tick; t++ {
			p.advance(t, &prev)
		}
	}
	p.advance(tick, in)
	return &p.state
}

func (p *Predictor[S, I]) advance(tick uint32, in *I) {
	i := p.slot(tick)
	p.ins[i] = *in
	p.step(&p.state, &p.ins[i], p.dt)
	p.round(p.slotLanes(i))
	p.ticks[i] = tick
	p.tick = tick
	p.stats.Predicted++
}

// StateAt writes into dst the predicted state after tick (rounded, as
// recorded) and reports whether tick is still in the history.
func (p *Predictor[S, I]) StateAt(tick uint32, dst *S) bool {
	i := p.slot(tick)
	if !p.started || p.ticks[i] != tick || int32(tick-p.tick) > 0 {
		return false
	}
	schema.DequantizeValue(p.plan, p.slotLanes(i), dst)
	return true
}

// State returns the current predicted state (at [Predictor.Tick]): the
// predictor's own, which its next Predict, Reset or Reconcile changes.
func (p *Predictor[S, I]) State() *S { return &p.state }

// SetDt sets the step in seconds passed to the step function from now on
// (the server's tick interval, once known).
func (p *Predictor[S, I]) SetDt(dt float64) { p.dt = dt }

// Reconciled returns the newest tick reconciled with a server state (or
// reset to one); ok is false before the first.
func (p *Predictor[S, I]) Reconciled() (tick uint32, ok bool) { return p.reconciled, p.hasReconciled }

// Tick returns the newest predicted tick.
func (p *Predictor[S, I]) Tick() uint32 { return p.tick }

// History returns the number of ticks of history kept (Config.History
// rounded up to a power of two).
func (p *Predictor[S, I]) History() int { return len(p.ticks) }

// Stats returns the counters.
func (p *Predictor[S, I]) Stats() Stats { return p.stats }

// Reconcile takes the server's authoritative state at the end of tick and
// lastInput, the tick of this client's input the server applied at tick
// (older when it was missing; see the input log's LastApplied). It compares
// the quantized state with the prediction for tick; if any lane differs, it
// rewinds to the server's state and re-simulates ticks tick+1 … Tick() with
// the stored inputs. Older or repeated states are ignored. The result says
// what happened and carries the current state before and after.
// Allocation-free; cost: O(lanes), plus one step per replayed tick.
func (p *Predictor[S, I]) Reconcile(tick, lastInput uint32, auth *S) Correction[S] {
	c := Correction[S]{InputMissing: int32(tick-lastInput) > 0, Old: p.state}
	switch {
	case !p.started || int32(tick-p.tick) > 0:
		p.Reset(tick, auth)
		p.stats.Resets++
		c.Status = Reset
	case p.hasReconciled && int32(tick-p.reconciled) <= 0:
		p.stats.Stale++
		c.Status = Stale
	case p.ticks[p.slot(tick)] != tick:
		p.stats.TooOld++
		c.Status = TooOld
	default:
		p.reconciled, p.hasReconciled = tick, true
		i := p.slot(tick)
		schema.QuantizeValue(p.plan, auth, p.scratch)
		pred := p.slotLanes(i)
		same := true
		for j := range p.scratch {
			if p.scratch[j] != pred[j] {
				same = false
				break
			}
		}
		if same {
			p.stats.Matches++
			c.Status = Match
			break
		}
		schema.QuantizeValue(p.plan, &p.state, p.old)
		now := p.tick
		p.state = *auth
		p.round(pred)
		for t := tick + 1; int32(t-now) <= 0; t++ {
			j := p.slot(t)
			p.step(&p.state, &p.ins[j], p.dt)
			p.round(p.slotLanes(j))
			c.Replayed++
		}
		p.stats.Corrections++
		p.stats.Replayed += uint64(c.Replayed)
		c.Status = Corrected
	}
	c.New = p.state
	if c.Status == Corrected || c.Status == Reset {
		if c.Status == Reset {
			schema.QuantizeValue(p.plan, &c.Old, p.old)
		}
		schema.QuantizeValue(p.plan, &p.state, p.scratch)
		lanes := p.plan.Lanes()
		for j := range lanes {
			d := lanes[j].Delta(p.old[j], p.scratch[j])
			if d < 0 {
				d = -d
			}
			c.MaxError = max(c.MaxError, uint64(d))
		}
	}
	return c
}
