// Package clampwatch turns a schema registry's clamp counters (values
// quantization clamped: out of range, NaN, ±Inf) into rate-limited
// warnings: once per net tick a Watch compares the registry's clamp
// generation with the last one it saw (one atomic load), and only when it
// moved, or a warning held back by the rate limit is due, looks at the
// counts.
package clampwatch

import (
	"log/slog"
	"strings"
	"time"

	"github.com/archenet/archenet/replication/schema"
)

// Every is how often at most a Watch warns about one field.
const Every = 10 * time.Second

// Watch turns a registry's clamp counters into rate-limited
// warnings: once per net tick, the send path compares the registry's clamp
// generation with the last one seen (one atomic load), and only when it
// moved (or a warning held back by the rate limit is due) looks at the
// counts.
type Watch struct {
	gen    uint64
	due    time.Time // zero: no warning held back
	fields map[clampField]*clampLog
}

type clampField struct{ comp, field string }

// clampLog is what was last logged for a field.
type clampLog struct {
	logged schema.ClampCount // the counts at the last warning
	at     time.Time
}

// Check logs, at most once per Every per field, the fields of reg whose
// clamp counts grew since their last warning.
func (w *Watch) Check(now time.Time, reg *schema.Registry, log *slog.Logger) {
	g := reg.ClampGeneration()
	if g == w.gen && (w.due.IsZero() || now.Before(w.due)) {
		return
	}
	w.gen, w.due = g, time.Time{}
	if w.fields == nil {
		w.fields = map[clampField]*clampLog{}
	}
	for _, c := range reg.Clamps() {
		k := clampField{c.Type, c.Field}
		l := w.fields[k]
		if l == nil {
			l = &clampLog{logged: schema.ClampCount{Type: c.Type, Field: c.Field}}
			w.fields[k] = l
		}
		d := schema.ClampCount{OutOfRange: c.OutOfRange - l.logged.OutOfRange, NaN: c.NaN - l.logged.NaN, Inf: c.Inf - l.logged.Inf}
		if d.Total() == 0 {
			continue
		}
		if !l.at.IsZero() && now.Sub(l.at) < Every {
			if next := l.at.Add(Every); w.due.IsZero() || next.Before(w.due) {
				w.due = next
			}
			continue
		}
		l.logged, l.at = c, now
		log.Warn("archenet: value clamped by quantization",
			"component", c.Type, "field", c.Field, "kind", clampKinds(d), "count", d.Total(), "total", c.Total())
	}
}

// clampKinds names the kinds of clamp counted in d, e.g. "out-of-range" or
// "nan+inf".
func clampKinds(d schema.ClampCount) string {
	var k []string
	if d.OutOfRange != 0 {
		k = append(k, "out-of-range")
	}
	if d.NaN != 0 {
		k = append(k, "nan")
	}
	if d.Inf != 0 {
		k = append(k, "inf")
	}
	return strings.Join(k, "+")
}
