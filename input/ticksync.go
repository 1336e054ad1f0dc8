package input

import (
	"fmt"
	"math"
	"time"

	"github.com/archenet/archenet/replication/timing"
)

// SyncConfig configures a [TickSync]. Its zero value suits a 60 Hz server:
// 2 ticks of safety, a 2×jitter margin, ±5% time scaling over a 1 s
// convergence, a hard resync beyond 10 ticks of error.
type SyncConfig struct {
	// TickInterval is the server's tick duration. Zero: 1/60 s.
	TickInterval time.Duration
	// Safety is how many ticks of input the server should hold beyond the
	// jitter margin when it consumes a tick. It covers lost datagrams: with
	// redundancy N, a frame whose first k copies are lost arrives k ticks
	// late. Zero: 2. Negative is an error.
	Safety float64
	// JitterMargin multiplies the measured jitter (mean absolute deviation
	// of snapshot arrivals) added to the lead. Zero: 2.
	JitterMargin float64
	// MaxScale bounds the client tick rate to 1±MaxScale of real time while
	// it steers toward the target lead. Zero: 0.05.
	MaxScale float64
	// Convergence is the time over which a lead error is closed by scaling
	// (before the MaxScale bound). Zero: 1 s.
	Convergence time.Duration
	// ResyncTicks is the lead error beyond which the client tick jumps
	// instead of scaling ([TickSync.Resyncs]). Zero: 10.
	ResyncTicks float64
	// InitialRTT is assumed until [TickSync.ObserveRTT]. Zero: 100 ms.
	InitialRTT time.Duration
	// MaxCatchUp is the largest number of ticks one [TickSync.Advance]
	// returns; ticks beyond it are skipped (after a stall). Zero: 8.
	MaxCatchUp int
	// Arrivals, if set, is the server-time estimator to read instead of one
	// of the clock's own: the client's (replication.Client.Arrivals), which
	// the client feeds with every snapshot in net ticks and which its render
	// clock reads too, so that the two clocks cannot disagree about the
	// server's time. Its ticks may be longer than TickInterval (net ticks of
	// several simulation ticks); they are converted. ObserveSnapshot is then
	// ignored. Nil: the clock keeps its own, fed by ObserveSnapshot.
	Arrivals *timing.Arrivals
}

func (c SyncConfig) resolve() (SyncConfig, error) {
	if c.TickInterval < 0 || c.Safety < 0 || c.JitterMargin < 0 || c.MaxScale < 0 || c.MaxScale >= 1 ||
		c.Convergence < 0 || c.ResyncTicks < 0 || c.InitialRTT < 0 || c.MaxCatchUp < 0 ||
		math.IsNaN(c.Safety) || math.IsNaN(c.JitterMargin) || math.IsNaN(c.MaxScale) || math.IsNaN(c.ResyncTicks) {
		return c, fmt.Errorf("%w: SyncConfig %+v", ErrInvalidConfig, c)
	}
	if c.TickInterval == 0 {
		c.TickInterval = time.Second / 60
	}
	if c.Safety == 0 {
		c.Safety = 2
	}
	if c.JitterMargin == 0 {
		c.JitterMargin = 2
	}
	if c.MaxScale == 0 {
		c.MaxScale = 0.05
	}
	if c.Convergence == 0 {
		c.Convergence = time.Second
	}
	if c.ResyncTicks == 0 {
		c.ResyncTicks = 10
	}
	if c.InitialRTT == 0 {
		c.InitialRTT = 100 * time.Millisecond
	}
	if c.MaxCatchUp == 0 {
		c.MaxCatchUp = 8
	}
	return c, nil
}

// Estimator gains (the server's tick schedule is timing.Arrivals', shared
// with the render clock).
const (
	rttGain       = 1.0 / 8
	upGainSlower  = 1.0 / 64 // upstream delay estimate, moving down
	upGainFaster  = 1.0 / 8  // and moving up: late input hurts more than early
	feedbackClamp = 64.0     // bound on one upstream-delay sample, in ticks
)

// TickSync is the client's input clock. It estimates the server's current
// tick from snapshot arrivals (server tick + local arrival time; with the
// timing.Arrivals estimator the render clock interp.Clock uses too) and the
// round-trip time, and runs the client's input ticks a small adaptive lead
// ahead of it, so that each input reaches the server just before the server
// consumes that tick:
//
//	lead = upstream delay + JitterMargin × jitter + Safety   (ticks)
//
// The upstream delay starts as RTT/2 and is then measured from the input
// buffer depth in the server's feedback (replication.InputReport.Depth):
// an input for tick T was stamped when the client ran lead ticks ahead,
// and the server held it depth ticks before consuming T, so the upstream
// delay was lead − depth. The client tick rate is scaled within
// 1±MaxScale to follow the target lead smoothly; only an error above
// ResyncTicks (start, a server restart, a long stall) makes it jump, and it
// never emits a tick twice. Time comes only from the arguments.
// Not safe for concurrent use.
type TickSync struct {
	cfg SyncConfig
	t   float64 // tick interval, seconds
	arr *timing.Arrivals
	own timing.Arrivals

	rtt   float64 // seconds
	up    float64 // ticks: upstream delay estimate
	hasUp bool

	started bool
	p       float64 // client tick position (extended ticks)
	emitted int64   // last tick returned by Advance
	lastNow time.Time
	scale   float64
	resyncs int
}

// NewTickSync returns a tick clock; it fails with [ErrInvalidConfig].
func NewTickSync(cfg SyncConfig) (*TickSync, error) {
	cfg, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	s := &TickSync{cfg: cfg, t: cfg.TickInterval.Seconds(), rtt: cfg.InitialRTT.Seconds(), scale: 1}
	s.arr = cfg.Arrivals
	if s.arr == nil {
		threshold := time.Duration(cfg.ResyncTicks * float64(cfg.TickInterval))
		s.own = timing.NewArrivals(cfg.TickInterval, threshold, cfg.TickInterval/4)
		s.arr = &s.own
	}
	return s, nil
}

// Config returns the configuration with defaults filled in.
func (s *TickSync) Config() SyncConfig { return s.cfg }

// ObserveSnapshot records that the snapshot of server tick arrived at local
// time arrival. Call it for every snapshot, in arrival order (late and
// reordered ones included). Ignored with SyncConfig.Arrivals (its owner
// feeds it). O(1), allocation-free.
func (s *TickSync) ObserveSnapshot(tick uint32, arrival time.Time) {
	if s.arr == &s.own {
		s.own.Observe(tick, arrival)
	}
}

// ticks is the length of the estimator's ticks in this clock's ticks.
func (s *TickSync) ticks() float64 {
	if s.arr == &s.own {
		return 1
	}
	return s.arr.Interval().Seconds() / s.t
}

// ObserveRTT records a round-trip time measurement (e.g. the transport's
// smoothed RTT). Non-positive values are ignored.
func (s *TickSync) ObserveRTT(rtt time.Duration) {
	if rtt <= 0 {
		return
	}
	s.rtt += (rtt.Seconds() - s.rtt) * rttGain
}

// ObserveFeedback records the input buffer depth the server's feedback
// reports for this client (replication.InputReport.Depth; call it only
// when the feedback has an ack, i.e. the server has input).
// It refines the upstream-delay estimate that the target lead is built on.
func (s *TickSync) ObserveFeedback(depth int) {
	if !s.started {
		return
	}
	u := min(max(s.Lead()-float64(depth), -feedbackClamp), feedbackClamp)
	if !s.hasUp {
		s.up, s.hasUp = u, true
		return
	}
	g := upGainSlower
	if u > s.up {
		g = upGainFaster
	}
	s.up += (u - s.up) * g
}

// ServerTick returns the estimated server tick at local time now (the tick
// the server is simulating at now), as a fractional extended tick; 0 before
// the first snapshot.
func (s *TickSync) ServerTick(now time.Time) float64 {
	if !s.arr.Observed() {
		return 0
	}
	return s.arr.ServerTick(now)*s.ticks() + s.rtt/2/s.t
}

// TargetLead returns the lead, in ticks, the clock steers toward.
func (s *TickSync) TargetLead() float64 {
	up := s.rtt / 2 / s.t
	if s.hasUp {
		up = s.up
	}
	return max(up, 0) + s.cfg.JitterMargin*s.arr.JitterTicks()*s.ticks() + s.cfg.Safety
}

// Lead returns the client's current lead over the estimated server tick, in
// ticks, as of the last [TickSync.Advance].
func (s *TickSync) Lead() float64 {
	if !s.started {
		return 0
	}
	return s.p - s.ServerTick(s.lastNow)
}

// Jitter returns the measured snapshot arrival jitter (mean absolute
// deviation).
func (s *TickSync) Jitter() time.Duration { return s.arr.Jitter() }

// RTT returns the smoothed round-trip time.
func (s *TickSync) RTT() time.Duration { return time.Duration(s.rtt * float64(time.Second)) }

// Scale returns the current tick-rate scale (1 = real time).
func (s *TickSync) Scale() float64 { return s.scale }

// Resyncs returns how many times the clock jumped.
func (s *TickSync) Resyncs() int { return s.resyncs }

// Ready reports whether a snapshot has been observed, so Advance can run.
func (s *TickSync) Ready() bool { return s.arr.Observed() }

// Advance moves the client clock to local time now and returns the input
// ticks to sample and simulate now: first, first+1, …, first+n−1 (n may be
// 0; at most MaxCatchUp). Before the first snapshot it returns n = 0. Ticks
// are never returned twice: after a backward resync the clock waits.
// O(1), allocation-free.
func (s *TickSync) Advance(now time.Time) (first uint32, n int) {
	if !s.arr.Observed() {
		return 0, 0
	}
	target := s.ServerTick(now) + s.TargetLead()
	switch {
	case !s.started:
		s.started = true
		s.p = target
		s.emitted = int64(math.Floor(s.p)) - 1
	default:
		elapsed := now.Sub(s.lastNow).Seconds() / s.t
		if elapsed < 0 {
			elapsed = 0
		}
		// Steer by the error expected at the end of this step.
		err := target - (s.p + elapsed)
		if math.Abs(err) > s.cfg.ResyncTicks {
			s.p = target
			s.scale = 1
			s.resyncs++
			break
		}
		s.scale = 1 + min(max(err*s.t/s.cfg.Convergence.Seconds(), -s.cfg.MaxScale), s.cfg.MaxScale)
		s.p += elapsed * s.scale
	}
	s.lastNow = now
	k := int64(math.Floor(s.p))
	if k <= s.emitted {
		return uint32(s.emitted + 1), 0
	}
	if k-s.emitted > int64(s.cfg.MaxCatchUp) {
		s.emitted = k - int64(s.cfg.MaxCatchUp)
	}
	first = uint32(s.emitted + 1)
	n = int(k - s.emitted)
	s.emitted = k
	return first, n
}
