package replication

import (
	"strings"
	"time"

	"github.com/archenet/archenet/replication/schema"
)

// ClampWarnEvery is how often at most the server warns about one field's
// clamped values.
const ClampWarnEvery = 10 * time.Second

// Clamps returns how often quantization clamped each field of the
// replicated components (values a field cannot represent: out of range,
// NaN, ±Inf), per component type and field; fields never clamped are
// omitted. The counts are the registry's ([schema.Registry.Clamps]), so a
// client or input codec sharing the registry in the same process adds to
// them. Allocates; for stats, not for every tick.
func (s *Server) Clamps() []schema.ClampCount { return s.cfg.Registry.Clamps() }

// clampWatch turns the registry's clamp counters into rate-limited
// warnings: once per net tick, the send path compares the registry's clamp
// generation with the last one seen (one atomic load), and only when it
// moved (or a warning held back by the rate limit is due) looks at the
// counts.
type clampWatch struct {
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

// watchClamps logs, at most once per ClampWarnEvery per field, the fields
// whose clamp counts grew since their last warning.
func (s *Server) watchClamps(now time.Time) {
	w := &s.clampW
	g := s.cfg.Registry.ClampGeneration()
	if g == w.gen && (w.due.IsZero() || now.Before(w.due)) {
		return
	}
	w.gen, w.due = g, time.Time{}
	if w.fields == nil {
		w.fields = map[clampField]*clampLog{}
	}
	for _, c := range s.cfg.Registry.Clamps() {
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
		if !l.at.IsZero() && now.Sub(l.at) < ClampWarnEvery {
			if next := l.at.Add(ClampWarnEvery); w.due.IsZero() || next.Before(w.due) {
				w.due = next
			}
			continue
		}
		l.logged, l.at = c, now
		s.cfg.Logger.Warn("archenet: value clamped by quantization",
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
