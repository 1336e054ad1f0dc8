//go:build !js

package loopback

import (
	"fmt"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/tests/internal/harness"
)

// MaxLag bounds how many ticks a well-behaved client on loopback may lag
// (0.5 s) when its control's clients lag less than half that: far below the
// seconds-long stalls the tests guard against.
const MaxLag = 15

// tickStats sums up a run of server ticks: how many, the worst, how many
// were late (over twice the tick interval, the bound every tick held on an
// idle machine) and the time they ran past that bound in all.
type tickStats struct {
	n, late     int
	worst, over time.Duration
}

func statsOf(ticks []time.Duration) tickStats {
	s := tickStats{n: len(ticks)}
	for _, d := range ticks {
		s.worst = max(s.worst, d)
		if d > 2*harness.TickDt {
			s.late++
			s.over += d - 2*harness.TickDt
		}
	}
	return s
}

func (s tickStats) String() string {
	return fmt.Sprintf("worst %v over %d ticks, %d over 2× the interval (%v past it in all)",
		s.worst.Round(10*time.Microsecond), s.n, s.late, s.over.Round(time.Millisecond))
}

// WorstTick reports and returns the worst server tick since from.
func (r *Rig) WorstTick(from int, label string) time.Duration {
	r.T.Helper()
	s := statsOf(r.Ticks[from:])
	r.T.Logf("%s: server: %v", label, s)
	return s.worst
}

// RequireTicks checks the server's ticks since from against its control's
// in the same steps, and returns the worst. A loaded machine stretches both
// servers' ticks (the server under test's more, as it has more to do: the
// misbehaving peers' traffic); a server whose tick waits on a peer (a
// write, a close, an Authenticator) has many more late ticks than its
// control (over 2× the interval: at most twice the control's plus 10% of
// the ticks, or 3) or runs far longer past that bound in all (at most twice
// the control's time plus a fifth of the window, at least half a second:
// under a flood of handshakes and a busy machine, the server's heavier
// ticks are preempted far more than its control's light ones, up to a
// second in a 10 s round with two CPU hogs beside the test). Under the race
// detector it reports the figures without failing (.ci/run runs these tests
// without it too). tests/sim checks, deterministically, that no tick waits
// on a hanging close, a stuck writer or a slow Authenticator.
func (r *Rig) RequireTicks(from int, label string) time.Duration {
	r.T.Helper()
	s, c := statsOf(r.Ticks[from:]), statsOf(r.Control.Ticks[from:])
	r.T.Logf("%s: server: %v; control: %v", label, s, c)
	if harness.RaceEnabled {
		return s.worst
	}
	require.LessOrEqual(r.T, s.late, 2*c.late+max(3, s.n/10),
		"%s: %d of the server's ticks took over 2× the interval (worst %v), %d of its control's in the same steps (worst %v): the server waits on something", label, s.late, s.worst, c.late, c.worst)
	require.LessOrEqual(r.T, s.over, 2*c.over+time.Duration(max(15, s.n/5))*harness.TickDt,
		"%s: the server's ticks ran %v past 2× the interval in all (worst %v), its control's %v in the same steps (worst %v): the server waits on something", label, s.over, s.worst, c.over, c.worst)
	return s.worst
}
