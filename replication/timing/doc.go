// Package timing estimates a server's tick schedule on a client from the
// snapshots it receives: [Arrivals] turns (server tick, local arrival time)
// pairs into the tick whose snapshot arrives at a given local time on
// average, the arrival jitter and the recent loss.
//
// It is the one server-time estimator of a client: the render clock of
// package interp (interp.Clock) and the input clock of package input
// (input.TickSync) are both built on it, with the same gains, outlier rule
// and tick extension, so fed the same snapshots they agree — the input clock
// adds half the round trip to reach the server's current tick, the render
// clock subtracts its interpolation delay.
//
// An Arrivals uses only the times passed to it and allocates nothing; it is
// not safe for concurrent use.
package timing
