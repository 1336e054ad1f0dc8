package congestion

import "time"

// RTT follows one client's round-trip time from snapshot acks: a
// smoothed RTT (gain 1/8), its mean deviation (gain 1/4), and a floor: the
// lowest smoothed RTT of the last 30 s. The floor is a minimum of the
// smoothed series, not of single samples, so a jittery path's lucky fast
// samples do not pull it below what the path delivers on average, and
// jitter alone never reads as queueing. For the same reason the first
// warmup samples are averaged exactly (gain 1/n) and only then enter the
// floor: a smoothed series that starts at one lucky sample held the floor
// tens of milliseconds below the path's average for 30 s, and the budget
// took the difference for a standing queue and backed off again and again.
type RTT struct {
	srtt, rttvar time.Duration
	latest       time.Duration
	n            int
	floor        windowMin
}

// SRTT returns the smoothed RTT (0 before the first sample).
func (r *RTT) SRTT() time.Duration { return r.srtt }

// rttWarmup is the number of samples averaged exactly before the smoothed
// RTT enters the floor (and queueing is judged).
const rttWarmup = 8

// Sample takes one round-trip time d measured at now (negative: ignored).
func (r *RTT) Sample(d time.Duration, now time.Time) {
	if d < 0 {
		return
	}
	r.latest = d
	r.n++
	dev := d - r.srtt
	if dev < 0 {
		dev = -dev
	}
	switch {
	case r.n == 1:
		r.srtt, r.rttvar = d, d/2
	case r.n <= rttWarmup:
		r.rttvar += (dev - r.rttvar) / time.Duration(r.n)
		r.srtt += (d - r.srtt) / time.Duration(r.n)
	default:
		r.rttvar += (dev - r.rttvar) / 4
		r.srtt += (d - r.srtt) / 8
	}
	if r.n >= rttWarmup {
		r.floor.add(r.srtt, now)
	}
}

// queueDelay is how far the smoothed RTT is above its floor.
func (r *RTT) queueDelay(now time.Time) time.Duration {
	return r.srtt - r.floor.min(now, r.srtt)
}

// queueThreshold is how much delay above the floor jitter explains: three
// mean deviations, at least 50 ms and at most 200 ms (a path that jitters
// more is treated as queueing; while a queue builds, the deviation from a
// lagging average grows too, and must not hide the queue).
func (r *RTT) queueThreshold() time.Duration {
	return min(max(50*time.Millisecond, 3*r.rttvar), 200*time.Millisecond)
}

// queueing reports whether the path's delay grew by a standing queue: the
// smoothed RTT above its floor by more than jitter explains.
func (r *RTT) queueing(now time.Time) bool {
	return r.n > rttWarmup && r.queueDelay(now) > r.queueThreshold()
}

// rising reports whether the newest sample already shows a queue (the early
// exit of slow start, before the smoothed RTT follows).
func (r *RTT) rising(now time.Time) bool {
	return r.n > 2 && r.latest-r.floor.min(now, r.srtt) > r.queueThreshold()
}

// windowMin is the minimum of a series over the last 30 s, kept as the
// minima of three 10 s buckets.
type windowMin struct {
	b [3]struct {
		start time.Time
		min   time.Duration
		set   bool
	}
}

const windowBucket = 10 * time.Second

func (w *windowMin) add(v time.Duration, now time.Time) {
	start := now.Truncate(windowBucket)
	b := &w.b[(now.UnixNano()/int64(windowBucket))%3]
	if !b.set || !b.start.Equal(start) {
		b.start, b.min, b.set = start, v, true
		return
	}
	b.min = min(b.min, v)
}

// min returns the minimum over the window, or def if the window is empty.
func (w *windowMin) min(now time.Time, def time.Duration) time.Duration {
	m, ok := time.Duration(0), false
	for i := range w.b {
		b := &w.b[i]
		if b.set && now.Sub(b.start) < 3*windowBucket && (!ok || b.min < m) {
			m, ok = b.min, true
		}
	}
	if !ok {
		return def
	}
	return m
}
