// Package congestion is a client's rate control on the server: an [RTT]
// estimator fed by snapshot acks (smoothed RTT, deviation, and the floor
// queueing is measured against) and a [Controller] that sets the client's
// snapshot byte rate from loss, queueing delay and silent acks (slow start,
// back-off, outage handling, probing), with the token bucket that turns
// the rate into each tick's byte allowance.
//
// It is pure: samples and times go in, a rate and an allowance come out;
// no clock is read and nothing is sent.
package congestion
