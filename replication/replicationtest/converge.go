package replicationtest

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"unsafe"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/replication/schema"
	"github.com/mlange-42/arche/ecs"
)

// Need says whether a client must mirror a server entity.
type Need uint8

// The values of [Need].
const (
	Must    Need = iota // the client must mirror it
	May                 // either is right (an interest border)
	MustNot             // the client must not mirror it
)

// Relevance decides the Need of each server entity for the client checked.
// Nil: every entity is a Must.
type Relevance func(e ecs.Entity, id components.NetID) Need

// Within is the server's interest rule (replication.Interest in) for a
// client whose focus is f (hasFocus false: no focus): entities it owns,
// entities without a position (in.Position: components.Transform's Pos by
// default) and entities within in.Radius of f on the x/z plane are a Must,
// entities beyond Radius × (1 + Hysteresis) a MustNot (they may have left),
// and those between a May; entities in.Filter refuses are a MustNot. me is
// the client's id.
func Within(w *ecs.World, me uint8, in *replication.Interest, f components.Vec3, hasFocus bool) Relevance {
	const margin = 1e-6
	pid := ecs.TypeID(w, in.Position.Type())
	hyst := in.Hysteresis
	if hyst == 0 {
		hyst = replication.DefaultHysteresis
	}
	return func(e ecs.Entity, id components.NetID) Need {
		if id.Owner() == me {
			return Must
		}
		if in.Filter != nil && !in.Filter(me, e) {
			return MustNot
		}
		if !w.Has(e, pid) {
			return Must
		}
		if !hasFocus {
			return MustNot
		}
		p, _ := in.Position.Of(w, e)
		switch d := math.Hypot(p.X-f.X, p.Z-f.Z); {
		case d <= in.Radius-margin:
			return Must
		case d > in.Radius*(1+hyst)+margin:
			return MustNot
		}
		return May
	}
}

// Only turns a yes/no relevance into a Relevance: Must or MustNot.
func Only(relevant func(e ecs.Entity) bool) Relevance {
	return func(e ecs.Entity, _ components.NetID) Need {
		if relevant(e) {
			return Must
		}
		return MustNot
	}
}

// Check is one convergence check: a server world and one client's world.
type Check struct {
	Registry *schema.Registry
	Server   *ecs.World
	// NetID is the server's net id of a replicated entity
	// (replication.Server.NetID).
	NetID func(ecs.Entity) (components.NetID, bool)
	// Client is the client's world and Me its client id.
	Client *ecs.World
	Me     uint8
	// Relevance (nil: every entity) says what the client must mirror.
	Relevance Relevance
	// PredictedAt, if set, returns the client's prediction of its own
	// predicted entity m (one it owns with components.Predicted) at the
	// tick the server's state is of — a pointer to the predicted
	// component, e.g. input.Player.PredictedAt(the server's tick) — which
	// is compared with the server's state instead of the mirror's (the
	// mirror runs ahead of the server). ok false: that tick's prediction is
	// gone; the entity is skipped (Report.SkippedPredicted).
	PredictedAt func(m ecs.Entity) (state any, ok bool)
	// SkipPredicted skips the components of the client's own predicted
	// entities (they run ahead of the server); the report counts them.
	// Without it or PredictedAt they are compared as they are.
	SkipPredicted bool

	idPred ecs.ID
}

// Report is what a convergence check found besides its verdict.
type Report struct {
	Compared  int // mirrors compared with the server's state
	Predicted int // of those, predicted entities compared at the server's tick (PredictedAt)
	// SkippedPredicted counts the client's predicted entities whose
	// components were not compared (SkipPredicted, or no prediction for the
	// server's tick).
	SkippedPredicted int
	// ServerClamps and ClientClamps are the fields whose values the check's
	// quantization clamped on either side: what the server holds but no
	// client can see as it is (a value out of the field's range, NaN or
	// ±Inf), and mirrors holding values their fields cannot represent.
	ServerClamps, ClientClamps []schema.ClampCount
}

// String summarizes r.
func (r Report) String() string {
	s := fmt.Sprintf("%d mirrors compared (%d predicted at the server's tick), %d predicted skipped", r.Compared, r.Predicted, r.SkippedPredicted)
	for _, side := range []struct {
		name string
		cc   []schema.ClampCount
	}{{"server", r.ServerClamps}, {"client", r.ClientClamps}} {
		for _, c := range side.cc {
			s += fmt.Sprintf("; %s values of %s.%s clamped %d times", side.name, c.Type, c.Field, c.Total())
		}
	}
	return s
}

// Converged returns nil if the client mirrors exactly what it must of the
// server's replicated entities (those with components.Replicated), each
// with the same component set and the server's quantized state; else an
// error naming the first difference: the entity, and the component and
// field with both values. Owner-only fields are compared for the owner and
// must be zero for everyone else. See [Compare] for the report.
//
// States are compared after the round trip a mirror went through: the
// server's lanes are dequantized and quantized again before they are
// compared with the quantized mirror (requantizing a dequantized quaternion
// can pick another of its equivalent encodings).
func Converged(c Check) error {
	_, err := Compare(c)
	return err
}

// Compare is [Converged] with a report: how many mirrors were compared,
// how predicted entities were, and which fields' values were clamped.
func Compare(c Check) (Report, error) {
	var r Report
	byID, must, err := c.wanted()
	if err != nil {
		return r, err
	}
	clamps0 := clampTotals(c.Registry)
	seen := 0
	mirrored := make(map[components.NetID]bool, len(byID))
	idNet := ecs.ComponentID[components.NetID](c.Client)
	c.idPred = ecs.ComponentID[components.Predicted](c.Client) // (registered before the query locks the world)
	cq := c.Client.Query(ecs.All(idNet))
	for cq.Next() {
		id := *(*components.NetID)(cq.Get(idNet))
		wt, ok := byID[id]
		var err error
		switch {
		case mirrored[id]:
			err = fmt.Errorf("client %d mirrors %08x/%d twice", c.Me, id.Handle, id.Gen)
		case ok:
			err = c.compare(&r, id, wt.e, wt.need, cq.Entity())
		default:
			err = fmt.Errorf("client %d mirrors %08x/%d, which the server does not have", c.Me, id.Handle, id.Gen)
		}
		mirrored[id] = true
		if err != nil {
			cq.Close()
			return r, err
		}
		if wt.need == Must {
			seen++
		}
	}
	r.ServerClamps, r.ClientClamps = c.clampsOf(clamps0)
	if seen != must {
		return r, fmt.Errorf("client %d mirrors %d of the %d entities it must have", c.Me, seen, must)
	}
	return r, nil
}

// want is a server entity and whether the client must mirror it.
type want struct {
	e    ecs.Entity
	need Need
}

// wanted returns the server's replicated entities by net id with their
// Need, and how many are a Must.
func (c *Check) wanted() (map[components.NetID]want, int, error) {
	idRep := ecs.ComponentID[components.Replicated](c.Server)
	byID := map[components.NetID]want{}
	must := 0
	q := c.Server.Query(ecs.All(idRep))
	for q.Next() {
		e := q.Entity()
		id, ok := c.NetID(e)
		if !ok {
			q.Close()
			return nil, 0, fmt.Errorf("server entity %v has no net id", e)
		}
		n := Must
		if c.Relevance != nil {
			n = c.Relevance(e, id)
		}
		if n == Must {
			must++
		}
		byID[id] = want{e, n}
	}
	return byID, must, nil
}

// compare checks the mirror m of server entity e.
func (c *Check) compare(r *Report, id components.NetID, e ecs.Entity, need Need, m ecs.Entity) error {
	if need == MustNot {
		return fmt.Errorf("client %d mirrors %08x/%d, which is not relevant to it", c.Me, id.Handle, id.Gen)
	}
	r.Compared++
	own := id.Owner() == c.Me && c.Me != 0
	var pred any
	if own && c.Client.Has(m, c.idPred) {
		var ok bool
		switch {
		case c.SkipPredicted:
		case c.PredictedAt != nil:
			if pred, ok = c.PredictedAt(m); !ok {
				pred = nil
			}
		default:
			ok = true // compared as it is
		}
		if !ok && pred == nil {
			r.SkippedPredicted++
			return c.compareSets(id, e, m)
		}
		if pred != nil {
			r.Predicted++
		}
	}
	sset, slanes := Quantized(c.Registry, c.Server, e, own, true)
	cset, clanes := quantizedWith(c.Registry, c.Client, m, true, false, pred)
	if sset != cset {
		return fmt.Errorf("client %d %08x/%d: component set %s, server %s", c.Me, id.Handle, id.Gen, setNames(c.Registry, cset), setNames(c.Registry, sset))
	}
	for i := range slanes {
		if slanes[i] != clanes[i] {
			comp, field, steps := describeLane(c.Registry, sset, i, slanes[i], clanes[i])
			return fmt.Errorf("client %d %08x/%d: %s.%s differs from the server's by %d steps (client code %d, server %d)",
				c.Me, id.Handle, id.Gen, comp, field, steps, clanes[i], slanes[i])
		}
	}
	return nil
}

// compareSets checks that the mirror m of e has e's component set.
func (c *Check) compareSets(id components.NetID, e, m ecs.Entity) error {
	sset, _ := Quantized(c.Registry, c.Server, e, true, false)
	cset, _ := Quantized(c.Registry, c.Client, m, true, false)
	if sset != cset {
		return fmt.Errorf("client %d %08x/%d: component set %s, server %s", c.Me, id.Handle, id.Gen, setNames(c.Registry, cset), setNames(c.Registry, sset))
	}
	return nil
}

// setNames names the components of a component set.
func setNames(reg *schema.Registry, set uint64) string {
	var names []string
	for _, p := range reg.Plans() {
		if set&(1<<p.ID) != 0 {
			names = append(names, p.Name)
		}
	}
	return "{" + strings.Join(names, ", ") + "}"
}

// describeLane names lane i of the lanes of component set set: its
// component and field, and the difference of two codes in steps.
func describeLane(reg *schema.Registry, set uint64, i int, server, client uint64) (comp, field string, steps int64) {
	for _, p := range reg.Plans() {
		if set&(1<<p.ID) == 0 {
			continue
		}
		if i < p.NumLanes() {
			l := p.Lanes()[i]
			return p.Name, p.Groups()[l.Group].Name, l.Delta(server, client)
		}
		i -= p.NumLanes()
	}
	return "?", "?", 0
}

// Quantized returns the component set and the quantized lanes of every
// registered component of e in w, in registry order. Owner-only fields are
// zeroed unless owner is true. With roundTrip the lanes are dequantized and
// quantized again (what a mirror of e would quantize to).
func Quantized(reg *schema.Registry, w *ecs.World, e ecs.Entity, owner, roundTrip bool) (uint64, []uint64) {
	return quantizedWith(reg, w, e, owner, roundTrip, nil)
}

// quantizedWith is Quantized with the value of one component replaced:
// subst, if not nil, points to a value of a registered component type,
// quantized instead of e's.
func quantizedWith(reg *schema.Registry, w *ecs.World, e ecs.Entity, owner, roundTrip bool, subst any) (uint64, []uint64) {
	var set uint64
	var lanes []uint64
	sv := reflect.ValueOf(subst)
	for _, p := range reg.Plans() {
		id := ecs.TypeID(w, p.Type)
		if !w.Has(e, id) {
			continue
		}
		set |= 1 << p.ID
		l := make([]uint64, p.NumLanes())
		src := w.Get(e, id)
		if subst != nil && sv.Kind() == reflect.Pointer && sv.Type().Elem() == p.Type {
			src = sv.UnsafePointer()
		}
		p.QuantizeBytes(unsafe.Slice((*byte)(src), p.Size), l)
		if !owner {
			for _, g := range p.Groups() {
				if g.OwnerOnly {
					clear(l[g.First : g.First+g.Count])
				}
			}
		}
		if roundTrip {
			v := reflect.New(p.Type).UnsafePointer()
			mem := unsafe.Slice((*byte)(v), p.Size)
			p.DequantizeBytes(l, mem)
			p.QuantizeBytes(mem, l)
		}
		lanes = append(lanes, l...)
	}
	return set, lanes
}

// clampTotals returns the registry's clamp counts by component and field.
func clampTotals(reg *schema.Registry) map[[2]string]uint64 {
	out := map[[2]string]uint64{}
	for _, c := range reg.Clamps() {
		out[[2]string{c.Type, c.Field}] = c.Total()
	}
	return out
}

// clampsOf returns the fields whose clamp counts grew during the check
// since before, on the server's and the client's side. (The two sides
// share the registry's counters, so each side's states are quantized once
// more, alone, to tell them apart.)
func (c *Check) clampsOf(before map[[2]string]uint64) (server, client []schema.ClampCount) {
	grew := false
	for k, n := range clampTotals(c.Registry) {
		if n != before[k] {
			grew = true
		}
	}
	if !grew {
		return nil, nil
	}
	side := func(w *ecs.World, filter ecs.Filter) []schema.ClampCount {
		b := clampTotals(c.Registry)
		q := w.Query(filter)
		for q.Next() {
			quantizedWith(c.Registry, w, q.Entity(), true, false, nil)
		}
		var out []schema.ClampCount
		for _, cc := range c.Registry.Clamps() {
			if d := cc.Total() - b[[2]string{cc.Type, cc.Field}]; d > 0 {
				out = append(out, schema.ClampCount{Type: cc.Type, Field: cc.Field, OutOfRange: d})
			}
		}
		return out
	}
	return side(c.Server, ecs.All(ecs.ComponentID[components.Replicated](c.Server))), side(c.Client, ecs.All(ecs.ComponentID[components.NetID](c.Client)))
}
