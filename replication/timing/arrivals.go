package timing

import (
	"math"
	"math/bits"
	"time"
)

// Estimator constants. They are fixed because the callers' delay and lead
// formulas and their tests are derived from them.
const (
	// offsetGain is the EWMA gain of the arrival-offset estimate after
	// warm-up (the first samples are averaged exactly, gain 1/n). 1/16 keeps
	// the offset noise at σ·√(g/(2−g)) ≈ 0.18σ of the per-packet jitter σ.
	offsetGain = 1.0 / 16
	// jitterGain is the EWMA gain of the mean absolute deviation of arrival
	// offsets, as in RFC 3550's interarrival jitter.
	jitterGain = 1.0 / 16
	// OutlierRun is how many consecutive arrivals more than the outlier
	// threshold off the estimate restart the estimator; fewer are ignored as
	// one-off late packets.
	OutlierRun = 3
	// LossWindow is the number of recent ticks loss is measured over.
	LossWindow = 64
)

// Arrivals estimates the server's tick schedule from snapshot arrivals.
//
// A snapshot of tick k arrives at local time a = base + k·T + latency +
// jitter. Arrivals keeps an EWMA of the offset a − k·T (the mean arrival
// schedule) and the EWMA of its absolute deviations (the jitter); each
// deviation is clipped to 4·jitter + T/4 first (a Huber-style M-estimator),
// so one very late packet moves neither much while a real change in latency
// or jitter still gets through. [Arrivals.ServerTick] is the tick whose
// snapshot arrives at a given time on average: the server's tick minus the
// mean one-way latency.
//
// Ticks are uint32 with serial-number wrap-around, extended to 64 bits
// internally. OutlierRun consecutive arrivals more than the outlier
// threshold off the schedule (server restart, tick renumbering, a stall)
// restart the estimator; the jitter estimate is kept.
type Arrivals struct {
	t         float64 // tick interval, seconds
	threshold float64 // outlier threshold, seconds

	observed bool
	baseTime time.Time // arrival of the sample that (re)started the estimator
	baseExt  int64     // its extended tick
	lastTick uint32    // newest tick received, as sent
	lastExt  int64     // newest tick received, extended
	firstExt int64     // first tick since the last restart, for the loss window
	recv     uint64    // bit i: tick lastExt−i received
	samples  int
	outliers int
	restarts int
	offset   float64 // seconds: EWMA of arrival − base − (ext − baseExt)·T
	jitter   float64 // seconds: EWMA of |arrival offset − offset|
}

// NewArrivals returns an estimator for ticks of the given interval (> 0).
// Arrivals more than threshold off the schedule are outliers; jitter is the
// jitter assumed before any is measured.
func NewArrivals(interval, threshold, jitter time.Duration) Arrivals {
	return Arrivals{t: interval.Seconds(), threshold: threshold.Seconds(), jitter: jitter.Seconds()}
}

// Interval returns the tick interval.
func (a *Arrivals) Interval() time.Duration { return seconds(a.t) }

func (a *Arrivals) restart(tick uint32, arrival time.Time) {
	ext := int64(tick)
	if a.observed {
		a.restarts++
		ext = a.lastExt + int64(int32(tick-a.lastTick)) // keep one extended numbering
	}
	a.observed = true
	a.baseTime, a.baseExt = arrival, ext
	a.lastTick, a.lastExt, a.firstExt = tick, ext, ext
	a.recv = 1
	a.samples = 1
	a.outliers = 0
	a.offset = 0
}

// Observe records that the snapshot of tick arrived at local time arrival.
// Call it for every snapshot received, in arrival order, including late,
// reordered and duplicate ones (a duplicate counts as a jitter sample but not
// twice as received). O(1), no allocation.
func (a *Arrivals) Observe(tick uint32, arrival time.Time) {
	if !a.observed {
		a.restart(tick, arrival)
		return
	}
	ext := a.lastExt + int64(int32(tick-a.lastTick))
	s := arrival.Sub(a.baseTime).Seconds() - float64(ext-a.baseExt)*a.t
	dev := s - a.offset
	if math.Abs(dev) > a.threshold {
		a.outliers++
		if a.outliers >= OutlierRun {
			a.restart(tick, arrival)
		}
		return
	}
	a.outliers = 0
	a.samples++
	clip := 4*a.jitter + a.t/4
	dev = min(max(dev, -clip), clip)
	a.offset += dev * max(offsetGain, 1/float64(a.samples))
	a.jitter += (math.Abs(dev) - a.jitter) * jitterGain
	switch d := ext - a.lastExt; {
	case d > 0:
		if d >= 64 {
			a.recv = 1
		} else {
			a.recv = a.recv<<d | 1
		}
		a.lastExt, a.lastTick = ext, tick
	case -d < 64:
		a.recv |= 1 << -d
	}
}

// Observed reports whether a snapshot has been observed.
func (a *Arrivals) Observed() bool { return a.observed }

// ServerTick returns the tick whose snapshot arrives at local time now on
// average, as a fractional extended tick; 0 before the first snapshot.
func (a *Arrivals) ServerTick(now time.Time) float64 {
	if !a.observed {
		return 0
	}
	return float64(a.baseExt) + (now.Sub(a.baseTime).Seconds()-a.offset)/a.t
}

// Jitter returns the running mean absolute deviation of arrivals from the
// estimated schedule.
func (a *Arrivals) Jitter() time.Duration { return seconds(a.jitter) }

// JitterTicks returns the jitter in ticks.
func (a *Arrivals) JitterTicks() float64 { return a.jitter / a.t }

// Loss returns the fraction of ticks missing among the last LossWindow up to
// the newest received. A reordered snapshot counts as lost until it arrives.
func (a *Arrivals) Loss() float64 {
	if !a.observed {
		return 0
	}
	w := min(a.lastExt-a.firstExt+1, LossWindow)
	mask := ^uint64(0)
	if w < 64 {
		mask = 1<<w - 1
	}
	return 1 - float64(bits.OnesCount64(a.recv&mask))/float64(w)
}

// Restarts returns how often the estimator restarted on a run of outliers.
func (a *Arrivals) Restarts() int { return a.restarts }

func seconds(s float64) time.Duration { return time.Duration(math.Round(s * float64(time.Second))) }
