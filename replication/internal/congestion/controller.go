package congestion

import (
	"math"
	"math/bits"
	"time"
)

// Controller decides one client's snapshot byte rate (the budget the
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
// once instead of waiting for the controller; its token bucket (burst an
// eighth of a second, at least two datagrams) spends only what the scene
// needs: Refill each tick, Allowance for the tick's datagrams, Spend what
// they took.
type Controller struct {
	bucket         Bucket
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

// NewController returns the rate control of a new client: rates between
// minRate and maxRate bytes per second, datagrams of at most mtu bytes.
func NewController(minRate, maxRate float64, mtu int) Controller {
	b := Controller{rate: math.Max(minRate, maxRate/8), min: minRate, max: maxRate, slowStart: true}
	b.setBucket(mtu)
	return b
}

// Rate returns the byte rate the controller allows (bytes per second).
func (b *Controller) Rate() float64 { return b.rate }

// Loss returns the recent fraction of datagrams never acked (a fast
// average) and the link's standing loss (a slow one, at most 10%).
func (b *Controller) Loss() (recent, standing float64) { return b.loss, b.lossBase }

// Delivered returns the bytes the client acked, in total.
func (b *Controller) Delivered() float64 { return b.delivered }

// Outage returns when the last outage ended (the zero time if none):
// datagrams sent before it measure the outage, not the path.
func (b *Controller) Outage() time.Time { return b.ignoreBefore }

// Update adjusts the rate once per control interval, from the RTT's view
// of the path, and the token bucket with it (mtu: the client's datagram
// size); it returns true if the rate changed.
func (b *Controller) Update(now time.Time, rtt *RTT, mtu int) bool {
	if !b.update(now, rtt) {
		return false
	}
	b.setBucket(mtu)
	return true
}

// setBucket sets the token bucket to the rate, with a burst of an eighth
// of a second, at least two datagrams.
func (b *Controller) setBucket(mtu int) {
	b.bucket.Set(int(b.rate), max(mtu*2, int(b.rate)/8))
}

// Refill adds seconds of the rate to the token bucket (once per net tick).
func (b *Controller) Refill(seconds float64) { b.bucket.Refill(seconds) }

// Allowance returns the bytes the client may be sent now, at most limit,
// and whether the bucket limits it at all (a zero rate does not).
func (b *Controller) Allowance(limit int) (int, bool) {
	return b.bucket.Allowance(limit), b.bucket.Limited()
}

// Spend takes n bytes sent from the token bucket.
func (b *Controller) Spend(n int) { b.bucket.Spend(n) }

// OnAck notes that an ack arrived at now.
func (b *Controller) OnAck(now time.Time) {
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

// OnDelivered counts bytes the client acked.
func (b *Controller) OnDelivered(bytes float64) { b.delivered += bytes }

// Account judges the n datagrams of a tick sent at sentAt, old enough to
// have been acked: of them, those the client did not ack (all but got)
// were lost.
func (b *Controller) Account(n, got int, sentAt time.Time) {
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

// HeldParts counts the parts of an n-part tick that held says arrived.
func HeldParts(held uint64, n int) int {
	if n >= 64 {
		return bits.OnesCount64(held)
	}
	return bits.OnesCount64(held & (1<<n - 1))
}

// update adjusts the rate once per control interval; it returns true if the
// rate changed.
func (b *Controller) update(now time.Time, rtt *RTT) bool {
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
