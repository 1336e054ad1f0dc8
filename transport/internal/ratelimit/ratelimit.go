// Package ratelimit is the token bucket behind the transports' datagram flood limit
// (transport/quic and transport/webtransport close a peer that sends faster).
package ratelimit

import "time"

// TokenBucket limits the rate of events: it holds up to burst tokens, refills rate per
// second, and each event takes one. Not safe for concurrent use (each connection's
// datagram reader owns one).
type TokenBucket struct {
	rate, burst float64 // rate <= 0: unlimited
	tokens      float64
	last        time.Time
}

// New returns a full bucket of burst tokens refilled at rate per second, as of now.
// A rate <= 0 allows every event.
func New(rate, burst int, now time.Time) TokenBucket {
	return TokenBucket{rate: float64(rate), burst: float64(burst), tokens: float64(burst), last: now}
}

// Allow takes a token at time now and reports whether one was available.
func (b *TokenBucket) Allow(now time.Time) bool {
	if b.rate <= 0 {
		return true
	}
	if dt := now.Sub(b.last); dt > 0 {
		b.tokens = min(b.burst, b.tokens+dt.Seconds()*b.rate)
		b.last = now
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// Tokens returns the tokens the bucket would hold at time now (at least now's
// refill; the bucket is not changed).
func (b *TokenBucket) Tokens(now time.Time) float64 {
	if b.rate <= 0 {
		return b.burst
	}
	t := b.tokens
	if dt := now.Sub(b.last); dt > 0 {
		t = min(b.burst, t+dt.Seconds()*b.rate)
	}
	return t
}

// Full reports whether the bucket would be full at time now.
func (b *TokenBucket) Full(now time.Time) bool { return b.Tokens(now) >= b.burst }
