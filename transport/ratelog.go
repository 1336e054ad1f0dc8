package transport

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// RateLimit returns a slog.Handler that passes records to h at most burst times in a
// row per distinct message, then at most once per every: the rest are dropped and
// counted, and the next record of that message that passes carries the count as the
// attribute "suppressed". Transports and servers log every close path through one, so
// a flood of hostile connections leaves a trace without flooding the log.
//
// Messages are expected to be constant strings (details go in attributes); at most 256
// distinct messages are tracked at a time. Safe for concurrent use; handlers derived
// with WithAttrs or WithGroup share the limits.
func RateLimit(h slog.Handler, burst int, every time.Duration) slog.Handler {
	return &rateLimited{h: h, lim: &logLimits{burst: float64(max(burst, 1)), every: every, buckets: map[string]*logBucket{}}}
}

type rateLimited struct {
	h   slog.Handler
	lim *logLimits
}

type logLimits struct {
	mu      sync.Mutex
	burst   float64
	every   time.Duration
	buckets map[string]*logBucket
}

type logBucket struct {
	tokens     float64
	last       time.Time
	suppressed int
}

// admit reports whether a record with msg at t may pass and how many were suppressed
// before it.
func (l *logLimits) admit(msg string, t time.Time) (bool, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[msg]
	if b == nil {
		if len(l.buckets) >= 256 {
			clear(l.buckets)
		}
		b = &logBucket{tokens: l.burst, last: t}
		l.buckets[msg] = b
	}
	if l.every > 0 {
		b.tokens = min(l.burst, b.tokens+float64(t.Sub(b.last))/float64(l.every))
	}
	b.last = t
	if b.tokens < 1 {
		b.suppressed++
		return false, 0
	}
	b.tokens--
	n := b.suppressed
	b.suppressed = 0
	return true, n
}

func (r *rateLimited) Enabled(ctx context.Context, level slog.Level) bool {
	return r.h.Enabled(ctx, level)
}

func (r *rateLimited) Handle(ctx context.Context, rec slog.Record) error {
	t := rec.Time
	if t.IsZero() {
		t = time.Now()
	}
	ok, suppressed := r.lim.admit(rec.Message, t)
	if !ok {
		return nil
	}
	if suppressed > 0 {
		rec = rec.Clone()
		rec.AddAttrs(slog.Int("suppressed", suppressed))
	}
	return r.h.Handle(ctx, rec)
}

func (r *rateLimited) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &rateLimited{h: r.h.WithAttrs(attrs), lim: r.lim}
}

func (r *rateLimited) WithGroup(name string) slog.Handler {
	return &rateLimited{h: r.h.WithGroup(name), lim: r.lim}
}
