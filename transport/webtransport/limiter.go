//go:build !js

package webtransport

import "time"

// tokenBucket limits the rate of events: it holds up to burst tokens, refills rate per
// second, and each event takes one. Not safe for concurrent use. (The same bucket as
// transport/quic's flood limit.)
type tokenBucket struct {
	rate, burst float64 // rate <= 0: unlimited
	tokens      float64
	last        time.Time
}

func newTokenBucket(rate, burst int, now time.Time) tokenBucket {
	return tokenBucket{rate: float64(rate), burst: float64(burst), tokens: float64(burst), last: now}
}

// allow takes a token at time now and reports whether one was available.
func (b *tokenBucket) allow(now time.Time) bool {
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
