package input

import (
	"fmt"
	"math/bits"
	"reflect"

	"github.com/archenet/archenet/replication/schema"
)

// StepFunc is the game's simulation step for a predicted entity: apply
// input in to state over dt seconds. Server and client must run the same
// function, and it must be deterministic (same inputs, same result) for
// prediction to match.
type StepFunc[S, I any] func(state *S, in *I, dt float64)

// rounder rounds a state to its quantized value in place: what the server
// must do to the authoritative state of every predicted entity at the end
// of each tick (after the game's systems), so that server and client
// continue from identical values — the client only ever sees the rounded
// state, and the predictor rounds its own state after every step the same
// way. Not safe for concurrent use (it owns scratch lanes).
type rounder[S any] struct {
	plan  *schema.Plan
	lanes []uint64
}

// newRounder returns a rounder for S with its schema plan; it fails if plan
// is not S's plan.
func newRounder[S any](plan *schema.Plan) (*rounder[S], error) {
	if plan == nil || plan.Type != reflect.TypeFor[S]() {
		return nil, fmt.Errorf("%w: plan is not the plan of %s", ErrInvalidConfig, reflect.TypeFor[S]())
	}
	return &rounder[S]{plan: plan, lanes: make([]uint64, plan.NumLanes())}, nil
}

// Round quantizes *s and writes the dequantized value back (schema
// Plan.Round). Allocation-free.
func (r *rounder[S]) Round(s *S) {
	schema.QuantizeValue(r.plan, s, r.lanes)
	schema.DequantizeValue(r.plan, r.lanes, s)
}

// predictorConfig configures a predictor. Its zero value keeps 128 ticks
// of history at a 60 Hz step.
type predictorConfig struct {
	// History is the number of ticks of (input, predicted state) kept; a
	// server state older than that cannot be reconciled and is ignored
	// ([ReconcileTooOld]). Zero: 128 (rounded up to a power of two).
	History int
	// Dt is the step in seconds passed to the step function. Zero: 1/60.
	Dt float64
}

// ReconcileStatus says what predictor.Reconcile did.
type ReconcileStatus uint8

const (
	// ReconcileMatch: the prediction at the server's tick was exact.
	ReconcileMatch ReconcileStatus = iota
	// ReconcileCorrected: it differed; the predictor rewound to the server's
	// state and re-simulated the ticks after it.
	ReconcileCorrected
	// ReconcileStale: a state not newer than one already reconciled.
	ReconcileStale
	// ReconcileTooOld: older than the history; ignored.
	ReconcileTooOld
	// ReconcileReset: nothing to compare (first state, or the server is
	// ahead of the prediction): the predictor restarted from the server's
	// state at its tick.
	ReconcileReset
)

var reconcileNames = [...]string{"match", "corrected", "stale", "too old", "reset"}

// String names the status ("match", "corrected", "stale", "too old", "reset").
func (s ReconcileStatus) String() string {
	if int(s) < len(reconcileNames) {
		return reconcileNames[s]
	}
	return fmt.Sprintf("ReconcileStatus(%d)", uint8(s))
}

// Correction is the result of predictor.Reconcile.
type Correction[S any] struct {
	Status ReconcileStatus
	// Replayed is the number of ticks re-simulated.
	Replayed int
	// InputMissing reports that the server did not have this client's input
	// for the reconciled tick (it applied the input of an older tick).
	InputMissing bool
	// Old and New are the current predicted state before and after the
	// correction (equal unless Status is ReconcileCorrected or
	// ReconcileReset). Hand them to a smoother (interp.Smoother.Correct) so
	// the drawn entity eases over the difference instead of snapping.
	Old, New S
	// MaxError is the largest difference between Old and New in quantized
	// steps, over all lanes of S: 0 means the visible state did not change.
	MaxError uint64
}

// predictor runs client-side prediction of one entity this client owns:
// predictor.Predict applies the game's step with the local input each tick
// and keeps a ring of (tick, input, rounded predicted state as quantized
// lanes); predictor.Reconcile compares the server's authoritative state for
// a tick with the prediction for that tick, lane by lane, and on any
// difference rewinds to the server's state and re-simulates the later ticks
// with the stored inputs. Not safe for concurrent use.
type predictor[S, I any] struct {
	plan  *schema.Plan
	step  StepFunc[S, I]
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

	stats predictorStats
}

// predictorStats counts reconciliations.
type predictorStats struct {
	Predicted, Matches, Corrections, Replayed, Stale, TooOld, Resets uint64
}

// newPredictor returns a predictor for state S (with its schema plan, the
// precision the server sends S with) and input I. It fails with
// [ErrInvalidConfig] if plan is not S's plan, step is nil or cfg is out of
// range. Allocates the history once.
func newPredictor[S, I any](plan *schema.Plan, step StepFunc[S, I], cfg predictorConfig) (*predictor[S, I], error) {
	if plan == nil || plan.Type != reflect.TypeFor[S]() {
		return nil, fmt.Errorf("%w: plan is not the plan of %s", ErrInvalidConfig, reflect.TypeFor[S]())
	}
	if step == nil {
		return nil, fmt.Errorf("%w: nil step function", ErrInvalidConfig)
	}
	if cfg.History < 0 || cfg.History > 1<<16 || cfg.Dt < 0 || cfg.Dt != cfg.Dt {
		return nil, fmt.Errorf("%w: predictor history %d or step %v out of range", ErrInvalidConfig, cfg.History, cfg.Dt)
	}
	if cfg.History == 0 {
		cfg.History = 128
	}
	if cfg.Dt == 0 {
		cfg.Dt = 1.0 / 60
	}
	size := 1 << bits.Len(uint(cfg.History-1))
	nl := plan.NumLanes()
	return &predictor[S, I]{
		plan: plan, step: step, dt: cfg.Dt, mask: uint32(size - 1), nl: nl,
		ticks:   make([]uint32, size),
		ins:     make([]I, size),
		lanes:   make([]uint64, size*nl),
		scratch: make([]uint64, nl),
		old:     make([]uint64, nl),
	}, nil
}

func (p *predictor[S, I]) slot(tick uint32) int { return int(tick & p.mask) }

func (p *predictor[S, I]) slotLanes(i int) []uint64 { return p.lanes[i*p.nl : (i+1)*p.nl] }

// round rounds p.state and stores its lanes in dst.
func (p *predictor[S, I]) round(dst []uint64) {
	schema.QuantizeValue(p.plan, &p.state, dst)
	schema.DequantizeValue(p.plan, dst, &p.state)
}

// Reset starts predicting from state, the state at the end of tick (e.g.
// the entity's first authoritative state). The history is cleared.
func (p *predictor[S, I]) Reset(tick uint32, state *S) {
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
// sender.Push), rounds the result, records it and returns the predicted
// state (valid until the next call). Ticks skipped since the last Predict are
// simulated with the previous input, as sender.Push sends them. A tick not
// after the last one is ignored. Before predictor.Reset, prediction starts
// from the zero state. Allocation-free; cost: one step and one
// quantize/dequantize per tick (more after a gap, at most History).
func (p *predictor[S, I]) Predict(tick uint32, in *I) *S {
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

func (p *predictor[S, I]) advance(tick uint32, in *I) {
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
func (p *predictor[S, I]) StateAt(tick uint32, dst *S) bool {
	i := p.slot(tick)
	if !p.started || p.ticks[i] != tick || int32(tick-p.tick) > 0 {
		return false
	}
	schema.DequantizeValue(p.plan, p.slotLanes(i), dst)
	return true
}

// State returns the current predicted state (at predictor.Tick).
func (p *predictor[S, I]) State() *S { return &p.state }

// Tick returns the newest predicted tick.
func (p *predictor[S, I]) Tick() uint32 { return p.tick }

// Stats returns the counters.
func (p *predictor[S, I]) Stats() predictorStats { return p.stats }

// Reconcile takes the server's authoritative state at the end of tick and
// lastInput, the tick of this client's input the server applied at tick
// (older when it was missing; see inputLog.LastApplied). It compares the
// quantized state with the prediction for tick; if any lane differs, it
// rewinds to the server's state and re-simulates ticks tick+1 … Tick() with
// the stored inputs. Older or repeated states are ignored. The result says
// what happened and carries the current state before and after.
// Allocation-free; cost: O(lanes), plus one step per replayed tick.
func (p *predictor[S, I]) Reconcile(tick, lastInput uint32, auth *S) Correction[S] {
	c := Correction[S]{InputMissing: int32(tick-lastInput) > 0, Old: p.state}
	switch {
	case !p.started || int32(tick-p.tick) > 0:
		p.Reset(tick, auth)
		p.stats.Resets++
		c.Status = ReconcileReset
	case p.hasReconciled && int32(tick-p.reconciled) <= 0:
		p.stats.Stale++
		c.Status = ReconcileStale
	case p.ticks[p.slot(tick)] != tick:
		p.stats.TooOld++
		c.Status = ReconcileTooOld
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
			c.Status = ReconcileMatch
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
		c.Status = ReconcileCorrected
	}
	c.New = p.state
	if c.Status == ReconcileCorrected || c.Status == ReconcileReset {
		if c.Status == ReconcileReset {
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
