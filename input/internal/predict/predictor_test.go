package predict

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/input/internal/inputerr"
	"github.com/archenet/archenet/replication/schema"
)

func newPlayerPredictor(t *testing.T) (*Predictor[player, fpsInput], *schema.Plan) {
	t.Helper()
	plan := schema.MustRegister[player](schema.NewRegistry())
	p, err := New(plan, stepPlayer, Config{History: 32})
	require.NoError(t, err)
	return p, plan
}

func newPlayerPredictorB(b *testing.B) (*Predictor[player, fpsInput], *schema.Plan) {
	plan := schema.MustRegister[player](schema.NewRegistry())
	p, err := New(plan, stepPlayer, Config{})
	if err != nil {
		b.Fatal(err)
	}
	return p, plan
}

func TestPredictorMatchAndCorrect(t *testing.T) {
	p, plan := newPlayerPredictor(t)
	r, err := NewRounder[player](plan)
	require.NoError(t, err)
	var srv player
	p.Reset(0, &srv)
	inputs := map[uint32]fpsInput{}
	for tk := uint32(1); tk <= 20; tk++ {
		in := fpsInput{Keys: keyFwd, DX: float32(tk % 5)}
		inputs[tk] = in
		p.Predict(tk, &in)
	}
	// The server runs the same steps: every reconcile matches.
	states := map[uint32]player{}
	for tk := uint32(1); tk <= 10; tk++ {
		in := inputs[tk]
		stepPlayer(&srv, &in, 1.0/60)
		r.Round(&srv)
		states[tk] = srv
		c := p.Reconcile(tk, tk, &srv)
		require.Equal(t, Match, c.Status, "tick %d", tk)
		require.Zero(t, c.MaxError)
	}
	// A push at tick 11 the client cannot know about.
	in := inputs[11]
	stepPlayer(&srv, &in, 1.0/60)
	srv.VX += 5
	r.Round(&srv)
	old := *p.State()
	c := p.Reconcile(11, 11, &srv)
	require.Equal(t, Corrected, c.Status)
	require.Equal(t, 9, c.Replayed)
	require.Equal(t, old, c.Old)
	require.Equal(t, *p.State(), c.New)
	require.Greater(t, c.MaxError, uint64(100))
	// The server continues; the corrected prediction now matches.
	for tk := uint32(12); tk <= 20; tk++ {
		in := inputs[tk]
		stepPlayer(&srv, &in, 1.0/60)
		r.Round(&srv)
	}
	require.Equal(t, srv, *p.State())
	// Stale and too-old states are ignored.
	require.Equal(t, Stale, p.Reconcile(5, 5, &srv).Status)
	for tk := uint32(21); tk <= 80; tk++ {
		p.Predict(tk, &in)
	}
	require.Equal(t, TooOld, p.Reconcile(30, 30, &srv).Status)
	// A server state ahead of the prediction resets.
	c = p.Reconcile(200, 199, &srv)
	require.Equal(t, Reset, c.Status)
	require.True(t, c.InputMissing)
	require.Equal(t, uint32(200), p.Tick())
	st := p.Stats()
	require.Equal(t, uint64(10), st.Matches)
	require.Equal(t, uint64(1), st.Corrections)
	require.Equal(t, uint64(9), st.Replayed)
}

func TestPredictorGapAndConfig(t *testing.T) {
	p, plan := newPlayerPredictor(t)
	q, _ := newPlayerPredictor(t)
	in := fpsInput{Keys: keyLeft | keySprint}
	p.Predict(1, &in)
	q.Predict(1, &in)
	p.Predict(5, &in) // ticks 2..4 with the previous input
	for tk := uint32(2); tk <= 5; tk++ {
		q.Predict(tk, &in)
	}
	require.Equal(t, *q.State(), *p.State())
	before := *p.State()
	p.Predict(3, &in)
	require.Equal(t, before, *p.State(), "old ticks are ignored")

	_, err := New[player, fpsInput](plan, nil, Config{})
	require.ErrorIs(t, err, inputerr.ErrInvalidConfig)
	other := schema.MustRegister[fpsInput](schema.NewRegistry())
	_, err = New(other, stepPlayer, Config{})
	require.ErrorIs(t, err, inputerr.ErrInvalidConfig)
	_, err = NewRounder[player](other)
	require.ErrorIs(t, err, inputerr.ErrInvalidConfig)
	_, err = New(plan, stepPlayer, Config{History: -1})
	require.ErrorIs(t, err, inputerr.ErrInvalidConfig)
}
