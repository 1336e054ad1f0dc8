package lagcomp_test

import (
	"fmt"
	"time"

	arche "github.com/mlange-42/arche/ecs"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/lagcomp"
	"github.com/archenet/archenet/replication/schema"
)

// A target moves 1 m per net tick; a client that rendered it at net tick
// 7.5 saw it where the history says, not where it is now.
func ExampleHistory() {
	reg := schema.NewRegistry()
	schema.MustRegister[components.Transform](reg)
	w := arche.NewWorld()
	idTr := arche.ComponentID[components.Transform](&w)
	target := w.NewEntity(arche.ComponentID[components.Replicated](&w), idTr)
	hist, _ := lagcomp.New[components.Transform](&w, reg, lagcomp.Config{Depth: 16})
	for tick := uint32(1); tick <= 10; tick++ {
		(*components.Transform)(w.Get(target, idTr)).Pos.X = float64(tick)
		hist.Record(tick) // after each net tick's Send
	}
	var seen components.Transform
	view := hist.Clamp(7.5) // the render tick the client reported
	if hist.At(target, view, &seen) {
		fmt.Printf("now at x=%.1f, the client saw x=%.1f\n", (*components.Transform)(w.Get(target, idTr)).Pos.X, seen.Pos.X)
	}
	fmt.Printf("a claim of tick -100 is clamped to %.0f\n", hist.Clamp(-100))
	// Output:
	// now at x=10.0, the client saw x=7.5
	// a claim of tick -100 is clamped to 1
}

// A client at 20 ms round-trip time claims it saw the world a second ago
// (30 net ticks at 30 Hz): it is judged at the bound the server measured
// for it, 270 ms (8.1 net ticks) back, and the claim is counted.
func ExampleRewinds() {
	rewinds, _ := lagcomp.NewRewinds(lagcomp.Limits{NetRate: 30})
	const shooter, at = 3, 1000.0
	rtt := 20 * time.Millisecond // replication.Server.RTT(shooter)
	view := rewinds.Judge(shooter, at, at-30, rtt)
	st := rewinds.Stats(shooter)
	fmt.Printf("judged %.1f ticks back; claimed %v, bound %v, clamped %d of %d\n", at-view, st.LastClaim, st.LastBound, st.Clamped, st.Claims)
	// Output:
	// judged 8.1 ticks back; claimed 1s, bound 270ms, clamped 1 of 1
}
