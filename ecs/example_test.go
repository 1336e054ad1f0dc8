package ecs_test

import (
	"fmt"
	"time"

	arche "github.com/mlange-42/arche/ecs"
	"github.com/mlange-42/arche/generic"

	"github.com/archenet/archenet/ecs"
)

type position struct{ X float64 }
type velocity struct{ X float64 }

// mover integrates velocity into position every tick and reports net ticks.
type mover struct {
	filter *generic.Filter2[position, velocity]
}

func (m *mover) Initialize(w *arche.World) { m.filter = generic.NewFilter2[position, velocity]() }
func (m *mover) Finalize(w *arche.World)   { fmt.Println("finalized") }
func (m *mover) Update(w *arche.World) {
	info := arche.GetResource[ecs.TickInfo](w)
	q := m.filter.Query(w)
	for q.Next() {
		p, v := q.Get()
		p.X += v.X * info.Dt
		if info.IsNetTick {
			fmt.Printf("tick %d (net %d) t=%v x=%.2f\n", info.Tick, info.NetTick, info.Time, p.X)
		}
	}
}

func ExampleScheduler() {
	w := arche.NewWorld()
	m := generic.NewMap2[position, velocity](&w)
	m.NewWith(&position{}, &velocity{X: 3})

	s, err := ecs.New(&w, ecs.Config{TickRate: 60, NetDivisor: 3}) // 20 Hz sends
	if err != nil {
		panic(err)
	}
	s.AddSystem(&mover{})

	s.Step() // exactly one tick
	ticks, alpha := s.Advance(100 * time.Millisecond)
	fmt.Printf("advance ran %d ticks, alpha %.2f\n", ticks, alpha)
	s.Close()
	// Output:
	// tick 3 (net 1) t=50ms x=0.15
	// tick 6 (net 2) t=100ms x=0.30
	// advance ran 6 ticks, alpha 0.00
	// finalized
}
