package gang

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestGangRunsEveryItemOnce: jobs that hand out items through a counter
// get every item done exactly once, whichever helpers join, and run
// returns only after every joined helper has returned.
func TestGangRunsEveryItemOnce(t *testing.T) {
	for _, helpers := range []int{0, 1, 3} {
		var g Gang
		g.Start(helpers)
		const items = 64
		for round := range 300 {
			if round%3 == 0 {
				g.Wake()
			}
			var done [items]atomic.Int32
			var next, inside atomic.Int32
			var byWorker [8]atomic.Int32
			g.Run(func(i int) {
				byWorker[i].Add(1)
				inside.Add(1)
				defer inside.Add(-1)
				for {
					j := int(next.Add(1)) - 1
					if j >= items {
						return
					}
					done[j].Add(1)
				}
			})
			require.Zero(t, inside.Load(), "run returned while a worker was in the job")
			require.Equal(t, int32(1), byWorker[0].Load(), "the caller runs the job once")
			for i := 1; i < len(byWorker); i++ {
				require.LessOrEqual(t, byWorker[i].Load(), int32(1), "worker %d ran the job twice", i)
				if i > helpers {
					require.Zero(t, byWorker[i].Load(), "no worker %d", i)
				}
			}
			for j := range done {
				require.Equal(t, int32(1), done[j].Load(), "item %d (round %d, %d helpers)", j, round, helpers)
			}
			if round%3 == 2 {
				g.Rest()
			}
		}
		g.Stop()
	}
}

// TestGangHelperJoins: a woken helper takes part in a job that waits for
// it (bounded by a generous deadline: a parked thread wakes in well under
// a millisecond), so the parallel phases do use the other cores.
func TestGangHelperJoins(t *testing.T) {
	var g Gang
	g.Start(1)
	defer g.Stop()
	for round := range 20 {
		g.Wake()
		helped := runUntilHelped(&g)
		g.Rest()
		require.True(t, helped, "round %d: the helper never joined", round)
	}
}

// runUntilHelped runs a job whose caller part waits for helper 1 to join
// it (a generous 5 s: a wake takes well under a millisecond) and reports
// whether it did.
func runUntilHelped(g *Gang) bool {
	var helped atomic.Bool
	g.Run(func(i int) {
		if i == 1 {
			helped.Store(true)
			return
		}
		deadline := time.Now().Add(5 * time.Second)
		for !helped.Load() && time.Now().Before(deadline) {
			spinFor(time.Microsecond)
		}
	})
	return helped.Load()
}

// TestGangStop: stopped helpers end, and a stopped gang still runs jobs on
// the caller.
func TestGangStop(t *testing.T) {
	var g Gang
	g.Start(2)
	g.Wake()
	g.Stop()
	ran := 0
	g.Run(func(i int) {
		if i == 0 {
			ran++
		}
	})
	require.Equal(t, 1, ran)
}

// TestShareClaims: claims from both ends of a share, concurrently, hand
// out every index exactly once, the front's in ascending and the back's in
// descending order.
func TestShareClaims(t *testing.T) {
	const lo, hi = 3, 2003
	var c Claims
	var got [hi]atomic.Int32
	var g Gang
	g.Start(1)
	defer g.Stop()
	g.Wake()
	g.Run(func(i int) {
		prev := -1
		for {
			j, ok := c.Claim(lo, hi, i == 1)
			if !ok {
				return
			}
			if prev >= 0 && (i == 1) != (j < prev) {
				got[0].Add(1) // out of order (index 0 is never handed out)
			}
			prev = j
			got[j].Add(1)
		}
	})
	require.Zero(t, got[0].Load(), "claims out of order")
	for j := lo; j < hi; j++ {
		require.Equal(t, int32(1), got[j].Load(), "index %d", j)
	}
	_, ok := c.Claim(lo, hi, false)
	require.False(t, ok)
}

// spinFor busy-waits d (no sleep: the point is to stay on the processor).
func spinFor(d time.Duration) {
	for t := time.Now(); time.Since(t) < d; {
	}
}

// TestGangWakeRightAfterRest: a wake that comes while a helper is on its
// way to park (it saw the last rest) still brings it to the next job. A
// helper that parked with no token here missed about one round in 4000.
func TestGangWakeRightAfterRest(t *testing.T) {
	var g Gang
	g.Start(1)
	defer g.Stop()
	rounds := 3000
	if testing.Short() {
		rounds = 300
	}
	for r := range rounds {
		g.Rest()
		spinFor(time.Duration(r%40) * time.Microsecond)
		g.Wake()
		require.True(t, runUntilHelped(&g), "round %d: the woken helper parked through the job", r)
	}
}

// TestGangJobRightAfterIdle: a job that opens while a helper is on its way
// to park for lack of work (it spun its idle time without one) still gets
// the helper. The idle time is cut to microseconds here so that the race
// comes often; with the server's 0.5 ms it took a descheduled helper.
func TestGangJobRightAfterIdle(t *testing.T) {
	g := Gang{idle: 2 * time.Microsecond}
	g.Start(1)
	defer g.Stop()
	rounds := 3000
	if testing.Short() {
		rounds = 300
	}
	g.Wake()
	for r := range rounds {
		spinFor(time.Duration(r%40) * time.Microsecond)
		require.True(t, runUntilHelped(&g), "round %d: the helper parked through the job", r)
	}
}

// TestGangSurvivesAPanic: a job whose caller part panics (a user hook, say)
// and is recovered leaves the gang working: later jobs close, helpers run
// each at most once and never after run returned.
func TestGangSurvivesAPanic(t *testing.T) {
	var g Gang
	g.Start(1)
	defer g.Stop()
	g.Wake()
	require.Panics(t, func() {
		g.Run(func(i int) {
			if i == 0 {
				panic("user hook panicked")
			}
		})
	})
	require.Zero(t, g.gen.Load()%2, "the job is closed")
	var late atomic.Int32
	for range 200 {
		var returned atomic.Bool
		var items [16]atomic.Int32
		var next atomic.Int32
		g.Run(func(i int) {
			if returned.Load() {
				late.Add(1)
			}
			for j := int(next.Add(1)) - 1; j < len(items); j = int(next.Add(1)) - 1 {
				items[j].Add(1)
			}
		})
		returned.Store(true)
		for j := range items {
			require.Equal(t, int32(1), items[j].Load())
		}
	}
	require.Zero(t, late.Load(), "a helper ran a job after run returned")
}

// TestShares: every item runs once, on any goroutine, and done runs once
// on each goroutine that ran the job; without helpers, all on the caller.
func TestShares(t *testing.T) {
	for _, helpers := range []int{0, 1, 3} {
		var g Gang
		g.Start(helpers)
		for _, items := range []int{0, 1, 2, 7, 100} {
			var ran [100]atomic.Int32
			var done [4]atomic.Int32
			g.Wake()
			g.Shares(items, func(wi, i int) { ran[i].Add(1) }, func(wi int) { done[wi].Add(1) })
			g.Rest()
			for i := range items {
				require.Equal(t, int32(1), ran[i].Load(), "helpers %d items %d item %d", helpers, items, i)
			}
			require.Equal(t, int32(1), done[0].Load(), "the caller always takes part")
			for wi := range done {
				require.LessOrEqual(t, done[wi].Load(), int32(1))
			}
		}
		g.Stop()
	}
}
