package input

import "github.com/archenet/archenet/input/internal/predict"

// StepFunc is the game's simulation step for a predicted entity: apply
// input in to state over dt seconds. Server and client must run the same
// function, and it must be deterministic (same inputs, same result) for
// prediction to match.
type StepFunc[S, I any] func(state *S, in *I, dt float64)

// ReconcileStatus says what a reconciliation of the [Player]'s prediction
// with the server's state did.
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

// String names the status ("match", "corrected", "stale", "too old", "reset").
func (s ReconcileStatus) String() string { return predict.Status(s).String() }

// Correction is the result of a reconciliation of the [Player]'s
// prediction (PlayerConfig.OnCorrection).
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

// correction converts the predictor's result (predict.Status has
// ReconcileStatus's values, in the same order: TestReconcileStatusValues).
func correction[S any](c *predict.Correction[S]) Correction[S] {
	return Correction[S]{Status: ReconcileStatus(c.Status), Replayed: c.Replayed,
		InputMissing: c.InputMissing, Old: c.Old, New: c.New, MaxError: c.MaxError}
}
