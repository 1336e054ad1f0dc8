package replicationtest

import (
	"fmt"
	"math"
	"reflect"

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
		p := in.Position.At(w.Get(e, pid))
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
}

// Converged returns nil if the client mirrors exactly what it must of the
// server's replicated entities (those with components.Replicated), each
// with the same component set and the server's quantized state; else an
// error naming the first difference. Owner-only fields are compared for the
// owner and must be zero for everyone else.
//
// States are compared after the round trip a mirror went through: the
// server's lanes are dequantized and quantized again before they are
// compared with the quantized mirror (requantizing a dequantized quaternion
// can pick another of its equivalent encodings).
func Converged(c Check) error {
	idRep := ecs.ComponentID[components.Replicated](c.Server)
	type want struct {
		e    ecs.Entity
		need Need
	}
	byID := map[components.NetID]want{}
	must := 0
	q := c.Server.Query(ecs.All(idRep))
	for q.Next() {
		e := q.Entity()
		id, ok := c.NetID(e)
		if !ok {
			q.Close()
			return fmt.Errorf("server entity %v has no net id", e)
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
	seen := 0
	mirrored := make(map[components.NetID]bool, len(byID))
	idNet := ecs.ComponentID[components.NetID](c.Client)
	cq := c.Client.Query(ecs.All(idNet))
	for cq.Next() {
		id := *(*components.NetID)(cq.Get(idNet))
		wt, ok := byID[id]
		var err error
		switch {
		case mirrored[id]:
			err = fmt.Errorf("client %d mirrors %08x/%d twice", c.Me, id.Handle, id.Gen)
		case ok:
			err = c.compare(id, wt.e, wt.need, cq.Entity())
		default:
			err = fmt.Errorf("client %d mirrors %08x/%d, which the server does not have", c.Me, id.Handle, id.Gen)
		}
		mirrored[id] = true
		if err != nil {
			cq.Close()
			return err
		}
		if wt.need == Must {
			seen++
		}
	}
	if seen != must {
		return fmt.Errorf("client %d mirrors %d of the %d entities it must have", c.Me, seen, must)
	}
	return nil
}

// compare checks the mirror m of server entity e.
func (c *Check) compare(id components.NetID, e ecs.Entity, need Need, m ecs.Entity) error {
	if need == MustNot {
		return fmt.Errorf("client %d mirrors %08x/%d, which is not relevant to it", c.Me, id.Handle, id.Gen)
	}
	sset, slanes := Quantized(c.Registry, c.Server, e, id.Owner() == c.Me, true)
	cset, clanes := Quantized(c.Registry, c.Client, m, true, false)
	if sset != cset {
		return fmt.Errorf("client %d %08x/%d: component set %b, server %b", c.Me, id.Handle, id.Gen, cset, sset)
	}
	for i := range slanes {
		if slanes[i] != clanes[i] {
			return fmt.Errorf("client %d %08x/%d: lane %d = %d, server %d", c.Me, id.Handle, id.Gen, i, clanes[i], slanes[i])
		}
	}
	return nil
}

// Quantized returns the component set and the quantized lanes of every
// registered component of e in w, in registry order. Owner-only fields are
// zeroed unless owner is true. With roundTrip the lanes are dequantized and
// quantized again (what a mirror of e would quantize to).
func Quantized(reg *schema.Registry, w *ecs.World, e ecs.Entity, owner, roundTrip bool) (uint64, []uint64) {
	var set uint64
	var lanes []uint64
	for _, p := range reg.Plans() {
		id := ecs.TypeID(w, p.Type)
		if !w.Has(e, id) {
			continue
		}
		set |= 1 << p.ID
		l := make([]uint64, p.NumLanes())
		p.Quantize(w.Get(e, id), l)
		if !owner {
			for _, g := range p.Groups() {
				if g.OwnerOnly {
					clear(l[g.First : g.First+g.Count])
				}
			}
		}
		if roundTrip {
			v := reflect.New(p.Type).UnsafePointer()
			p.Dequantize(l, v)
			p.Quantize(v, l)
		}
		lanes = append(lanes, l...)
	}
	return set, lanes
}
