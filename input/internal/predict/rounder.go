package predict

import (
	"fmt"
	"reflect"

	"github.com/archenet/archenet/input/internal/inputerr"
	"github.com/archenet/archenet/replication/schema"
)

// Rounder rounds a state to its quantized value in place: what the server
// must do to the authoritative state of every predicted entity at the end
// of each tick (after the game's systems), so that server and client
// continue from identical values — the client only ever sees the rounded
// state, and the predictor rounds its own state after every step the same
// way. Not safe for concurrent use (it owns scratch lanes).
type Rounder[S any] struct {
	plan  *schema.Plan
	lanes []uint64
}

// NewRounder returns a Rounder for S with its schema plan; it fails
// (wrapping inputerr.ErrInvalidConfig) if plan is not S's plan.
func NewRounder[S any](plan *schema.Plan) (*Rounder[S], error) {
	if plan == nil || plan.Type != reflect.TypeFor[S]() {
		return nil, fmt.Errorf("%w: plan is not the plan of %s", inputerr.ErrInvalidConfig, reflect.TypeFor[S]())
	}
	return &Rounder[S]{plan: plan, lanes: make([]uint64, plan.NumLanes())}, nil
}

// Round quantizes *s and writes the dequantized value back (schema
// Plan.Round). Allocation-free.
func (r *Rounder[S]) Round(s *S) {
	schema.QuantizeValue(r.plan, s, r.lanes)
	schema.DequantizeValue(r.plan, r.lanes, s)
}
