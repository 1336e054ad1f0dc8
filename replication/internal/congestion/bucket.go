package congestion

// Bucket is a token bucket of bytes: a rate refilled over time up to a
// burst. The zero value does not limit (rate 0).
type Bucket struct {
	rate, burst, tokens float64
}

// Set limits to bytesPerSecond with bursts up to burst bytes; 0 removes
// the limit.
func (b *Bucket) Set(bytesPerSecond, burst int) {
	b.rate, b.burst = float64(bytesPerSecond), float64(max(burst, 0))
	if b.tokens > b.burst {
		b.tokens = b.burst
	}
}

// Rate returns the rate in bytes per second (0 = unlimited).
func (b *Bucket) Rate() int { return int(b.rate) }

// Limited reports whether the bucket limits at all.
func (b *Bucket) Limited() bool { return b.rate > 0 }

// Refill adds seconds × rate bytes, up to the burst.
func (b *Bucket) Refill(seconds float64) {
	if b.rate > 0 {
		b.tokens = min(b.burst, b.tokens+b.rate*seconds)
	}
}

// Allowance returns the bytes that may go now, at most limit (limit when
// unlimited; it may be negative after an overspend).
func (b *Bucket) Allowance(limit int) int {
	if b.rate <= 0 {
		return limit
	}
	return min(limit, int(b.tokens))
}

// Spend takes n bytes.
func (b *Bucket) Spend(n int) {
	if b.rate > 0 {
		b.tokens -= float64(n)
	}
}
