package lanes

import (
	"github.com/archenet/archenet/replication/bitio"
	"github.com/archenet/archenet/replication/internal/codec"
)

// poseLanes is the number of lanes of a pose: X, Y, Z, the quaternion's
// index and its three kept components.
const poseLanes = codec.PoseLanes

// poseMasks is deltaMasks for a record of one pose component that every
// client sees whole: its four group bits, never compacted.
func (lc *Coder) poseMasks(base, prev, cur []uint64) (mask uint64, maskPred bool) {
	gm := codec.PoseGroups(base, cur)
	maskPred = prev != nil && codec.PoseGroups(prev, base) == gm
	lc.gmasks = lc.gmasks[:0] // (as deltaMasks: in place, no pointer stored, no GC write barrier)
	lc.gmasks = append(lc.gmasks, gm)
	if gm == 0 {
		lc.Arena.PutBits(0, 1)
		return 0, maskPred
	}
	mask = 1 | gm<<1
	lc.Arena.PutBits(mask, 5)
	return mask, maskPred
}

// poseBody is groupsBody for a pose component (planOps.pose), with its
// layout fixed: the same residuals, orders, bits and measurements, without
// the per-lane dispatch. gm is the component's changed groups: bits 0–2
// the coordinates, bit 3 the rotation.
func (lc *Coder) poseBody(gm uint64, v *codec.Views, x *bodyCtx) bool {
	b, c := (*[poseLanes]uint64)(v.Base), (*[poseLanes]uint64)(v.Cur)
	var p, t *[poseLanes]uint64
	if x.pred = v.Prev != nil; x.pred {
		p = (*[poseLanes]uint64)(v.Prev)
		t = p // (read, never used, without a third view)
		if x.third {
			t = (*[poseLanes]uint64)(v.Third)
		}
	} else {
		p, t = c, c // (read, never used)
	}
	for l := range 3 {
		if gm>>l&1 != 0 && !lc.numLane(worldOp, b[l], c[l], p[l], t[l], x) {
			return false
		}
	}
	if gm&(1<<3) == 0 {
		return true
	}
	// The rotation: its index, then its components, extrapolated unless
	// the index changed.
	if !lc.quatIndex(b[3], c[3], x) {
		return false
	}
	x.pred = x.pred && p[3] == b[3]
	for l := 4; l < poseLanes; l++ {
		if !lc.numLane(numOp, b[l], c[l], p[l], t[l], x) {
			return false
		}
	}
	return true
}

// putRice writes z's Rice code of order k to the arena. It does not inline
// (cost 204): the per-lane loops write it out.
func (lc *Coder) putRice(z uint64, k uint) {
	if code, nb, short := bitio.RiceCode(z, k); short {
		lc.Arena.PutBits(code, nb)
	} else {
		lc.Arena.WriteRice(z, k)
	}
}
