package ecs

import (
	"context"
	"errors"
	"fmt"
	"time"

	arche "github.com/mlange-42/arche/ecs"
)

// Errors returned by [New]. Test for them with errors.Is.
var (
	// ErrInvalidConfig reports a [Config] field out of range.
	ErrInvalidConfig = errors.New("ecs: invalid scheduler config")
	// ErrTickInfoExists reports a world that already holds a [TickInfo]
	// resource, i.e. already has a scheduler.
	ErrTickInfoExists = errors.New("ecs: world already has a TickInfo resource")
)

// Limits on [Config] fields.
const (
	// MaxTickRate is the largest accepted [Config.TickRate].
	MaxTickRate = 10000
	// maxAdvance bounds one Advance call before the multiplication by the
	// tick rate, so the accumulator cannot overflow.
	maxAdvance = time.Hour
	// tickUnits is one tick in accumulator units (nanoseconds × tick rate),
	// so that fractional tick lengths such as 1/60 s accumulate exactly.
	tickUnits = int64(time.Second)
)

// Config configures a [Scheduler]. Its zero value is a 60 Hz simulation that
// sends on every tick.
type Config struct {
	// TickRate is the number of fixed simulation ticks per second.
	// Zero means 60. At most [MaxTickRate].
	TickRate int
	// NetDivisor makes every NetDivisor-th simulation tick a network tick,
	// so the send rate is TickRate/NetDivisor (60/3 = 20 Hz).
	// Zero means 1: every tick is a network tick.
	NetDivisor int
	// MaxCatchUp is the largest number of ticks a single [Scheduler.Advance]
	// runs. Time beyond it is dropped (see [Scheduler.DroppedTicks]) so that a
	// slow frame cannot make the next one slower still (the "spiral of
	// death"). Zero means a quarter second of ticks (TickRate/4, at least 1).
	MaxCatchUp int
}

func (c Config) resolve() (Config, error) {
	if c.TickRate < 0 || c.TickRate > MaxTickRate {
		return c, fmt.Errorf("%w: TickRate %d not in [0, %d]", ErrInvalidConfig, c.TickRate, MaxTickRate)
	}
	if c.NetDivisor < 0 {
		return c, fmt.Errorf("%w: NetDivisor %d is negative", ErrInvalidConfig, c.NetDivisor)
	}
	if c.MaxCatchUp < 0 {
		return c, fmt.Errorf("%w: MaxCatchUp %d is negative", ErrInvalidConfig, c.MaxCatchUp)
	}
	if c.TickRate == 0 {
		c.TickRate = 60
	}
	if c.NetDivisor == 0 {
		c.NetDivisor = 1
	}
	if c.MaxCatchUp == 0 {
		c.MaxCatchUp = max(c.TickRate/4, 1)
	}
	return c, nil
}

// TickInfo describes the tick being run. The [Scheduler] keeps one in the
// world as a resource; systems read it with arche.GetResource[ecs.TickInfo](w)
// and must not modify it.
//
// Tick numbering: before the first tick Tick is 0 and the world holds its
// initial state at simulated time 0. The first tick is tick 1; after tick n
// the world holds the state at simulated time n/TickRate.
type TickInfo struct {
	// Tick is the number of the simulation tick being run (1, 2, …).
	Tick uint64
	// NetTick is the number of the network tick this simulation tick belongs
	// to: Tick/NetDivisor, truncated to 32 bits (it wraps after 2³² network
	// ticks; compare with serial-number arithmetic).
	NetTick uint32
	// IsNetTick reports whether a snapshot is due this tick
	// (Tick % NetDivisor == 0).
	IsNetTick bool
	// Dt is the fixed step in seconds (1/TickRate).
	Dt float64
	// Step is the fixed step rounded to the nanosecond.
	Step time.Duration
	// Time is the simulated time at the end of this tick, Tick/TickRate
	// seconds, exact to the nanosecond (no accumulated rounding).
	Time time.Duration
	// TickRate and NetDivisor are the resolved [Config] values.
	TickRate, NetDivisor int
}

type schedState uint8

const (
	stateNew schedState = iota
	stateRunning
	stateClosed
)

type systemEntry struct {
	sys     System
	netOnly bool
}

// Scheduler runs [System]s at a fixed tick rate over one arche world.
//
// [Scheduler.Step] runs exactly one tick; [Scheduler.Advance] turns elapsed
// real time into ticks; [Scheduler.Run] does that in real time until its
// context ends. A Scheduler is not safe for concurrent use, and neither is
// the world it drives.
type Scheduler struct {
	world   *arche.World
	cfg     Config
	info    TickInfo
	resID   arche.ResID
	systems []systemEntry
	acc     int64 // accumulated time, nanoseconds × TickRate; one tick = tickUnits
	dropped uint64
	state   schedState
}

// New returns a scheduler for w and registers its [TickInfo] as a world
// resource. It fails with [ErrInvalidConfig] or [ErrTickInfoExists].
func New(w *arche.World, cfg Config) (*Scheduler, error) {
	cfg, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	id := arche.ResourceID[TickInfo](w)
	if w.Resources().Has(id) {
		return nil, ErrTickInfoExists
	}
	s := &Scheduler{world: w, cfg: cfg, resID: id}
	s.info = TickInfo{
		Dt:         1 / float64(cfg.TickRate),
		Step:       s.timeAt(1),
		TickRate:   cfg.TickRate,
		NetDivisor: cfg.NetDivisor,
		IsNetTick:  true, // tick 0, the initial state, is a network tick
	}
	w.Resources().Add(id, &s.info)
	return s, nil
}

// timeAt returns tick/TickRate seconds without overflow or drift.
func (s *Scheduler) timeAt(tick uint64) time.Duration {
	r := uint64(s.cfg.TickRate)
	return time.Duration((tick/r)*uint64(time.Second) + (tick%r)*uint64(time.Second)/r)
}

// AddSystem appends sys; systems update in the order they were added. If the
// scheduler has already started, sys is initialized at once. Panics after
// [Scheduler.Close].
func (s *Scheduler) AddSystem(sys System) { s.add(sys, false) }

// AddNetSystem appends sys as a network-tick-only system: its Update runs only
// on ticks where [TickInfo.IsNetTick] is true (every NetDivisor-th tick). It
// keeps its place in the update order among all systems.
func (s *Scheduler) AddNetSystem(sys System) { s.add(sys, true) }

func (s *Scheduler) add(sys System, netOnly bool) {
	if s.state == stateClosed {
		panic("ecs: AddSystem on a closed Scheduler")
	}
	s.systems = append(s.systems, systemEntry{sys: sys, netOnly: netOnly})
	if s.state == stateRunning {
		sys.Initialize(s.world)
	}
}

// Initialize calls Initialize on every system in order. It runs
// automatically on the first [Scheduler.Step], [Scheduler.Advance] or
// [Scheduler.Run]; calling it again does nothing. Panics after
// [Scheduler.Close].
func (s *Scheduler) Initialize() {
	switch s.state {
	case stateClosed:
		panic("ecs: Initialize on a closed Scheduler")
	case stateRunning:
		return
	}
	s.state = stateRunning
	for _, e := range s.systems {
		e.sys.Initialize(s.world)
	}
}

// Step runs exactly one tick: it advances [TickInfo] and calls Update on
// every system in order (net-only systems only on network ticks). It does
// not touch the time accumulated by [Scheduler.Advance]. Panics after
// [Scheduler.Close]. Allocation-free unless a system allocates.
func (s *Scheduler) Step() {
	if s.state != stateRunning {
		s.Initialize()
	}
	t := s.info.Tick + 1
	s.info.Tick = t
	div := uint64(s.cfg.NetDivisor)
	s.info.NetTick = uint32(t / div)
	s.info.IsNetTick = t%div == 0
	s.info.Time = s.timeAt(t)
	for _, e := range s.systems {
		if e.netOnly && !s.info.IsNetTick {
			continue
		}
		e.sys.Update(s.world)
	}
}

// Advance adds elapsed to the time accumulator and runs as many whole ticks
// as it holds, at most [Config.MaxCatchUp]; whole ticks beyond that are
// dropped and counted in [Scheduler.DroppedTicks]. It returns the number of
// ticks run and the interpolation alpha in [0, 1): the fraction of a tick
// accumulated but not yet simulated, for blending the last two simulated
// states when rendering. A negative elapsed counts as zero; more than an hour
// counts as an hour. Accumulation is exact (integer nanoseconds × tick rate),
// so 60 calls of 1/60 s run exactly 60 ticks at 60 Hz.
func (s *Scheduler) Advance(elapsed time.Duration) (ticks int, alpha float64) {
	if s.state != stateRunning {
		s.Initialize()
	}
	if elapsed < 0 {
		elapsed = 0
	}
	if elapsed > maxAdvance {
		s.dropped += uint64((elapsed - maxAdvance).Nanoseconds() * int64(s.cfg.TickRate) / tickUnits)
		elapsed = maxAdvance
	}
	s.acc += elapsed.Nanoseconds() * int64(s.cfg.TickRate)
	n := s.acc / tickUnits
	if n > int64(s.cfg.MaxCatchUp) {
		drop := n - int64(s.cfg.MaxCatchUp)
		s.dropped += uint64(drop)
		s.acc -= drop * tickUnits
		n = int64(s.cfg.MaxCatchUp)
	}
	for range n {
		s.acc -= tickUnits
		s.Step()
	}
	return int(n), s.Alpha()
}

// Alpha returns the fraction of a tick accumulated by [Scheduler.Advance]
// but not yet simulated, in [0, 1).
func (s *Scheduler) Alpha() float64 { return float64(s.acc) / float64(tickUnits) }

// untilNextTick returns the real time until the accumulator holds a whole
// tick, rounded up to the nanosecond.
func (s *Scheduler) untilNextTick() time.Duration {
	r := int64(s.cfg.TickRate)
	return time.Duration((tickUnits - s.acc + r - 1) / r)
}

// Run runs ticks in real time, as measured by clock, until ctx ends; then it
// closes the scheduler (finalizing the systems) and returns ctx.Err(). It
// waits on clock.After between ticks, so with a [ManualClock] it runs
// exactly as far as the test advances the clock. Panics if the scheduler is
// already closed.
//
// Run suits a headless server. A client with a render loop calls
// [Scheduler.Advance] once per frame instead and uses the returned alpha.
func (s *Scheduler) Run(ctx context.Context, clock Clock) error {
	s.Initialize()
	defer s.Close()
	last := clock.Now()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		now := clock.Now()
		s.Advance(now.Sub(last))
		last = now
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-clock.After(s.untilNextTick()):
		}
	}
}

// Close calls Finalize on every system in reverse order of addition (so a
// system finalizes before the systems it was set up after), if they were
// initialized, and removes the [TickInfo] resource. Calling it again does
// nothing.
func (s *Scheduler) Close() {
	if s.state == stateClosed {
		return
	}
	if s.state == stateRunning {
		for i := len(s.systems) - 1; i >= 0; i-- {
			s.systems[i].sys.Finalize(s.world)
		}
	}
	s.state = stateClosed
	if s.world.Resources().Has(s.resID) {
		s.world.Resources().Remove(s.resID)
	}
}

// Info returns the [TickInfo] of the last tick run (Tick 0 before the first).
func (s *Scheduler) Info() TickInfo { return s.info }

// DroppedTicks returns how many whole ticks [Scheduler.Advance] has dropped
// because they exceeded [Config.MaxCatchUp].
func (s *Scheduler) DroppedTicks() uint64 { return s.dropped }

// Config returns the scheduler's configuration with defaults filled in.
func (s *Scheduler) Config() Config { return s.cfg }

// World returns the world the scheduler drives.
func (s *Scheduler) World() *arche.World { return s.world }
