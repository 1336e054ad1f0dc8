package ecs_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	arche "github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/ecs"
)

// recorder is a System that appends what happens to it to a shared log.
type recorder struct {
	name string
	log  *[]string
	seen []ecs.TickInfo
}

func (r *recorder) Initialize(*arche.World) { *r.log = append(*r.log, r.name+".init") }
func (r *recorder) Finalize(*arche.World)   { *r.log = append(*r.log, r.name+".fin") }
func (r *recorder) Update(w *arche.World) {
	info := arche.GetResource[ecs.TickInfo](w)
	r.seen = append(r.seen, *info)
	*r.log = append(*r.log, fmt.Sprintf("%s.%d", r.name, info.Tick))
}

func newScheduler(t *testing.T, cfg ecs.Config) (*ecs.Scheduler, *arche.World) {
	t.Helper()
	w := arche.NewWorld()
	s, err := ecs.New(&w, cfg)
	require.NoError(t, err)
	return s, &w
}

func TestConfigDefaultsAndErrors(t *testing.T) {
	s, _ := newScheduler(t, ecs.Config{})
	assert.Equal(t, ecs.Config{TickRate: 60, NetDivisor: 1, MaxCatchUp: 15}, s.Config())

	for _, cfg := range []ecs.Config{
		{TickRate: -1}, {TickRate: ecs.MaxTickRate + 1}, {NetDivisor: -2}, {MaxCatchUp: -1},
	} {
		w := arche.NewWorld()
		_, err := ecs.New(&w, cfg)
		assert.ErrorIs(t, err, ecs.ErrInvalidConfig, "%+v", cfg)
	}

	w := arche.NewWorld()
	_, err := ecs.New(&w, ecs.Config{})
	require.NoError(t, err)
	_, err = ecs.New(&w, ecs.Config{})
	assert.ErrorIs(t, err, ecs.ErrTickInfoExists)
}

func TestStepOrderInitFinalize(t *testing.T) {
	s, _ := newScheduler(t, ecs.Config{TickRate: 30})
	var log []string
	a := &recorder{name: "a", log: &log}
	b := &recorder{name: "b", log: &log}
	s.AddSystem(a)
	s.AddSystem(b)
	s.Step()
	s.Step()
	s.Initialize() // no second Initialize
	c := &recorder{name: "c", log: &log}
	s.AddSystem(c) // initialized at once: the scheduler has started
	s.Step()
	s.Close()
	s.Close() // idempotent
	assert.Equal(t, []string{
		"a.init", "b.init",
		"a.1", "b.1",
		"a.2", "b.2",
		"c.init",
		"a.3", "b.3", "c.3",
		"c.fin", "b.fin", "a.fin",
	}, log)
	assert.Panics(t, s.Step)
	assert.Panics(t, func() { s.AddSystem(a) })
}

func TestCloseWithoutStartDoesNotFinalize(t *testing.T) {
	s, w := newScheduler(t, ecs.Config{})
	var log []string
	s.AddSystem(&recorder{name: "a", log: &log})
	s.Close()
	assert.Empty(t, log)
	assert.False(t, w.Resources().Has(arche.ResourceID[ecs.TickInfo](w)), "Close removes the TickInfo resource")
	_, err := ecs.New(w, ecs.Config{})
	assert.NoError(t, err, "a new scheduler can take over the world")
}

func TestTickInfoAndNetDivisor(t *testing.T) {
	s, _ := newScheduler(t, ecs.Config{TickRate: 60, NetDivisor: 3})
	var log []string
	all := &recorder{name: "all", log: &log}
	net := &recorder{name: "net", log: &log}
	s.AddSystem(all)
	s.AddNetSystem(net)
	for range 7 {
		s.Step()
	}
	require.Len(t, all.seen, 7)
	var isNet []bool
	var netTicks []uint32
	for _, in := range all.seen {
		isNet = append(isNet, in.IsNetTick)
		netTicks = append(netTicks, in.NetTick)
	}
	assert.Equal(t, []bool{false, false, true, false, false, true, false}, isNet)
	assert.Equal(t, []uint32{0, 0, 1, 1, 1, 2, 2}, netTicks)
	require.Len(t, net.seen, 2)
	assert.Equal(t, uint64(3), net.seen[0].Tick)
	assert.Equal(t, uint64(6), net.seen[1].Tick)

	in := all.seen[2]
	assert.Equal(t, 50*time.Millisecond, in.Time)
	assert.Equal(t, 16666666*time.Nanosecond, in.Step)
	assert.InDelta(t, 1.0/60, in.Dt, 1e-15)
	assert.Equal(t, 3, in.NetDivisor)
	assert.Equal(t, uint64(7), s.Info().Tick)
}

func TestTimeIsExact(t *testing.T) {
	s, _ := newScheduler(t, ecs.Config{TickRate: 60})
	for range 6000 {
		s.Step()
	}
	assert.Equal(t, 100*time.Second, s.Info().Time, "no drift from the 16.666… ms step")
}

func TestAdvanceAccumulates(t *testing.T) {
	s, _ := newScheduler(t, ecs.Config{TickRate: 60})
	var log []string
	s.AddSystem(&recorder{name: "a", log: &log})

	n, alpha := s.Advance(10 * time.Millisecond) // 0.6 tick
	assert.Equal(t, 0, n)
	assert.InDelta(t, 0.6, alpha, 1e-12)
	n, alpha = s.Advance(10 * time.Millisecond) // 1.2 ticks
	assert.Equal(t, 1, n)
	assert.InDelta(t, 0.2, alpha, 1e-12)
	n, alpha = s.Advance(-time.Second) // negative counts as zero
	assert.Equal(t, 0, n)
	assert.InDelta(t, 0.2, alpha, 1e-12)

	// Frames of exactly 1/60 s (rounded down to the ns) and of 1/60 s
	// rounded up: the exact accumulator keeps the count right.
	s2, _ := newScheduler(t, ecs.Config{TickRate: 60})
	total := 0
	for i := range 600 {
		d := 16666666 * time.Nanosecond
		if i%3 != 0 {
			d++ // 3 frames = 50 ms exactly
		}
		k, _ := s2.Advance(d)
		total += k
	}
	assert.Equal(t, 600, total)
	assert.Equal(t, uint64(600), s2.Info().Tick)
	assert.Equal(t, 0.0, s2.Alpha())
}

func TestAdvanceCatchUpLimit(t *testing.T) {
	s, _ := newScheduler(t, ecs.Config{TickRate: 60, MaxCatchUp: 5})
	n, alpha := s.Advance(time.Second + 8*time.Millisecond) // 60.48 ticks
	assert.Equal(t, 5, n)
	assert.InDelta(t, 0.48, alpha, 1e-12, "the fraction survives, whole ticks are dropped")
	assert.Equal(t, uint64(55), s.DroppedTicks())
	assert.Equal(t, uint64(5), s.Info().Tick)

	n, _ = s.Advance(17 * time.Millisecond) // 0.48 + 1.02 = 1.5 ticks
	assert.Equal(t, 1, n)
	assert.InDelta(t, 0.5, s.Alpha(), 1e-12)

	// Default: a quarter second of ticks.
	s2, _ := newScheduler(t, ecs.Config{TickRate: 20})
	n, _ = s2.Advance(2 * time.Hour)
	assert.Equal(t, 5, n)
	assert.Equal(t, uint64(2*3600*20-5), s2.DroppedTicks())
}

func TestRunWithManualClock(t *testing.T) {
	s, _ := newScheduler(t, ecs.Config{TickRate: 60, NetDivisor: 2})
	var log []string
	rec := &recorder{name: "a", log: &log}
	s.AddSystem(rec)
	clk := ecs.NewManualClock(time.Unix(1000, 0))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, clk) }()

	step := 16666667 * time.Nanosecond
	for range 10 {
		clk.BlockUntilWaiters(1) // Run has caught up and waits for time
		clk.Advance(step)
	}
	clk.BlockUntilWaiters(1)
	// A long pause: 1 s at once runs MaxCatchUp (15) ticks.
	clk.Advance(time.Second)
	clk.BlockUntilWaiters(1)
	cancel()
	err := <-done
	assert.True(t, errors.Is(err, context.Canceled))
	require.Len(t, rec.seen, 25)
	assert.Equal(t, uint64(25), rec.seen[24].Tick)
	assert.Equal(t, uint64(45), s.DroppedTicks())
	assert.Equal(t, "a.fin", log[len(log)-1], "Run finalizes on return")
}

func TestManualClockAfter(t *testing.T) {
	clk := ecs.NewManualClock(time.Unix(0, 0))
	now := <-clk.After(0)
	assert.Equal(t, time.Unix(0, 0), now)
	ch := clk.After(time.Second)
	clk.Advance(999 * time.Millisecond)
	select {
	case <-ch:
		t.Fatal("fired early")
	default:
	}
	assert.Equal(t, 1, clk.Waiters())
	clk.Advance(time.Millisecond)
	assert.Equal(t, time.Unix(1, 0), <-ch)
	assert.Equal(t, 0, clk.Waiters())
	assert.Panics(t, func() { clk.Advance(-1) })
}
