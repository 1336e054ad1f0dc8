package replication

import (
	"math"
	"math/bits"
	"time"
)

// rttEstimator follows one client's round-trip time from snapshot acks: a
// smoothed RTT (gain 1/8), its mean deviation (gain 1/4), and a floor: the
// lowest smoothed RTT of the last 30 s. The floor is a minimum of the
// smoothed series, not of single samples, so a jittery path's lucky fast
// samples do not pull it below what the path delivers on average, and
// jitter alone never reads as queueing. For the same reason the first
// warmup samples are averaged exactly (gain 1/n) and only then enter the
// floor: a smoothed series that starts at one lucky sample held the floor
// tens of milliseconds below the path's average for 30 s, and the budget
// took the difference for a standing queue and backed off again and again.
type rttEstimator struct {
	srtt, rttvar time.Duration
	latest       time.Duration
	n            int
	floor        windowMin
}

// rttWarmup is the number of samples averaged exactly before the smoothed
// RTT enters the floor (and queueing is judged).
const rttWarmup = 8

func (r *rttEstimator) sample(d time.Duration, now time.Time) {
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
func (r *rttEstimator) queueDelay(now time.Time) time.Duration {
	return r.srtt - r.floor.min(now, r.srtt)
}

// queueThreshold is how much delay above the floor jitter explains: three
// mean deviations, at least 50 ms and at most 200 ms (a path that jitters
// more is treated as queueing; while a queue builds, the deviation from a
// lagging average grows too, and must not hide the queue).
func (r *rttEstimator) queueThreshold() time.Duration {
	return min(max(50*time.Millisecond, 3*r.rttvar), 200*time.Millisecond)
}

// queueing reports whether the path's delay grew by a standing queue: the
// smoothed RTT above its floor by more than jitter explains.
func (r *rttEstimator) queueing(now time.Time) bool {
	return r.n > rttWarmup && r.queueDelay(now) > r.queueThreshold()
}

// rising reports whether the newest sample already shows a queue (the early
// exit of slow start, before the smoothed RTT follows).
func (r *rttEstimator) rising(now time.Time) bool {
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

// budgetController decides one client's snapshot byte rate (the budget the
// encoder may spend, in as many datagrams a tick as it needs):
//
//   - a new client starts at an eighth of the maximum and doubles every
//     control interval (the smoothed RTT, 100–500 ms) while the link is
//     clean: slow start, so a busy scene's rate is reached within about half
//     a second; the first sign of a queue or of loss ends it;
//   - loss above the link's standing loss (random loss up to 10% is taken as
//     the link's nature, not congestion), or a standing queue (the smoothed
//     RTT above its floor by more than jitter explains), cuts the rate by a
//     quarter; severe congestion (a quarter-second queue, or most datagrams
//     lost) cuts it to half the rate the client's acks show its link
//     delivers, so that the queue drains.
//     Afterwards it grows by 10% (at least 4 KiB/s) per second of clean link,
//     and after 2 s of clean link it probes by a quarter per interval until
//     a queue or loss shows again;
//   - when acks stop altogether for a quarter second (at least two smoothed
//     RTTs: an outage), the rate drops to the floor, so that little queues up
//     behind the dead path, and the rate it had is remembered: when acks come
//     back it restarts at a quarter of it and doubles every interval back to
//     it, and the datagrams sent
//     into the outage are counted neither as loss nor for the RTT.
//
// The rate grows while the link is clean even when the scene does not use
// it, so that a burst (an explosion throwing a hundred bodies) goes out at
// once instead of waiting for the controller; the token bucket in the
// snapshot encoder (burst an eighth of a second) spends only what the scene
// needs.
type budgetController struct {
	rate, min, max float64
	slowStart      bool
	probing        bool      // growing by a quarter per interval after a calm spell
	target         float64   // rate to regain by doubling after an outage (0: none)
	rateAtAck      float64   // the rate when the newest ack arrived
	loss           float64   // fast EWMA of the fraction of datagrams never acked
	lossBase       float64   // slow EWMA, at most maxStandingLoss: the link's random loss
	lossWindow     float64   // the newest complete window's loss fraction
	sent, lost     int       // current loss window
	lossJudged     bool      // the newest loss window already caused a back-off
	delivered      float64   // bytes the client acked, in total
	deliveredMark  float64   // delivered at the last update
	delivery       float64   // smoothed bytes per second the client acked (0: unknown)
	calmSince      time.Time // the last back-off or end of slow start
	lastChange     time.Time
	lastAck        time.Time
	started        time.Time
	silentSince    time.Time // zero while acks flow
	ignoreBefore   time.Time // datagrams sent before are outage, not loss
}

// outageAfter is how long without any ack (at least two smoothed RTTs)
// makes the controller treat the path as down.
const outageAfter = 250 * time.Millisecond

// probeAfter is how long the link must stay clean after a back-off before
// the budget doubles again.
const probeAfter = 2 * time.Second

// maxStandingLoss bounds the loss a link may have without it counting as
// congestion.
const maxStandingLoss = 0.1

func newBudgetController(minRate, maxRate float64) budgetController {
	return budgetController{rate: math.Max(minRate, maxRate/8), min: minRate, max: maxRate, slowStart: true}
}

// onAck notes that an ack arrived at now.
func (b *budgetController) onAck(now time.Time) {
	b.lastAck = now
	b.rateAtAck = b.rate
	if !b.silentSince.IsZero() {
		// Back from an outage: what was sent during it says nothing about
		// loss on the path.
		b.silentSince = time.Time{}
		b.ignoreBefore = now
		b.sent, b.lost = 0, 0
		b.loss, b.lossWindow = b.lossBase, b.lossBase
		// The path carried the old rate a moment ago: start a quarter of the
		// way back and double from there.
		b.rate = math.Max(b.rate, b.target/4)
	}
}

// onDelivered counts bytes the client acked.
func (b *budgetController) onDelivered(bytes float64) { b.delivered += bytes }

// account judges the n datagrams of a tick sent at sentAt, old enough to
// have been acked: of them, those the client did not ack (all but got)
// were lost.
func (b *budgetController) account(n, got int, sentAt time.Time) {
	if sentAt.Before(b.ignoreBefore) {
		return
	}
	b.sent += n
	b.lost += n - got
	if b.sent >= 32 {
		f := float64(b.lost) / float64(b.sent)
		b.lossWindow = f
		b.loss += (f - b.loss) / 2
		b.lossBase = math.Min(maxStandingLoss, b.lossBase+(f-b.lossBase)/4)
		b.lossJudged = false
		b.sent, b.lost = 0, 0
	}
}

// heldParts counts the parts of an n-part tick that held says arrived.
func heldParts(held uint64, n int) int {
	if n >= 64 {
		return bits.OnesCount64(held)
	}
	return bits.OnesCount64(held & (1<<n - 1))
}

// update adjusts the rate once per control interval; it returns true if the
// rate changed.
func (b *budgetController) update(now time.Time, rtt *rttEstimator) bool {
	interval := min(max(rtt.srtt, 100*time.Millisecond), 500*time.Millisecond)
	if !b.lastChange.IsZero() && now.Sub(b.lastChange) < interval {
		return false
	}
	elapsed := interval.Seconds()
	if !b.lastChange.IsZero() {
		elapsed = now.Sub(b.lastChange).Seconds()
	}
	b.lastChange = now
	if b.started.IsZero() {
		b.started = now
	}
	if d := (b.delivered - b.deliveredMark) / elapsed; b.delivery == 0 {
		b.delivery = d
	} else {
		b.delivery += (d - b.delivery) / 2
	}
	b.deliveredMark = b.delivered
	old := b.rate
	last := b.lastAck
	if last.IsZero() {
		last = b.started
	}
	if now.Sub(last) > max(outageAfter, 2*rtt.srtt) {
		// No ack at all for a while: an outage (or a client that stopped
		// acking). Send as little as possible into it — what is sent now
		// queues up and only delays the fresh state when the path is back —
		// and remember what to come back to.
		if b.silentSince.IsZero() {
			b.silentSince = now
			b.target = math.Max(b.target, b.rateAtAck)
		}
		b.rate = b.min
		return b.rate != old
	}
	// Standing random loss (a lossy radio link) is not congestion: back off
	// at most once per loss window when loss rises above its long-run level.
	lossy := b.loss > b.lossBase+0.15 && !b.lossJudged
	if lossy {
		b.lossJudged = true
	}
	switch {
	case b.rate < b.target && !lossy:
		// Regaining the rate the client had before an outage.
		b.rate = math.Min(b.target, b.rate*2)
		if b.rate >= b.target {
			b.target = 0
		}
	case lossy || rtt.queueing(now):
		b.rate = math.Max(b.min, b.rate*0.75)
		if rtt.queueDelay(now) > 250*time.Millisecond || b.lossWindow > 0.5 {
			// Far over what the link carries: down to half of what it
			// delivers, so that the queue drains.
			b.rate = math.Max(b.min, math.Min(b.rate, b.delivery/2))
		}
		b.slowStart, b.probing, b.target = false, false, 0
		b.calmSince = now
	case (b.slowStart || b.probing) && (rtt.rising(now) || b.lossWindow > b.lossBase+0.1):
		// The first sign of a queue or of loss: stop growing fast.
		b.slowStart, b.probing = false, false
		b.calmSince = now
	case b.slowStart:
		if rtt.n > 0 { // the path answered at the rate so far
			b.rate = math.Min(b.max, b.rate*2)
		}
	case b.probing || (b.rate < b.max && b.target == 0 && now.Sub(b.calmSince) >= probeAfter):
		// Clean for a while: probe for more, by a quarter per interval (the
		// capacity may have grown, or the congestion was someone else's).
		b.probing = true
		b.rate = math.Min(b.max, b.rate*1.25)
	default:
		// 10% (at least 4 KiB/s) per second of clean link.
		b.rate = math.Min(b.max, b.rate+math.Max(4096, b.rate*0.1)*math.Min(elapsed, 1))
	}
	return b.rate != old
}
