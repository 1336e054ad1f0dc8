package interp

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/archenet/archenet/replication/timing"
)

// ErrInvalidConfig reports a [ClockConfig] or [SmootherConfig] field out of
// range.
var ErrInvalidConfig = errors.New("interp: invalid config")

// Fixed delay constants. They are not configurable because the delay
// formula and its tests are derived from them.
const (
	// lossTolerance is the accepted probability that the snapshot needed for
	// interpolation is missing because of consecutive losses; see
	// [Clock.TargetDelay].
	lossTolerance = 0.05
	// maxLossIntervals caps the send intervals reserved for consecutive losses.
	maxLossIntervals = 4
)

// ClockConfig configures a render [Clock]. Only TickInterval is required;
// every zero field means its documented default.
type ClockConfig struct {
	// TickInterval is the server's network send interval, the time between
	// consecutive network ticks (1/30 s at 30 Hz). Required, > 0.
	TickInterval time.Duration
	// JitterFactor is k in the target delay (1+m)·TickInterval + k·jitter,
	// where jitter is the mean absolute deviation of arrival times. Zero
	// means 3: for Gaussian jitter the mean absolute deviation is 0.8σ, so
	// 3 of them are 2.4σ (99% of packets on time); for uniform jitter ±J it
	// is J/2, so 3 of them (1.5 J) cover every packet.
	JitterFactor float64
	// MaxTimeScale bounds how much faster or slower than real time the render
	// time may run while it converges on its target: the scale stays in
	// [1−MaxTimeScale, 1+MaxTimeScale]. Zero means 0.1. At most 0.5.
	MaxTimeScale float64
	// Convergence is the time constant with which the render delay follows
	// its target (until MaxTimeScale saturates). Zero means 500 ms.
	Convergence time.Duration
	// MinDelay and MaxDelay clamp the target delay. Zero MinDelay means no
	// lower clamp; zero MaxDelay means 1 s.
	MinDelay, MaxDelay time.Duration
	// ResetThreshold is the discontinuity beyond which the clock jumps
	// instead of sliding: timing.OutlierRun consecutive arrivals this far off the
	// estimate reset the estimator (server restart, tick renumbering, a
	// stall), and a render time this far off its target jumps to it. Zero
	// means 1 s.
	ResetThreshold time.Duration
	// InitialJitter is the jitter assumed before any is measured. Zero means
	// TickInterval/4.
	InitialJitter time.Duration
	// Arrivals, if set, is the server-time estimator to read instead of one
	// of the clock's own: the client's (replication.Client.Arrivals, in
	// TickInterval ticks), which its owner feeds and which an input clock
	// (input.TickSync) may read too. Observe is then ignored, and
	// ResetThreshold and InitialJitter are the estimator's business. Nil:
	// the clock keeps its own, fed by Observe.
	Arrivals *timing.Arrivals
}

func (c ClockConfig) resolve() (ClockConfig, error) {
	if c.TickInterval <= 0 {
		return c, fmt.Errorf("%w: TickInterval %v must be > 0", ErrInvalidConfig, c.TickInterval)
	}
	if c.JitterFactor < 0 || c.MaxTimeScale < 0 || c.MaxTimeScale > 0.5 || c.Convergence < 0 ||
		c.MinDelay < 0 || c.MaxDelay < 0 || c.ResetThreshold < 0 || c.InitialJitter < 0 {
		return c, fmt.Errorf("%w: negative field or MaxTimeScale > 0.5: %+v", ErrInvalidConfig, c)
	}
	if c.JitterFactor == 0 {
		c.JitterFactor = 3
	}
	if c.MaxTimeScale == 0 {
		c.MaxTimeScale = 0.1
	}
	if c.Convergence == 0 {
		c.Convergence = 500 * time.Millisecond
	}
	if c.MaxDelay == 0 {
		c.MaxDelay = time.Second
	}
	if c.MinDelay > c.MaxDelay {
		return c, fmt.Errorf("%w: MinDelay %v > MaxDelay %v", ErrInvalidConfig, c.MinDelay, c.MaxDelay)
	}
	if c.ResetThreshold == 0 {
		c.ResetThreshold = time.Second
	}
	if c.InitialJitter == 0 {
		c.InitialJitter = c.TickInterval / 4
	}
	return c, nil
}

// Clock is a client's render clock for snapshot interpolation. It is fed the
// server tick and local arrival time of every snapshot ([Clock.Observe]) and
// advanced once per rendered frame ([Clock.Advance]); it provides the render
// tick at which interpolated entities are sampled ([Clock.RenderTick]).
//
// # Server time
//
// The server's tick schedule comes from a [timing.Arrivals] (the one
// estimator input.TickSync uses too): [Clock.ServerTick] is the tick whose
// snapshot arrives at a given local time on average — the server's tick
// minus the mean one-way latency, which is all interpolation needs.
//
// # Delay
//
// Sampling at render tick r needs the snapshot of the tick after r. The
// target delay (see [Clock.TargetDelay]) keeps enough snapshots in hand to
// ride out jitter and losses; the render tick trails the estimated server
// tick by it.
//
// # Time scaling
//
// The render tick advances by the frame time × a scale in
// [1−MaxTimeScale, 1+MaxTimeScale] that steers the actual delay toward the
// target with time constant Convergence. It never jumps, except: on the first
// frame after the first snapshot, and when it is more than ResetThreshold off
// its target (counted in [Clock.Resets]).
//
// A Clock uses only the times passed to it — no wall clock. It is not safe
// for concurrent use. Create it with [NewClock].
type Clock struct {
	cfg ClockConfig
	t   float64 // TickInterval in seconds
	arr *timing.Arrivals
	own timing.Arrivals

	ready   bool
	render  float64 // render tick
	lastNow time.Time
	frameDt time.Duration
	scale   float64
	resets  int
}

// NewClock returns a render clock. It fails with [ErrInvalidConfig].
func NewClock(cfg ClockConfig) (*Clock, error) {
	cfg, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	c := &Clock{cfg: cfg, t: cfg.TickInterval.Seconds(), scale: 1}
	c.arr = cfg.Arrivals
	if c.arr == nil {
		c.own = timing.NewArrivals(cfg.TickInterval, cfg.ResetThreshold, cfg.InitialJitter)
		c.arr = &c.own
	}
	return c, nil
}

// Config returns the clock's configuration with defaults filled in.
func (c *Clock) Config() ClockConfig { return c.cfg }

// Observe records that the snapshot of server network tick arrived at local
// time arrival. Call it for every snapshot received, including late,
// reordered and duplicate ones (a duplicate counts as a jitter sample but not
// twice as received). Ticks wrap with serial-number arithmetic. Ignored with
// ClockConfig.Arrivals (its owner feeds it). O(1), no allocation.
func (c *Clock) Observe(tick uint32, arrival time.Time) {
	if c.arr == &c.own {
		c.own.Observe(tick, arrival)
	}
}

// ServerTick returns the estimated server network tick at local time now,
// as a fractional tick: the tick whose snapshot arrives at now on average.
// Zero before the first [Clock.Observe].
func (c *Clock) ServerTick(now time.Time) float64 { return c.arr.ServerTick(now) }

// Jitter returns the measured jitter: the running mean absolute deviation of
// snapshot arrival times from their estimated schedule.
func (c *Clock) Jitter() time.Duration { return c.arr.Jitter() }

// Loss returns the fraction of network ticks missing among the last
// timing.LossWindow (64) ticks up to the newest received. A reordered
// snapshot counts as lost until it arrives.
func (c *Clock) Loss() float64 { return c.arr.Loss() }

// TargetDelay returns the delay the render time steers toward:
//
//	(1 + m)·T + k·jitter, clamped to [MinDelay, MaxDelay]
//
// with T the send interval and k the JitterFactor. One interval T is always
// needed: the snapshot after the render tick must have arrived. m more
// intervals ride out m consecutive lost snapshots; m = ln(0.05)/ln(loss),
// clamped to [1, 4], so a run of losses longer than m happens with
// probability ≤ 5% (m = 1 up to 5% loss: two send intervals, as usual).
// k·jitter covers late arrivals (see [ClockConfig.JitterFactor]).
func (c *Clock) TargetDelay() time.Duration { return seconds(c.targetDelay()) }

func (c *Clock) targetDelay() float64 {
	m := 1.0
	if p := c.Loss(); p >= 1 {
		m = maxLossIntervals
	} else if p > 0 {
		m = min(max(math.Log(lossTolerance)/math.Log(p), 1), maxLossIntervals)
	}
	d := (1+m)*c.t + c.cfg.JitterFactor*c.arr.JitterTicks()*c.t
	return min(max(d, c.cfg.MinDelay.Seconds()), c.cfg.MaxDelay.Seconds())
}

// Advance moves the render time to the frame at local time now and returns
// the render tick. Call it once per rendered frame, before sampling. Before
// the first snapshot it only records now; on the first frame after it the
// render tick is set to its target. A now earlier than the previous frame's
// counts as no time passing. O(1), no allocation.
func (c *Clock) Advance(now time.Time) float64 {
	if !c.ready {
		c.frameDt = 0
		if c.lastNow.IsZero() || now.After(c.lastNow) {
			c.lastNow = now
		}
		if c.arr.Observed() {
			c.render = c.ServerTick(now) - c.targetDelay()/c.t
			c.ready = true
		}
		return c.render
	}
	dt := now.Sub(c.lastNow)
	if dt < 0 {
		dt = 0
	} else {
		c.lastNow = now
	}
	c.frameDt = dt
	step := dt.Seconds() / c.t
	target := c.ServerTick(c.lastNow) - c.targetDelay()/c.t
	ahead := (c.render + step - target) * c.t // seconds the render time would be ahead of its target
	if math.Abs(ahead) > c.cfg.ResetThreshold.Seconds() {
		c.render = target
		c.scale = 1
		c.resets++
		return c.render
	}
	mx := c.cfg.MaxTimeScale
	c.scale = 1 - min(max(ahead/c.cfg.Convergence.Seconds(), -mx), mx)
	c.render += step * c.scale
	return c.render
}

// Ready reports whether the render tick is valid: a snapshot has been
// observed and [Clock.Advance] has run since.
func (c *Clock) Ready() bool { return c.ready }

// RenderTick returns the render tick set by the last [Clock.Advance]: the
// fractional server network tick to sample interpolated entities at.
func (c *Clock) RenderTick() float64 { return c.render }

// Delay returns the actual interpolation delay at the last frame: estimated
// server time minus render time.
func (c *Clock) Delay() time.Duration {
	if !c.ready {
		return 0
	}
	return seconds((c.ServerTick(c.lastNow) - c.render) * c.t)
}

// TimeScale returns the rate at which the render time ran in the last frame
// relative to real time, in [1−MaxTimeScale, 1+MaxTimeScale].
func (c *Clock) TimeScale() float64 { return c.scale }

// FrameDelta returns the local time between the last two frames passed to
// [Clock.Advance].
func (c *Clock) FrameDelta() time.Duration { return c.frameDt }

// Resets returns how often the render time jumped because it was more than
// ResetThreshold off its target.
func (c *Clock) Resets() int { return c.resets }

// TickInterval returns the configured send interval.
func (c *Clock) TickInterval() time.Duration { return c.cfg.TickInterval }

func seconds(s float64) time.Duration { return time.Duration(math.Round(s * float64(time.Second))) }
