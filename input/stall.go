package input

import "time"

// stallWatch tells a [Player] whether its inputs are cut off from the
// server, so that it predicts and sends the outage input, as the server
// applies it ([Config].Hold, inputlog.Outage), instead of the player's: then
// an outage moves the predicted entity where the server moves it, and the
// link's return brings no jump. It is a pure state machine: snapshots and
// the time go in, the verdict comes out.
//
// The inputs are cut off when
//   - the newest snapshot says the server applies the outage input (its
//     simulation tick is more than Hold ticks after the newest input tick
//     it applied: the uplink is down, or the server stopped hearing us),
//     or
//   - no fresh snapshot came for Hold ticks less half the round trip (at
//     least three net ticks): the link is down both ways, and the server
//     switches to the outage input at about the input tick the client
//     reaches then.
//
// The verdict ends with a fresh snapshot whose applied input tick is
// within Hold of its tick: the server hears the client again (the outage
// inputs it sent meanwhile are what the server applied, so nothing jumps).
type stallWatch struct {
	hold    int           // Config.Hold, ticks; negative: never stall
	tick    time.Duration // the simulation tick
	net     time.Duration // the net tick (snapshot interval)
	freshAt time.Time     // the newest fresh snapshot's arrival
	cut     bool          // the newest snapshot shows the server applying the outage input
	stalled bool
}

// snapshot notes a fresh snapshot at now: its simulation tick and the
// newest input tick the server had applied then (ok false: none yet).
func (w *stallWatch) snapshot(now time.Time, simTick, applied uint32, ok bool) {
	w.freshAt = now
	w.cut = ok && w.hold >= 0 && int32(simTick-applied) > int32(w.hold)
}

// quiet is how long without a fresh snapshot means the link is down.
func (w *stallWatch) quiet(rtt time.Duration) time.Duration {
	return max(time.Duration(w.hold)*w.tick-rtt/2, 3*w.net)
}

// check returns whether the inputs are cut off at now, with the newest
// round-trip estimate rtt.
func (w *stallWatch) check(now time.Time, rtt time.Duration) bool {
	switch {
	case w.hold < 0 || w.freshAt.IsZero():
		w.stalled = false
	case w.cut || now.Sub(w.freshAt) > w.quiet(rtt):
		w.stalled = true
	default:
		w.stalled = false
	}
	return w.stalled
}
