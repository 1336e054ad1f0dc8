package snapshot

import (
	"math/bits"

	"github.com/archenet/archenet/replication/bitio"
	"github.com/archenet/archenet/replication/schema"
)

// The delta record encoder's inner loop. A delta record is its field masks
// (which groups of each component changed since the baseline), then its
// body: one residual per lane of the changed groups (see coding.go). The
// encoder writes both straight into the arena in two passes over the
// record's components, from compact per-plan tables (planOps) rather than
// the schema's lane descriptions.

// Lane operations of the delta body.
const (
	opNum     = iota // numeric lane: Rice-coded residual, class classOther
	opAngle          // numeric lane whose deltas wrap modulo 2^bits
	opWorld          // numeric lane of class classWorld, extrapolated quadratically
	opQuatIdx        // quaternion index: residual at order 0, never extrapolated
	opBit            // bool: the value itself, 1 bit
	opRest           // rest flag: the value, 1 bit; when 1 the group ends
)

type laneOp struct {
	kind uint8
	// sh is 64 − the lane's width for an angle lane, else 0: a lane's delta
	// is its difference sign-extended from its width (see delta), one
	// formula for both.
	sh uint8
	cl uint8 // the lane's class (classWorld for opWorld, else classOther)
}

// Lane operations of the pose kernel's lanes.
var (
	worldOp = laneOp{kind: opWorld, cl: classWorld}
	numOp   = laneOp{kind: opNum, cl: classOther}
)

type groupOp struct {
	first, end uint16
	qi         int16 // the group's quaternion-index lane, −1 none
}

// planOps is a component plan as the delta encoder reads it.
type planOps struct {
	n         int // lanes
	lanes     []laneOp
	groups    []groupOp
	visible   uint64 // groups every client sees (not owner-only)
	allGroups uint64
	// laneMasks is each group's lanes as a bit set, when the plan has at
	// most 64 lanes in groups that follow each other (nil otherwise).
	laneMasks []uint64
	// pose: the plan is a pose (see isPose), whose body poseBody writes.
	pose bool
}

func newPlanOps(p *schema.Plan) planOps {
	po := planOps{n: p.NumLanes()}
	for _, ln := range p.Lanes() {
		op := numOp
		switch ln.Kind {
		case schema.LaneAngle:
			op.kind, op.sh = opAngle, 64-ln.Bits
		case schema.LaneWorld:
			op = worldOp
		case schema.LaneQuatIndex:
			op.kind = opQuatIdx
		case schema.LaneBool:
			op.kind = opBit
		case schema.LaneRest:
			op.kind = opRest
		}
		po.lanes = append(po.lanes, op)
	}
	for gi, g := range p.Groups() {
		gop := groupOp{first: uint16(g.First), end: uint16(g.First + g.Count), qi: -1}
		for l := g.First; l < g.First+g.Count; l++ {
			if po.lanes[l].kind == opQuatIdx {
				gop.qi = int16(l)
			}
		}
		po.groups = append(po.groups, gop)
		po.laneMasks = append(po.laneMasks, (1<<g.Count-1)<<g.First)
		po.allGroups |= 1 << gi
		if !g.OwnerOnly {
			po.visible |= 1 << gi
		}
	}
	next := 0
	for _, g := range po.groups {
		if int(g.first) != next || g.end > 64 {
			po.laneMasks = nil
			break
		}
		next = int(g.end)
	}
	if next != po.n {
		po.laneMasks = nil
	}
	po.pose = po.isPose()
	return po
}

// isPose reports whether the plan is a pose as schema compiles one (e.g.
// components.Transform): three world lanes, each its own group, then one
// group of a quaternion index and three numeric lanes.
func (po *planOps) isPose() bool {
	want := [poseLanes]uint8{opWorld, opWorld, opWorld, opQuatIdx, opNum, opNum, opNum}
	if po.n != poseLanes || len(po.groups) != 4 {
		return false
	}
	for l, op := range po.lanes {
		if op.kind != want[l] {
			return false
		}
	}
	for gi, g := range po.groups[:3] {
		if g != (groupOp{first: uint16(gi), end: uint16(gi + 1), qi: -1}) {
			return false
		}
	}
	return po.groups[3] == groupOp{first: 3, end: poseLanes, qi: 3}
}

// delta returns the lane's delta from a to b: b − a, for angles modulo
// 2^bits the shortest way around (schema.AngleDelta), branch-free.
func (op laneOp) delta(a, b uint64) int64 {
	sh := op.sh & 63
	return int64((b-a)<<sh) >> sh
}

// deltaMasks finds the changed groups of each component of set between
// base and cur (e.gmasks, one word per component; owner-only groups only
// for owner) and writes the field masks. With prev, it also reports
// whether the changed groups are those that changed from prev to base
// (maskPred: the receiver, which predicts them so, gets one bit). mask is
// the masks' first 64 bits as a number.
func (e *Encoder) deltaMasks(set uint64, base, prev, cur []uint64, owner bool) (mask uint64, maskPred bool) {
	if set != 0 && set&(set-1) == 0 {
		if po := &e.ops[bits.TrailingZeros64(set)]; po.pose && po.visible == po.allGroups {
			return e.poseMasks(base, prev, cur)
		}
	}
	e.gmasks = e.gmasks[:0]
	maskPred = prev != nil
	off, nbits := 0, 0
	for s := set; s != 0; s &= s - 1 {
		po := &e.ops[bits.TrailingZeros64(s)]
		n := po.n
		b, c := base[off:off+n:off+n], cur[off:off+n:off+n]
		var v2 []uint64
		if prev != nil {
			v2 = prev[off : off+n : off+n]
		}
		off += n
		vis := po.visible
		if owner {
			vis = po.allGroups
		}
		var gm uint64
		if po.pose {
			gm = poseGroups(b, c) & vis
			if maskPred {
				maskPred = poseGroups(v2, b)&vis == gm
			}
		} else if po.laneMasks != nil {
			gm = po.groupsOf(laneDiff(b, c)) & vis
			if maskPred {
				maskPred = po.groupsOf(laneDiff(v2, b))&vis == gm
			}
		} else {
			for gi := range po.groups {
				g := &po.groups[gi]
				if vis>>gi&1 == 0 {
					continue
				}
				same := sameLanes(b, c, g)
				if maskPred {
					maskPred = same == sameLanes(v2, b, g)
				}
				if !same {
					gm |= 1 << gi
				}
			}
		}
		e.gmasks = append(e.gmasks, gm)
		if gm == 0 {
			e.arena.PutBits(0, 1)
			nbits++
			continue
		}
		// The mask: "0", or "1" and one bit per visible group (up to 64).
		v, k := gm, uint(bits.OnesCount64(vis))
		if vis&(vis+1) != 0 { // (not the low k groups: compact)
			v = 0
			i := uint(0)
			for r := vis; r != 0; r &= r - 1 {
				v |= gm >> bits.TrailingZeros64(r) & 1 << i
				i++
			}
		}
		if k < 63 {
			e.arena.PutBits(1|v<<1, k+1)
		} else {
			e.arena.PutBits(1, 1)
			e.arena.WriteBits(v, k)
		}
		if nbits < 64 {
			mask |= (1 | v<<1) << nbits
		}
		nbits += 1 + int(k)
	}
	return mask, maskPred
}

// laneDiff returns the lanes (up to 64) in which a and b differ.
func laneDiff(a, b []uint64) uint64 {
	var d uint64
	b = b[:len(a)]
	for l := range a {
		x := a[l] ^ b[l]
		d |= (x | -x) >> 63 << (l & 63) // (branch-free: lanes change at random)
	}
	return d
}

// groupsOf returns the groups that hold a lane of lanes (po.laneMasks set).
func (po *planOps) groupsOf(lanes uint64) uint64 {
	var gm uint64
	for gi, m := range po.laneMasks {
		x := lanes & m
		gm |= (x | -x) >> 63 << (gi & 63)
	}
	return gm
}

// sameLanes reports whether group g's lanes are equal in a and b.
func sameLanes(a, b []uint64, g *groupOp) bool {
	for l := int(g.first); l < int(g.end); l++ {
		if a[l] != b[l] {
			return false
		}
	}
	return true
}

// bodyResult is what deltaBody measured besides the body it wrote: what
// the body would take coded against the baseline alone (plain), and what
// quadratic extrapolation saved or would save on positions.
type bodyResult struct {
	plain           int
	quadGain, quadN int
}

// extrap is a record's prediction: its lanes are extrapolated num/den of
// the step from the prediction view to the baseline past the baseline
// (num ticks ahead of it, the views den ticks apart; see setupPrediction),
// world lanes quadratically through a third view when quad.
type extrap struct {
	num, den int64
	quad     bool
}

// recViews is an entity's lanes in the views a delta record spans: the
// baseline, the prediction view (nil: no prediction), the third view (nil:
// none) and the current frame; or, sliced, one component's.
type recViews struct {
	base, prev, third, cur []uint64
}

// comp returns the views of the component at lanes [off, off+n).
func (v *recViews) comp(off, n int) recViews {
	c := recViews{base: v.base[off : off+n], cur: v.cur[off : off+n]}
	if v.prev != nil {
		c.prev = v.prev[off : off+n]
		if v.third != nil {
			c.third = v.third[off : off+n]
		}
	}
	return c
}

// bodyCtx is one delta body's coding context: its prediction, the plain
// orders of the coding, and what it measures (res, and the residuals for
// the choice of the coding in st).
type bodyCtx struct {
	extrap
	// pred: the lanes at hand are extrapolated (the record has a
	// prediction view, and a quaternion's index did not change); third:
	// the record has a third view.
	pred, third bool
	plainK      [numClasses]uint
	res         bodyResult
	st          *recStats
}

// deltaBody writes the residuals of the changed groups (e.gmasks) of each
// component of set: against the extrapolation through v.prev (x.extrap)
// when v.prev is not nil, else against v.base. With v.third, positions are
// extrapolated quadratically when x.quad, and otherwise it only measures
// what that would save. x.st gets the residuals for the choice of the
// coding, x.res what it measured; e.compBody each component's body bits
// when accounting. It reports false, with part of the body written, when a
// residual is too large to code.
func (e *Encoder) deltaBody(set uint64, v *recViews, x *bodyCtx) bool {
	w := &e.arena
	x.plainK = [numClasses]uint{uint(e.coding.Plain[classWorld]), uint(e.coding.Plain[classOther])}
	x.third = v.prev != nil && v.third != nil
	*x.st = recStats{}
	x.res = bodyResult{}
	e.compBody = e.compBody[:0]
	if set != 0 && set&(set-1) == 0 && e.ops[bits.TrailingZeros64(set)].pose { // (one pose: no slicing)
		start := w.BitLen()
		if !e.poseBody(e.gmasks[0], v, x) {
			return false
		}
		if e.acct != nil {
			e.compBody = append(e.compBody, uint32(w.BitLen()-start))
		}
		return true
	}
	off, ci := 0, 0
	for s := set; s != 0; s &= s - 1 {
		po := &e.ops[bits.TrailingZeros64(s)]
		cv := v.comp(off, po.n)
		off += po.n
		start := w.BitLen()
		var ok bool
		if po.pose {
			ok = e.poseBody(e.gmasks[ci], &cv, x)
		} else {
			ok = e.groupsBody(po, e.gmasks[ci], &cv, x)
		}
		if !ok {
			return false
		}
		if e.acct != nil {
			e.compBody = append(e.compBody, uint32(w.BitLen()-start))
		}
		ci++
	}
	return true
}

// groupsBody is deltaBody for the changed groups gm of one component of
// plan po (v its lanes), lane by lane.
func (e *Encoder) groupsBody(po *planOps, gm uint64, v *recViews, x *bodyCtx) bool {
	w := &e.arena
	for ; gm != 0; gm &= gm - 1 {
		g := &po.groups[bits.TrailingZeros64(gm)]
		// A quaternion whose largest component changed is not
		// extrapolated.
		x.pred = v.prev != nil && (g.qi < 0 || v.prev[g.qi] == v.base[g.qi])
		for l := int(g.first); l < int(g.end); l++ {
			switch op := po.lanes[l]; op.kind {
			case opBit, opRest:
				w.PutBits(v.cur[l]&1, 1)
				x.res.plain++
				if op.kind == opRest && v.cur[l] != 0 {
					l = int(g.end) // axes implied zero
				}
			case opQuatIdx:
				if !e.quatIndex(v.base[l], v.cur[l], x) {
					return false
				}
			default:
				var p, t uint64
				if x.pred {
					p = v.prev[l]
					if x.third {
						t = v.third[l]
					}
				}
				if !e.numLane(op, v.base[l], v.cur[l], p, t, x) {
					return false
				}
			}
		}
	}
	return true
}

// quatIndex writes the residual of a quaternion's index from b to c: at
// order 0, never extrapolated nor counted for the coding.
func (e *Encoder) quatIndex(b, c uint64, x *bodyCtx) bool {
	z := bitio.ZigZag(int64(c - b))
	if z >= 1<<62 {
		return false
	}
	x.res.plain += bitio.RiceLen(z, 0)
	e.putRice(z, 0)
	return true
}

// numLane writes the residual of a numeric lane (operation op) from its
// value b at the baseline to its value c: with x.pred, against its linear
// extrapolation through its value p in the prediction view; for a world
// lane with x.third too, against the quadratic one through its value t in
// the third view when x.quad (else that is only measured). Its Rice order
// is the class's plain one without prediction, else the one of the step's
// context. The pose kernel and the general path both code their lanes
// here, from values rather than views: no bounds checks per lane.
func (e *Encoder) numLane(op laneOp, b, c, p, t uint64, x *bodyCtx) bool {
	z1 := bitio.ZigZag(op.delta(b, c))
	if z1 >= 1<<62 {
		return false
	}
	cl := int(op.cl & 1)
	k1 := x.plainK[cl]
	x.res.plain += bitio.RiceLen(z1, k1)
	z, k, ctx := z1, k1, -1
	if x.pred {
		d := op.delta(p, b)
		var step int64
		if d <= 1<<40 && d >= -(1<<40) { // (else a jump, not motion)
			step = d * x.num
			if x.den != 1 { // (the views are usually consecutive: no division)
				step = divRound(step, x.den)
			}
			z = bitio.ZigZag(op.delta(b+uint64(step), c))
		}
		ctx = stepCtx(step)
		k = uint(e.orders[cl][ctx&ordersMask])
		if op.kind == opWorld && x.third {
			qs := quadFrom(d, int64(p-t), x.num, x.den, step)
			zq := bitio.ZigZag(int64(c - (b + uint64(qs))))
			cq := stepCtx(qs)
			kq := uint(e.orders[classWorld][cq&ordersMask])
			if zq < 1<<62 && z < 1<<62 {
				x.res.quadGain += bitio.RiceLen(z, k) - bitio.RiceLen(zq, kq)
				x.res.quadN++
			}
			if x.quad {
				z, k, ctx = zq, kq, cq
			}
		}
		if z >= 1<<62 {
			return false
		}
	}
	if code, nb, short := bitio.RiceCode(z, k); short { // (putRice, which does not inline)
		e.arena.PutBits(code, nb)
	} else {
		e.arena.WriteRice(z, k)
	}
	x.st.add(cl, ctx, z)
	return true
}
