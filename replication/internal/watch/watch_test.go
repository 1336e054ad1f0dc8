package watch

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/replication/internal/link"
)

// TestWatchNamesWhatDoesNotRun: a system is named once it has been needed
// and not run for WarnAfter, then again only every WarnEvery; what the
// state does not need is never named, and Predict only once declared.
func TestWatchNamesWhatDoesNotRun(t *testing.T) {
	var w Watch
	t0 := time.Unix(100, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	w.Needs(link.Connecting, true, t0)
	w.Note(Receive, at(time.Second))
	_, _, ok := w.Missing(at(2 * time.Second))
	require.False(t, ok, "Receive ran a second ago; nothing else is needed while connecting")
	s, d, ok := w.Missing(at(3 * time.Second))
	require.True(t, ok)
	require.Equal(t, Receive, s)
	require.Equal(t, 2*time.Second, d)
	require.Contains(t, s.Hint(), "Client.ReceiveSystem")
	_, _, ok = w.Missing(at(4 * time.Second))
	require.False(t, ok, "not again before WarnEvery")

	w.Needs(link.Ready, true, at(5*time.Second))
	for _, s := range []System{Receive, Send} {
		w.Note(s, at(6*time.Second))
	}
	s, _, ok = w.Missing(at(7 * time.Second))
	require.True(t, ok)
	require.Equal(t, Interpolate, s, "ready with interpolation: Interpolate is needed")
	_, _, ok = w.Missing(at(7 * time.Second))
	require.False(t, ok, "Predict is not declared")
	w.Expect(Predict)
	w.Needs(link.Ready, true, at(7*time.Second))
	s, _, ok = w.Missing(at(9 * time.Second))
	require.True(t, ok)
	require.Equal(t, Send, s, "Receive and Send last ran 3 s ago; Receive was named at 3 s")
	s, _, ok = w.Missing(at(9 * time.Second))
	require.True(t, ok)
	require.Equal(t, Predict, s)

	w.Needs(link.Closed, true, at(30*time.Second))
	_, _, ok = w.Missing(at(60 * time.Second))
	require.False(t, ok, "a closed client needs nothing")
}
