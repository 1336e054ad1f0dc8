package clampwatch

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/replication/schema"
)

type health struct {
	HP float32 `net:"range=0:100,step=1"`
}

type stats struct {
	Speed float32 `net:"range=0:10,step=0.1"`
	Armor int16   `net:"range=0:50"`
}

// recorder is a slog handler that keeps what is logged.
type recorder struct{ recs *[]slog.Record }

func (h recorder) Enabled(context.Context, slog.Level) bool { return true }
func (h recorder) Handle(_ context.Context, r slog.Record) error {
	*h.recs = append(*h.recs, r.Clone())
	return nil
}
func (h recorder) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h recorder) WithGroup(string) slog.Handler      { return h }

// rig is a Watch over a registry that the test makes clamp, on a
// simulated clock, keeping the warnings logged.
type rig struct {
	w    Watch
	reg  *schema.Registry
	now  time.Time
	recs []slog.Record
	log  *slog.Logger
}

func newRig() *rig {
	r := &rig{reg: schema.NewRegistry(), now: time.Unix(1000, 0)}
	schema.MustRegister[health](r.reg, schema.WithName("Health"))
	schema.MustRegister[stats](r.reg, schema.WithName("Stats"))
	r.log = slog.New(recorder{&r.recs})
	return r
}

// hp quantizes a Health of v (counting a clamp if it is one).
func (r *rig) hp(v float32) {
	p := schema.PlanOf[health](r.reg)
	schema.RoundValue(p, &health{HP: v}, make([]uint64, p.NumLanes()))
}

// speed quantizes a Stats of speed v.
func (r *rig) speed(v float32) {
	p := schema.PlanOf[stats](r.reg)
	schema.RoundValue(p, &stats{Speed: v, Armor: 1}, make([]uint64, p.NumLanes()))
}

// check runs the Watch at now+d and returns the warnings it logged, each
// as "component.field kind count/total".
func (r *rig) check(d time.Duration) []string {
	r.now = r.now.Add(d)
	r.recs = r.recs[:0]
	r.w.Check(r.now, r.reg, r.log)
	var out []string
	for _, rec := range r.recs {
		a := map[string]string{}
		rec.Attrs(func(at slog.Attr) bool { a[at.Key] = at.Value.String(); return true })
		if rec.Level != slog.LevelWarn || rec.Message != "archenet: value clamped by quantization" {
			out = append(out, fmt.Sprintf("unexpected %v %q", rec.Level, rec.Message))
			continue
		}
		out = append(out, fmt.Sprintf("%s.%s %s %s/%s", a["component"], a["field"], a["kind"], a["count"], a["total"]))
	}
	return out
}

// Nothing clamped, nothing logged; values in range (and within half a
// step of it) do not count.
func TestNoClampsNoWarnings(t *testing.T) {
	r := newRig()
	require.Empty(t, r.check(0))
	r.hp(50)
	r.hp(100.4)
	r.speed(0)
	require.Empty(t, r.check(time.Second))
	require.Zero(t, r.reg.ClampGeneration())
}

// The first clamps of a field are logged at the next Check, once per
// field, with the kinds of clamp seen, their count and the field's total.
func TestFirstClampsWarnAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		clamp func(r *rig)
		want  []string
	}{
		{"out of range", func(r *rig) { r.hp(300) }, []string{"Health.HP out-of-range 1/1"}},
		{"below range", func(r *rig) { r.hp(-5); r.hp(-6) }, []string{"Health.HP out-of-range 2/2"}},
		{"nan and inf", func(r *rig) { r.hp(float32(math.NaN())); r.hp(float32(math.Inf(-1))) }, []string{"Health.HP nan+inf 2/2"}},
		{"every kind", func(r *rig) { r.hp(float32(math.Inf(1))); r.hp(101); r.hp(float32(math.NaN())) }, []string{"Health.HP out-of-range+nan+inf 3/3"}},
		{"two fields", func(r *rig) { r.hp(300); r.speed(11); r.speed(12) }, []string{"Health.HP out-of-range 1/1", "Stats.Speed out-of-range 2/2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig()
			tc.clamp(r)
			require.Equal(t, tc.want, r.check(time.Second))
			require.Empty(t, r.check(time.Second), "logged once")
		})
	}
}

// Further clamps of a field within Every of its last warning are counted
// but held back; the warning comes when Every has passed — at the first
// Check then, even if nothing clamped since — with the clamps since the
// last warning and the field's total.
func TestRateLimitPerField(t *testing.T) {
	r := newRig()
	r.hp(300)
	require.Equal(t, []string{"Health.HP out-of-range 1/1"}, r.check(0))

	r.hp(301)
	require.Empty(t, r.check(time.Second))
	r.hp(float32(math.NaN()))
	require.Empty(t, r.check(time.Second))
	require.Empty(t, r.check(Every-2*time.Second-time.Nanosecond), "not yet due")
	require.Equal(t, []string{"Health.HP out-of-range+nan 2/3"}, r.check(time.Nanosecond),
		"due: logged with no new clamp")
	require.Empty(t, r.check(Every), "nothing new since")

	// After a quiet spell, a new clamp is logged at once.
	r.hp(400)
	require.Equal(t, []string{"Health.HP out-of-range 1/4"}, r.check(time.Second))
}

// The rate limit is per field: a field's first clamp is logged at once
// while another's are held back, and fields held back until different
// times are each logged when theirs is due.
func TestFieldsHeldBackIndependently(t *testing.T) {
	r := newRig()
	r.hp(300)
	require.Equal(t, []string{"Health.HP out-of-range 1/1"}, r.check(0)) // HP: at t0
	r.speed(20)
	r.hp(300)
	require.Equal(t, []string{"Stats.Speed out-of-range 1/1"}, r.check(3*time.Second)) // Speed: t0+3s
	r.speed(20)
	require.Empty(t, r.check(time.Second), "both held back")

	require.Equal(t, []string{"Health.HP out-of-range 1/2"}, r.check(Every-4*time.Second), "HP's is due first")
	require.Empty(t, r.check(3*time.Second-time.Nanosecond))
	require.Equal(t, []string{"Stats.Speed out-of-range 1/2"}, r.check(time.Nanosecond), "then Speed's")
	require.Empty(t, r.check(Every))
}
