package input

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/input/internal/predict"
)

// ReconcileStatus and predict.Status are converted into each other: the
// same values, the same names.
func TestReconcileStatusValues(t *testing.T) {
	pairs := []struct {
		public ReconcileStatus
		inner  predict.Status
		name   string
	}{
		{ReconcileMatch, predict.Match, "match"},
		{ReconcileCorrected, predict.Corrected, "corrected"},
		{ReconcileStale, predict.Stale, "stale"},
		{ReconcileTooOld, predict.TooOld, "too old"},
		{ReconcileReset, predict.Reset, "reset"},
		{ReconcileStatus(9), predict.Status(9), "ReconcileStatus(9)"},
	}
	for _, p := range pairs {
		require.Equal(t, uint8(p.public), uint8(p.inner), p.name)
		require.Equal(t, p.name, p.public.String())
		require.Equal(t, p.name, p.inner.String())
	}
	c := predict.Correction[int]{Status: predict.Corrected, Replayed: 3, InputMissing: true, Old: 1, New: 2, MaxError: 7}
	require.Equal(t, Correction[int]{Status: ReconcileCorrected, Replayed: 3, InputMissing: true, Old: 1, New: 2, MaxError: 7}, correction(&c))
}
