package codec

import (
	"fmt"

	"github.com/archenet/archenet/replication/bitio"
	"github.com/archenet/archenet/replication/internal/wire"
	"github.com/archenet/archenet/replication/schema"
)

// PoseLanes is the number of lanes of a pose (IsPose): X, Y, Z, the
// quaternion's index and its three kept components.
const PoseLanes = 7

// IsPose reports whether p is laid out as schema compiles a pose (e.g.
// components.Transform): three world lanes, each its own group, then one
// group of a quaternion index and three numeric lanes that are neither
// angles nor world coordinates. A delta record of such a component alone
// is read by ReadPoseBody.
func IsPose(p *schema.Plan) bool {
	lanes, groups := p.Lanes(), p.Groups()
	if len(lanes) != PoseLanes || len(groups) != 4 {
		return false
	}
	for l, ln := range lanes {
		switch {
		case l < 3:
			if ln.Kind != schema.LaneWorld {
				return false
			}
		case l == 3:
			if ln.Kind != schema.LaneQuatIndex {
				return false
			}
		default:
			switch ln.Kind {
			case schema.LaneWorld, schema.LaneQuatIndex, schema.LaneAngle, schema.LaneBool, schema.LaneRest:
				return false
			}
		}
	}
	for gi, g := range groups[:3] {
		if g.First != gi || g.Count != 1 {
			return false
		}
	}
	return groups[3].First == 3 && groups[3].Count == 4
}

// PoseGroups returns the groups of a pose (IsPose) whose lanes differ in a
// and b: ChangedGroups for an owner, branch-free (poses change at random).
func PoseGroups(a, b []uint64) uint64 {
	x, y := (*[PoseLanes]uint64)(a), (*[PoseLanes]uint64)(b)
	nz := func(v uint64) uint64 { return (v | -v) >> 63 }
	rot := (x[3] ^ y[3]) | (x[4] ^ y[4]) | (x[5] ^ y[5]) | (x[6] ^ y[6])
	return nz(x[0]^y[0]) | nz(x[1]^y[1])<<1 | nz(x[2]^y[2])<<2 | nz(rot)<<3
}

// ReadPoseBody reads the body of a delta record of one pose component (p,
// IsPose) whose changed groups are gm into cur, which holds the baseline's
// values: Predict (v.Prev not nil, with x) or PlainOrders, then
// ReadDeltaBody, in one pass over the pose's lanes without the per-lane
// dispatch, the predicted lanes and the orders in between. Same values,
// bits read and errors.
func ReadPoseBody(r *bitio.Reader, p *schema.Plan, gm uint64, v *Views, x Extrap, cod *wire.Coding, cur []uint64) error {
	lanes := (*[PoseLanes]schema.Lane)(p.Lanes())
	a, c := (*[PoseLanes]uint64)(v.Base), (*[PoseLanes]uint64)(cur)
	var b, t *[PoseLanes]uint64
	if v.Prev != nil {
		b = (*[PoseLanes]uint64)(v.Prev)
		if v.Third != nil {
			t = (*[PoseLanes]uint64)(v.Third)
		}
	}
	for l := range PoseLanes {
		g := min(l, 3) // the lane's group
		if gm>>g&1 == 0 {
			if l < 3 {
				continue
			}
			break
		}
		cl := wire.ClassOther
		if l < 3 {
			cl = wire.ClassWorld
		}
		pred, k := a[l], uint(0)
		switch {
		case l == 3: // the quaternion's index: order 0, not extrapolated
		case b == nil || l > 3 && a[3] != b[3]: // unpredicted, or a quaternion whose index changed
			k = uint(cod.Plain[cl])
		default:
			d := int64(a[l] - b[l])
			var step int64
			if d <= 1<<40 && d >= -(1<<40) { // else a jump, not motion
				step = DivRound(d*x.Num, x.Den)
			}
			if t != nil && l < 3 {
				step = QuadFrom(d, int64(b[l]-t[l]), x.Num, x.Den, step)
			}
			pred = a[l] + uint64(step)
			k = uint(cod.OrderCtx(cl, StepCtx(step)))
		}
		val, ok := lanes[l].Apply(pred, bitio.UnZigZag(r.ReadRice(k)))
		if !ok && r.Err() == nil {
			r.SetErr(fmt.Errorf("%w: %s.%s delta out of range", wire.ErrCorrupt, p.Name, p.Groups()[g].Name))
		}
		c[l] = val
	}
	return r.Err()
}
