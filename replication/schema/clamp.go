package schema

import (
	"sync/atomic"

	"github.com/archenet/archenet/replication/internal/quant"
)

// ClampCount is how often quantization clamped one field of one component
// type: values the field cannot represent, which clients see as something
// else than the server holds (Health 300 in a range=0:100 field shows as
// 100, NaN as 0, a position past the world limit at the limit).
type ClampCount struct {
	// Type is the component's registered name, Field the field path (a
	// [Group] name, e.g. "HP", "Pos.X" or "Rot").
	Type, Field string
	// OutOfRange counts finite values more than half a step outside the
	// field's range (or beyond the world limit, or outside an integer
	// range); NaN and Inf count NaN and ±Inf inputs. A composite field (a
	// quaternion, a velocity) counts once per quantization, by its most
	// severe input (NaN, then Inf, then out of range).
	OutOfRange, NaN, Inf uint64
}

// Total returns OutOfRange + NaN + Inf.
func (c ClampCount) Total() uint64 { return c.OutOfRange + c.NaN + c.Inf }

// clampCounters are one group's counters, indexed by quant.Clamp − 1.
type clampCounters [3]atomic.Uint64

// noteClamp counts a clamp of kind c in the group of lane. It is called
// only on the branch that saw a clamp, never on the common path.
//
//go:noinline
func (p *Plan) noteClamp(lane uint16, c quant.Clamp) {
	if c == quant.ClampNone || int(c) > len(clampCounters{}) {
		return
	}
	p.clamps[p.lanes[lane].Group][c-1].Add(1)
	if p.clampGen != nil {
		p.clampGen.Add(1)
	}
}

// checkClamp classifies the input v of a scalar, world or angle op that got
// one of the codes a clamp produces, and counts it if it was clamped.
//
//go:noinline
func (p *Plan) checkClamp(o *op, v float64) {
	var c quant.Clamp
	switch o.kind {
	case opScalar:
		c = o.sc.Clamped(v)
	case opWorld:
		c = o.wld.Clamped(v)
	case opAngle:
		c = o.ang.Clamped(v)
	}
	if c != quant.ClampNone {
		p.noteClamp(o.lane, c)
	}
}

// worldEdge reports whether world code q of input v may be a clamp's:
// ±WorldLimitSteps, or 0 from a NaN (the multiples of the limit within it).
func worldEdge(q int64, v float64) bool {
	return q&(quant.GridLimitSteps-1) == 0 && (q != 0 || v != v)
}

// Clamps returns, per field that was clamped at least once, how often
// quantization clamped it ([Plan.QuantizeBytes], so also [Plan.Round] and
// everything that shares the plan), in field order.
func (p *Plan) Clamps() []ClampCount {
	var out []ClampCount
	for g := range p.clamps {
		c := &p.clamps[g]
		cc := ClampCount{Type: p.Name, Field: p.groups[g].Name,
			OutOfRange: c[quant.ClampRange-1].Load(), Inf: c[quant.ClampInf-1].Load(), NaN: c[quant.ClampNaN-1].Load()}
		if cc.Total() != 0 {
			out = append(out, cc)
		}
	}
	return out
}

// Clamps returns the clamp counts of every registered component's fields
// that were clamped at least once, in component id and field order (see
// [ClampCount]). Counts are per registry: everything that quantizes with
// its plans (a server's frames, a client's or the server's [Plan.Round],
// input codecs built on the registry) adds to them. Safe for concurrent use
// with quantization; allocates.
func (r *Registry) Clamps() []ClampCount {
	var out []ClampCount
	for _, p := range r.plans {
		out = append(out, p.Clamps()...)
	}
	return out
}

// ClampGeneration returns a counter that grows whenever a quantization with
// one of r's plans clamps a value: compare it with a value seen before to
// learn cheaply (one atomic load) whether [Registry.Clamps] changed.
func (r *Registry) ClampGeneration() uint64 { return r.clampGen.Load() }
