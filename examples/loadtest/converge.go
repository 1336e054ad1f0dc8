package main

import (
	"fmt"
	"math"
	"reflect"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/schema"
	"github.com/mlange-42/arche/ecs"
)

// hysteresis is the server's default Interest.Hysteresis: a relevant entity
// stays relevant until it is farther than Radius × (1 + hysteresis).
const hysteresis = 0.15

// quantized returns the component set and the quantized lanes of every
// registered component of e. Owner-only fields are zeroed unless owner is
// true. With roundTrip the lanes are dequantized and quantized again: a
// mirror holds Dequantize(lanes), and requantizing a dequantized
// quaternion does not always give back the same codes (near |y| = |w| the
// dropped-component index can flip between equivalent encodings), so both
// sides are compared after the same round trip.
func quantized(reg *schema.Registry, w *ecs.World, e ecs.Entity, owner, roundTrip bool) (uint64, []uint64) {
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

// checkConverged compares every client's mirrors with the server's
// replicated entities at the quantized level (the same check as the
// integration tests' harness):
//
//   - every mirror is a server entity (same NetID) with the same component
//     set and lanes;
//   - with interest, every server entity within the radius of the client's
//     focus, and every entity it owns, is mirrored, and nothing farther than
//     radius × (1 + hysteresis) is (between the two, either is right);
//   - without interest, every server entity is mirrored.
//
// focus returns a client's point of interest (x/z plane, like the server's
// interest grid).
func (r *rig) checkConverged(focus func(p *peer) (components.Vec3, bool)) error {
	idRep := ecs.ComponentID[components.Replicated](r.sw)
	type srvEnt struct {
		e      ecs.Entity
		pos    components.Vec3
		hasPos bool
	}
	byID := map[components.NetID]srvEnt{}
	q := r.sw.Query(ecs.All(idRep))
	for q.Next() {
		e := q.Entity()
		id, ok := r.srv.NetID(e)
		if !ok {
			q.Close()
			return fmt.Errorf("server entity %v has no net id", e)
		}
		se := srvEnt{e: e}
		if r.sw.Has(e, r.tid) {
			se.pos, se.hasPos = (*components.Transform)(r.sw.Get(e, r.tid)).Pos, true
		}
		byID[id] = se
	}
	radius := r.cfg.Interest
	const margin = 1e-6
	for _, p := range r.peers {
		me := p.c.ID()
		f, hasFocus := focus(p)
		dist := func(se srvEnt) float64 { return math.Hypot(se.pos.X-f.X, se.pos.Z-f.Z) }
		must := 0
		for id, se := range byID {
			if radius == 0 || id.Owner() == me || !se.hasPos || (hasFocus && dist(se) <= radius-margin) {
				must++
			}
		}
		seen := 0
		idNet := ecs.ComponentID[components.NetID](p.w)
		cq := p.w.Query(ecs.All(idNet))
		for cq.Next() {
			id := *(*components.NetID)(cq.Get(idNet))
			se, ok := byID[id]
			if !ok {
				cq.Close()
				return fmt.Errorf("client %d mirrors %08x/%d, which the server does not have", me, id.Handle, id.Gen)
			}
			mustHave := radius == 0 || id.Owner() == me || !se.hasPos || (hasFocus && dist(se) <= radius-margin)
			if !mustHave && (!hasFocus || dist(se) > radius*(1+hysteresis)+margin) {
				cq.Close()
				return fmt.Errorf("client %d mirrors %08x/%d, %.1f m from its focus (interest %.0f m)", me, id.Handle, id.Gen, dist(se), radius)
			}
			if mustHave {
				seen++
			}
			sset, slanes := quantized(r.reg, r.sw, se.e, id.Owner() == me, true)
			cset, clanes := quantized(r.reg, p.w, cq.Entity(), true, false)
			if sset != cset {
				cq.Close()
				return fmt.Errorf("client %d %08x/%d: component set %b, server %b", me, id.Handle, id.Gen, cset, sset)
			}
			for i := range slanes {
				if slanes[i] != clanes[i] {
					cq.Close()
					return fmt.Errorf("client %d %08x/%d: lane %d = %d, server %d", me, id.Handle, id.Gen, i, clanes[i], slanes[i])
				}
			}
		}
		if seen != must {
			return fmt.Errorf("client %d mirrors %d of the %d entities it must have", me, seen, must)
		}
	}
	return nil
}
