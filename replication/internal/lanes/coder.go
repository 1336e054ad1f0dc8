package lanes

import (
	"math/bits"

	"github.com/archenet/archenet/replication/bitio"
	"github.com/archenet/archenet/replication/internal/codec"
	"github.com/archenet/archenet/replication/internal/entity"
	"github.com/archenet/archenet/replication/internal/wire"
	"github.com/archenet/archenet/replication/schema"
)

// The delta record encoder's inner loop. A delta record is its field masks
// (which groups of each component changed since the baseline), then its
// body: one residual per lane of the changed groups (see wire.Coding). The
// coder writes both straight into the arena in two passes over the
// record's components, from compact per-plan tables (planOps) rather than
// the schema's lane descriptions.

// Coder writes records into the encoder's arena: full records, and
// delta records as field masks and residuals, from compact per-plan tables
// (planOps) rather than the schema's lane descriptions. Its coding and
// order table are the tick's (SetCoding).
type Coder struct {
	plans []*schema.Plan
	ops   []planOps // per component: its plan as the delta kernels read it
	// coding is the residual coding of the current tick's records; quad:
	// its records extrapolate positions quadratically through a third view
	// where they can. Both are the Group's choice for the tick.
	coding wire.Coding
	quad   bool
	// orders is coding's order of a predicted lane by class and context
	// (Coding.OrderCtx, looked up), ordersMask+1 entries per class so that
	// a masked context needs no bounds check
	orders [wire.NumClasses][ordersMask + 1]uint8
	// arena holds the bits of the tick's records (the cache's entries point
	// into it); scratch measures a full record's size.
	Arena   bitio.Writer
	scratch bitio.Writer
	gmasks  []uint64 // per component of a delta: its changed groups
	// account: bit accounting is on; compBody then gets each component's
	// body bits of a delta.
	Account  bool
	compBody []uint32
}

// ordersMask: Coder.orders is indexed by a context masked with it.
const ordersMask = 31

// New returns a coder of the components of plans (in registry id order),
// at the default coding.
func New(plans []*schema.Plan) Coder {
	lc := Coder{plans: plans}
	for _, p := range plans {
		lc.ops = append(lc.ops, newPlanOps(p))
	}
	lc.SetCoding(wire.DefaultCoding, false)
	return lc
}

// SetCoding sets the residual coding of the tick's records (and its order
// table) and whether they extrapolate quadratically.
func (lc *Coder) SetCoding(c wire.Coding, quad bool) {
	lc.coding, lc.quad = c, quad
	for cl := range wire.NumClasses {
		for ctx := range wire.MaxCodeCtx + 1 {
			lc.orders[cl][ctx] = uint8(c.OrderCtx(cl, ctx))
		}
	}
}

// MinFullBits is a lower bound of a full record's size: when a delta is
// below it, the full encoding need not be measured.
func (lc *Coder) MinFullBits(set uint64) int {
	n := 3 // generation, owner, component set: at least 1 bit each
	for s := set; s != 0; s &= s - 1 {
		n += lc.plans[bits.TrailingZeros64(s)].MinBits()
	}
	return n
}

// FullBits returns the size of the full record of an entity.
func (lc *Coder) FullBits(m entity.Meta, lanes []uint64, owner bool) int {
	lc.scratch.Reset(lc.scratch.Bytes())
	codec.WriteFull(&lc.scratch, lc.plans, m, lanes, owner)
	return lc.scratch.BitLen()
}

// Lane operations of the delta body.
const (
	opNum     = iota // numeric lane: Rice-coded residual, class wire.ClassOther
	opAngle          // numeric lane whose deltas wrap modulo 2^bits
	opWorld          // numeric lane of class wire.ClassWorld, extrapolated quadratically
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
	cl uint8 // the lane's class (wire.ClassWorld for opWorld, else wire.ClassOther)
}

// Lane operations of the pose kernel's lanes.
var (
	worldOp = laneOp{kind: opWorld, cl: wire.ClassWorld}
	numOp   = laneOp{kind: opNum, cl: wire.ClassOther}
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

// DeltaMasks finds the changed groups of each component of set between
// base and cur (lc.gmasks, one word per component; owner-only groups only
// for owner) and writes the field masks. With prev, it also reports
// whether the changed groups are those that changed from prev to base
// (maskPred: the receiver, which predicts them so, gets one bit). mask is
// the masks' first 64 bits as a number.
func (lc *Coder) DeltaMasks(set uint64, base, prev, cur []uint64, owner bool) (mask uint64, maskPred bool) {
	if set != 0 && set&(set-1) == 0 {
		if po := &lc.ops[bits.TrailingZeros64(set)]; po.pose && po.visible == po.allGroups {
			return lc.poseMasks(base, prev, cur)
		}
	}
	lc.gmasks = lc.gmasks[:0]
	maskPred = prev != nil
	off, nbits := 0, 0
	for s := set; s != 0; s &= s - 1 {
		po := &lc.ops[bits.TrailingZeros64(s)]
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
			gm = codec.PoseGroups(b, c) & vis
			if maskPred {
				maskPred = codec.PoseGroups(v2, b)&vis == gm
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
		lc.gmasks = append(lc.gmasks, gm)
		if gm == 0 {
			lc.Arena.PutBits(0, 1)
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
			lc.Arena.PutBits(1|v<<1, k+1)
		} else {
			lc.Arena.PutBits(1, 1)
			lc.Arena.WriteBits(v, k)
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

// Result is what deltaBody measured besides the body it wrote: what
// the body would take coded against the baseline alone (plain), and what
// quadratic extrapolation saved or would save on positions.
type Result struct {
	Plain           int
	QuadGain, QuadN int
}

// bodyCtx is one delta body's coding context: its prediction, the plain
// orders of the coding, and what it measures (res, and the residuals for
// the choice of the coding in st).
type bodyCtx struct {
	codec.Extrap
	// pred: the lanes at hand are extrapolated (the record has a
	// prediction view, and a quaternion's index did not change); third:
	// the record has a third view.
	pred, third bool
	plainK      [wire.NumClasses]uint
	res         Result
	st          *Stats
}

// DeltaBody writes the body of a delta record of set (after DeltaMasks,
// whose changed groups it codes): against the extrapolation x through
// v.Prev when v.Prev is not nil, else against v.Base (see deltaBody). st
// gets the residuals for the choice of the coding. It reports false, with
// part of the body written, when a residual is too large to code.
func (lc *Coder) DeltaBody(set uint64, v *codec.Views, x codec.Extrap, st *Stats) (Result, bool) {
	ctx := bodyCtx{Extrap: x, st: st}
	ok := lc.deltaBody(set, v, &ctx)
	return ctx.res, ok
}

// Coding returns the tick's residual coding and whether its records
// extrapolate positions quadratically (SetCoding's).
func (lc *Coder) Coding() (wire.Coding, bool) { return lc.coding, lc.quad }

// GroupMasks returns the changed groups of each component of the last
// DeltaMasks' record (for bit accounting; valid until the next).
func (lc *Coder) GroupMasks() []uint64 { return lc.gmasks }

// CompBody returns the body bits of each component of the last DeltaBody's
// record, with Account set (valid until the next).
func (lc *Coder) CompBody() []uint32 { return lc.compBody }

// deltaBody writes the residuals of the changed groups (lc.gmasks) of each
// component of set: against the extrapolation through v.Prev (x.Extrap)
// when v.Prev is not nil, else against v.Base. With v.Third, positions are
// extrapolated quadratically when x.Quad, and otherwise it only measures
// what that would save. x.st gets the residuals for the choice of the
// coding, x.res what it measured; lc.compBody each component's body bits
// when accounting. It reports false, with part of the body written, when a
// residual is too large to code.
func (lc *Coder) deltaBody(set uint64, v *codec.Views, x *bodyCtx) bool {
	w := &lc.Arena
	x.plainK = [wire.NumClasses]uint{uint(lc.coding.Plain[wire.ClassWorld]), uint(lc.coding.Plain[wire.ClassOther])}
	x.third = v.Prev != nil && v.Third != nil
	*x.st = Stats{}
	x.res = Result{}
	lc.compBody = lc.compBody[:0]
	if set != 0 && set&(set-1) == 0 && lc.ops[bits.TrailingZeros64(set)].pose { // (one pose: no slicing)
		start := w.BitLen()
		if !lc.poseBody(lc.gmasks[0], v, x) {
			return false
		}
		if lc.Account {
			lc.compBody = append(lc.compBody, uint32(w.BitLen()-start))
		}
		return true
	}
	off, ci := 0, 0
	for s := set; s != 0; s &= s - 1 {
		po := &lc.ops[bits.TrailingZeros64(s)]
		cv := v.Comp(off, po.n)
		off += po.n
		start := w.BitLen()
		var ok bool
		if po.pose {
			ok = lc.poseBody(lc.gmasks[ci], &cv, x)
		} else {
			ok = lc.groupsBody(po, lc.gmasks[ci], &cv, x)
		}
		if !ok {
			return false
		}
		if lc.Account {
			lc.compBody = append(lc.compBody, uint32(w.BitLen()-start))
		}
		ci++
	}
	return true
}

// groupsBody is deltaBody for the changed groups gm of one component of
// plan po (v its lanes), lane by lane.
func (lc *Coder) groupsBody(po *planOps, gm uint64, v *codec.Views, x *bodyCtx) bool {
	w := &lc.Arena
	for ; gm != 0; gm &= gm - 1 {
		g := &po.groups[bits.TrailingZeros64(gm)]
		// A quaternion whose largest component changed is not
		// extrapolated.
		x.pred = v.Prev != nil && (g.qi < 0 || v.Prev[g.qi] == v.Base[g.qi])
		for l := int(g.first); l < int(g.end); l++ {
			switch op := po.lanes[l]; op.kind {
			case opBit, opRest:
				w.PutBits(v.Cur[l]&1, 1)
				x.res.Plain++
				if op.kind == opRest && v.Cur[l] != 0 {
					l = int(g.end) // axes implied zero
				}
			case opQuatIdx:
				if !lc.quatIndex(v.Base[l], v.Cur[l], x) {
					return false
				}
			default:
				var p, t uint64
				if x.pred {
					p = v.Prev[l]
					if x.third {
						t = v.Third[l]
					}
				}
				if !lc.numLane(op, v.Base[l], v.Cur[l], p, t, x) {
					return false
				}
			}
		}
	}
	return true
}

// quatIndex writes the residual of a quaternion's index from b to c: at
// order 0, never extrapolated nor counted for the coding.
func (lc *Coder) quatIndex(b, c uint64, x *bodyCtx) bool {
	z := bitio.ZigZag(int64(c - b))
	if z >= 1<<62 {
		return false
	}
	x.res.Plain += bitio.RiceLen(z, 0)
	lc.putRice(z, 0)
	return true
}

// numLane writes the residual of a numeric lane (operation op) from its
// value b at the baseline to its value c: with x.pred, against its linear
// extrapolation through its value p in the prediction view; for a world
// lane with x.third too, against the quadratic one through its value t in
// the third view when x.Quad (else that is only measured). Its Rice order
// is the class's plain one without prediction, else the one of the step's
// context. The pose kernel and the general path both code their lanes
// here, from values rather than views: no bounds checks per lane.
func (lc *Coder) numLane(op laneOp, b, c, p, t uint64, x *bodyCtx) bool {
	z1 := bitio.ZigZag(op.delta(b, c))
	if z1 >= 1<<62 {
		return false
	}
	cl := int(op.cl & 1)
	k1 := x.plainK[cl]
	x.res.Plain += bitio.RiceLen(z1, k1)
	z, k, ctx := z1, k1, -1
	if x.pred {
		d := op.delta(p, b)
		var step int64
		if d <= 1<<40 && d >= -(1<<40) { // (else a jump, not motion)
			step = d * x.Num
			if x.Den != 1 { // (the views are usually consecutive: no division)
				step = codec.DivRound(step, x.Den)
			}
			z = bitio.ZigZag(op.delta(b+uint64(step), c))
		}
		ctx = codec.StepCtx(step)
		k = uint(lc.orders[cl][ctx&ordersMask])
		if op.kind == opWorld && x.third {
			qs := codec.QuadFrom(d, int64(p-t), x.Num, x.Den, step)
			zq := bitio.ZigZag(int64(c - (b + uint64(qs))))
			cq := codec.StepCtx(qs)
			kq := uint(lc.orders[wire.ClassWorld][cq&ordersMask])
			if zq < 1<<62 && z < 1<<62 {
				x.res.QuadGain += bitio.RiceLen(z, k) - bitio.RiceLen(zq, kq)
				x.res.QuadN++
			}
			if x.Quad {
				z, k, ctx = zq, kq, cq
			}
		}
		if z >= 1<<62 {
			return false
		}
	}
	if code, nb, short := bitio.RiceCode(z, k); short { // (putRice, which does not inline)
		lc.Arena.PutBits(code, nb)
	} else {
		lc.Arena.WriteRice(z, k)
	}
	x.st.add(cl, ctx, z)
	return true
}
