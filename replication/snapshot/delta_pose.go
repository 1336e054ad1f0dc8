package snapshot

import "github.com/archenet/archenet/replication/bitio"

// poseLanes is the number of lanes of a pose: X, Y, Z, the quaternion's
// index and its three kept components.
const poseLanes = 7

// poseGroups returns the groups of a pose whose lanes differ in a and b
// (branch-free: poses change at random).
func poseGroups(a, b []uint64) uint64 {
	x, y := (*[poseLanes]uint64)(a), (*[poseLanes]uint64)(b)
	nz := func(v uint64) uint64 { return (v | -v) >> 63 }
	rot := (x[3] ^ y[3]) | (x[4] ^ y[4]) | (x[5] ^ y[5]) | (x[6] ^ y[6])
	return nz(x[0]^y[0]) | nz(x[1]^y[1])<<1 | nz(x[2]^y[2])<<2 | nz(rot)<<3
}

// poseMasks is deltaMasks for a record of one pose component that every
// client sees whole: its four group bits, never compacted.
func (e *Encoder) poseMasks(base, prev, cur []uint64) (mask uint64, maskPred bool) {
	gm := poseGroups(base, cur)
	maskPred = prev != nil && poseGroups(prev, base) == gm
	e.gmasks = append(e.gmasks[:0], gm)
	if gm == 0 {
		e.arena.PutBits(0, 1)
		return 0, maskPred
	}
	mask = 1 | gm<<1
	e.arena.PutBits(mask, 5)
	return mask, maskPred
}

// poseBody is groupsBody for a pose component (planOps.pose), with its
// layout fixed: the same residuals, orders, bits and measurements (r, st),
// without the per-lane dispatch. gm is the component's changed groups:
// bits 0–2 the coordinates, bit 3 the rotation.
func (e *Encoder) poseBody(gm uint64, b, c, v2, w3 []uint64, quad bool, num, den int64, plainK [numClasses]uint, r *bodyResult, st *recStats) bool {
	bv, cv := (*[poseLanes]uint64)(b), (*[poseLanes]uint64)(c)
	var pv, qv *[poseLanes]uint64
	if v2 != nil {
		pv = (*[poseLanes]uint64)(v2)
		if w3 != nil {
			qv = (*[poseLanes]uint64)(w3)
		}
	}
	for l := range 3 {
		if gm>>l&1 != 0 && !e.poseLane(classWorld, bv[l], cv[l], pv, qv, l, quad, num, den, plainK, r, st) {
			return false
		}
	}
	if gm&(1<<3) == 0 {
		return true
	}
	// The rotation: its index at order 0, never extrapolated nor counted;
	// its components extrapolated unless the index changed.
	z1 := bitio.ZigZag(int64(cv[3] - bv[3]))
	if z1 >= 1<<62 {
		return false
	}
	r.plain += bitio.RiceLen(z1, 0)
	e.putRice(z1, 0)
	if pv != nil && pv[3] != bv[3] {
		pv = nil
	}
	for l := 4; l < poseLanes; l++ {
		if !e.poseLane(classOther, bv[l], cv[l], pv, nil, l, quad, num, den, plainK, r, st) {
			return false
		}
	}
	return true
}

// poseLane writes the residual of a numeric lane l of a pose from b to c:
// extrapolated linearly through pv[l] when pv is set, and quadratically
// through qv[l] too when qv is set and quad (else that is only measured).
// It is laneOp.linear and bodyResult.quadLane written out for a lane that
// is not an angle.
func (e *Encoder) poseLane(cl int, b, c uint64, pv, qv *[poseLanes]uint64, l int, quad bool, num, den int64, plainK [numClasses]uint, r *bodyResult, st *recStats) bool {
	z1 := bitio.ZigZag(int64(c - b))
	if z1 >= 1<<62 {
		return false
	}
	k1 := plainK[cl]
	r.plain += bitio.RiceLen(z1, k1)
	z, k, ctx := z1, k1, -1
	if pv != nil {
		v2 := pv[l]
		d := int64(b - v2)
		var step int64
		if d <= 1<<40 && d >= -(1<<40) {
			step = d * num
			if den != 1 {
				step = divRound(step, den)
			}
			z = bitio.ZigZag(int64(c - (b + uint64(step))))
		}
		ctx = stepCtx(step)
		k = e.coding.orderCtx(cl, ctx)
		if qv != nil {
			dc := int64(v2 - qv[l])
			qs := step // (quadFrom, written out)
			if d <= 1<<40 && d >= -(1<<40) && dc <= 1<<40 && dc >= -(1<<40) && num <= 256 && den <= 256 {
				if den == 1 {
					qs = halfRound((3*d-dc)*num + (d-dc)*num*num)
				} else {
					qs = divRound((3*d-dc)*num*den+(d-dc)*num*num, 2*den*den)
				}
			}
			zq := bitio.ZigZag(int64(c - (b + uint64(qs))))
			cq := stepCtx(qs)
			kq := e.coding.orderCtx(classWorld, cq)
			if zq < 1<<62 && z < 1<<62 {
				r.quadGain += bitio.RiceLen(z, k) - bitio.RiceLen(zq, kq)
				r.quadN++
			}
			if quad {
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
	st.add(cl, ctx, z)
	return true
}

// putRice writes z's Rice code of order k to the arena. It does not inline
// (cost 204): the per-lane loops write it out.
func (e *Encoder) putRice(z uint64, k uint) {
	if code, nb, short := bitio.RiceCode(z, k); short {
		e.arena.PutBits(code, nb)
	} else {
		e.arena.WriteRice(z, k)
	}
}
