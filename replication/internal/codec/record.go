package codec

import (
	"fmt"
	"math/bits"
	"slices"

	"github.com/archenet/archenet/replication/bitio"
	"github.com/archenet/archenet/replication/internal/entity"
	"github.com/archenet/archenet/replication/internal/wire"
	"github.com/archenet/archenet/replication/schema"
)

// Record kinds. On the wire, after the slot gap, a record of an entity the
// baseline view holds starts with a code of its kind and field masks: "1"
// delta with the predicted masks (for a predicted record), "01" delta
// repeating the previous delta's masks, "001" delta with its masks, "0001"
// full, "0000" removal. A record of an entity the baseline lacks is full,
// with no code.
const (
	KindDelta   = 0
	KindFull    = 1
	KindRemoval = 2
)

// MaxGen bounds generations on the wire (they are exp-Golomb coded).
const MaxGen = 1<<31 - 1

// WriteFull writes a full record body: generation, owner, component set and
// every component's full encoding.
func WriteFull(w *bitio.Writer, plans []*schema.Plan, m entity.Meta, lanes []uint64, owner bool) {
	w.WriteExpGolomb(uint64(m.Gen&MaxGen), 0)
	w.WriteExpGolomb(uint64(m.Owner), 0)
	w.WriteBits(m.Set, uint(len(plans)))
	off := 0
	for s := m.Set; s != 0; s &= s - 1 {
		p := plans[bits.TrailingZeros64(s)]
		n := p.NumLanes()
		p.Write(w, lanes[off:off+n], owner)
		off += n
	}
}

// ReadFull decodes a full record body into dst (appending lanes) and
// returns the meta. Owner-only fields are on the wire when the entity's
// owner is me (me ≠ 0); otherwise their lanes are zero.
func ReadFull(r *bitio.Reader, plans []*schema.Plan, me uint8, dst []uint64) (entity.Meta, []uint64, error) {
	var m entity.Meta
	g := r.ReadExpGolomb(0)
	if g > MaxGen {
		return m, dst, fmt.Errorf("%w: generation %d", wire.ErrCorrupt, g)
	}
	m.Gen = uint32(g)
	o := r.ReadExpGolomb(0)
	if o > 255 {
		return m, dst, fmt.Errorf("%w: owner %d", wire.ErrCorrupt, o)
	}
	m.Owner = uint8(o)
	m.Set = r.ReadBits(uint(len(plans)))
	if err := r.Err(); err != nil {
		return m, dst, err
	}
	if m.Set == 0 {
		return m, dst, fmt.Errorf("%w: entity with no components", wire.ErrCorrupt)
	}
	owner := me != 0 && m.Owner == me
	for s := m.Set; s != 0; s &= s - 1 {
		p := plans[bits.TrailingZeros64(s)]
		start := len(dst)
		for i := 0; i < p.NumLanes(); i++ {
			dst = append(dst, 0)
		}
		if err := p.Read(r, dst[start:], owner); err != nil {
			return m, dst, err
		}
	}
	return m, dst, nil
}

// ReadMasks reads the field masks of a delta record for set: per component
// a "changed" bit and, if set, one bit per group (owner-only groups only
// when owner). It returns the masks and, when the mask section is at most 64
// bits, its raw value and length (for "same masks as the previous record").
func ReadMasks(r *bitio.Reader, plans []*schema.Plan, set uint64, owner bool, masks *[schema.MaxComponents]uint64) (raw uint64, nbits int) {
	ci := 0
	put := func(b uint64) {
		if nbits < 64 {
			raw |= b << nbits
		}
		nbits++
	}
	for s := set; s != 0; s &= s - 1 {
		p := plans[bits.TrailingZeros64(s)]
		masks[ci] = 0
		ch := r.ReadBits(1)
		put(ch)
		if ch == 1 {
			var mask uint64
			groups := p.Groups()
			for gi := range groups {
				if !owner && groups[gi].OwnerOnly {
					continue
				}
				b := r.ReadBits(1)
				put(b)
				mask |= b << gi
			}
			if mask == 0 {
				r.SetErr(fmt.Errorf("%w: changed component with an empty field mask", wire.ErrCorrupt))
			}
			masks[ci] = mask
		}
		ci++
	}
	return raw, nbits
}

// Shape is what a delta record's body holds: residuals for the groups
// masks selects (one word per component of set, as ReadMasks gives them;
// nil: all groups).
type Shape struct {
	Set   uint64
	Masks []uint64
}

// LanePred is what a record's residuals are read against: each lane's
// predicted value and the Rice order of its residual.
type LanePred struct {
	Lanes  []uint64
	Orders []uint8
}

// ReadDeltaBody reads a delta record's residuals (for the groups sh
// selects) into cur: each numeric lane is its prediction plus its residual,
// read at the lane's order.
func ReadDeltaBody(r *bitio.Reader, plans []*schema.Plan, sh *Shape, cur []uint64, pred *LanePred) error {
	off := 0
	ci := 0
	for s := sh.Set; s != 0; s &= s - 1 {
		p := plans[bits.TrailingZeros64(s)]
		n := p.NumLanes()
		c, pr, ks := cur[off:off+n], pred.Lanes[off:off+n], pred.Orders[off:off+n]
		off += n
		mask := sh.Masks[ci]
		ci++
		if mask == 0 {
			continue
		}
		lanes := p.Lanes()
		groups := p.Groups()
		for gi := range groups {
			if mask>>gi&1 == 0 {
				continue
			}
			g := &groups[gi]
			for l := g.First; l < g.First+g.Count; l++ {
				ln := &lanes[l]
				switch ln.Kind {
				case schema.LaneBool:
					c[l] = r.ReadBits(1)
				case schema.LaneRest:
					c[l] = r.ReadBits(1)
					if c[l] != 0 {
						for a := l + 1; a < g.First+g.Count; a++ {
							c[a] = lanes[a].Zero
						}
						l = g.First + g.Count
					}
				default:
					d := bitio.UnZigZag(r.ReadRice(uint(ks[l])))
					v, ok := ln.Apply(pr[l], d)
					if !ok && r.Err() == nil {
						r.SetErr(fmt.Errorf("%w: %s.%s delta out of range", wire.ErrCorrupt, p.Name, g.Name))
					}
					c[l] = v
				}
			}
		}
		if r.Err() != nil {
			return r.Err()
		}
	}
	return r.Err()
}

// Predict fills out with the linear extrapolation of each lane from its
// value in an older view (v.Prev, view tick t2) through its value in the
// baseline view (v.Base, tick t1) to tick t: base + round((base − prev)·(t − t1)/(t1 − t2)),
// x.Num = t − t1 and x.Den = t1 − t2, in exact integer arithmetic (wrapping
// for angles) so encoder and decoder agree bit for bit. Bools, rest flags
// and quaternion indexes are not extrapolated (out = base), nor are the
// lanes of a quaternion whose dropped component differs between the two
// views. It fills out.Orders with each lane's residual order under cod:
// from the extrapolation's step for extrapolated lanes (a jump counts as a
// zero step), the class's plain order for the lanes of a quaternion that
// is not, 0 for quaternion indexes (see wire.Coding).
//
// With v.Third (the values in the view den ticks before prev's), world
// lanes are extrapolated quadratically instead (QuadFrom).
//
// Only the groups sh selects are filled: a record carries no residual for
// the others, which keep out's values.
func Predict(plans []*schema.Plan, sh *Shape, v *Views, x Extrap, cod *wire.Coding, out *LanePred) {
	off, ci := 0, 0
	for s := sh.Set; s != 0; s &= s - 1 {
		p := plans[bits.TrailingZeros64(s)]
		n := p.NumLanes()
		a, b, o, ks := v.Base[off:off+n], v.Prev[off:off+n], out.Lanes[off:off+n], out.Orders[off:off+n]
		var c []uint64
		if v.Third != nil {
			c = v.Third[off : off+n]
		}
		off += n
		mask := ^uint64(0)
		if sh.Masks != nil {
			mask = sh.Masks[ci]
		}
		ci++
		lanes := p.Lanes()
		groups := p.Groups()
		for gi := range groups {
			if mask>>gi&1 == 0 {
				continue
			}
			g := &groups[gi]
			skip := false
			for l := g.First; l < g.First+g.Count; l++ {
				if lanes[l].Kind == schema.LaneQuatIndex && a[l] != b[l] {
					skip = true
				}
			}
			for l := g.First; l < g.First+g.Count; l++ {
				ln := &lanes[l]
				switch {
				case ln.Kind == schema.LaneBool, ln.Kind == schema.LaneRest, ln.Kind == schema.LaneQuatIndex:
					o[l], ks[l] = a[l], 0
				case skip:
					o[l], ks[l] = a[l], cod.Plain[wire.LaneClass(ln.Kind)]
				default:
					d := ln.Delta(b[l], a[l])
					var step int64
					if d <= 1<<40 && d >= -(1<<40) { // else a jump, not motion
						step = DivRound(d*x.Num, x.Den)
					}
					if c != nil && ln.Kind == schema.LaneWorld {
						step = QuadFrom(d, ln.Delta(c[l], b[l]), x.Num, x.Den, step)
					}
					o[l] = a[l] + uint64(step)
					ks[l] = uint8(cod.OrderCtx(wire.LaneClass(ln.Kind), StepCtx(step)))
				}
			}
		}
	}
}

// HalfRound returns x/2 rounded to nearest, ties away from zero.
func HalfRound(x int64) int64 {
	if x >= 0 {
		return (x + 1) >> 1
	}
	return -((-x + 1) >> 1)
}

// DivRound returns a/b rounded to nearest, ties away from zero (b > 0,
// |a| < 2^62). The views a prediction spans are usually 2 or 4 ticks apart:
// a power of two is a shift, which takes a cycle where a division takes tens.
func DivRound(a, b int64) int64 {
	if b&(b-1) == 0 {
		s := uint(bits.TrailingZeros64(uint64(b)))
		if a >= 0 {
			return (a + b>>1) >> s
		}
		return -((-a + b>>1) >> s)
	}
	if a >= 0 {
		return (a + b/2) / b
	}
	return -((-a + b/2) / b)
}

// PlainOrders fills orders with each lane's residual order for a record
// coded against the baseline alone: the class's plain order (0 for quaternion
// indexes, bools and rest flags).
func PlainOrders(plans []*schema.Plan, set uint64, cod *wire.Coding, orders []uint8) {
	off := 0
	for s := set; s != 0; s &= s - 1 {
		p := plans[bits.TrailingZeros64(s)]
		for l := range p.Lanes() {
			ln := &p.Lanes()[l]
			switch ln.Kind {
			case schema.LaneBool, schema.LaneRest, schema.LaneQuatIndex:
				orders[off+l] = 0
			default:
				orders[off+l] = cod.Plain[wire.LaneClass(ln.Kind)]
			}
		}
		off += p.NumLanes()
	}
}

// QuadFrom returns the step of a world lane's quadratic extrapolation num
// ticks past its value a, through its values b and c den and 2·den ticks
// before a, from its last two deltas db = a − b and dc = b − c: velocity
// (3a − 4b + c)/(2·den) and acceleration (a − 2b + c)/den², in exact
// integer arithmetic. Views whose values jump (more than 2^40 steps apart)
// or lie more than 256 ticks apart give the linear step lin.
func QuadFrom(db, dc, num, den, lin int64) int64 {
	if db > 1<<40 || db < -(1<<40) || dc > 1<<40 || dc < -(1<<40) || num > 256 || den > 256 {
		return lin // (and no overflow below: |terms| < 2^59)
	}
	if den == 1 { // consecutive views, the common case: no division
		return HalfRound((3*db-dc)*num + (db-dc)*num*num)
	}
	return DivRound((3*db-dc)*num*den+(db-dc)*num*num, 2*den*den)
}

// sameGroup reports whether group g's lanes are equal in a and b.
func sameGroup(g *schema.Group, a, b []uint64) bool {
	if g.Count == 1 {
		return a[g.First] == b[g.First]
	}
	return slices.Equal(a[g.First:g.First+g.Count], b[g.First:g.First+g.Count])
}

// ChangedGroups returns the groups of p whose lanes differ between a and b
// (owner-only groups only when owner): a predicted record's field masks,
// which the receiver derives from its views.
func ChangedGroups(p *schema.Plan, a, b []uint64, owner bool) uint64 {
	var gm uint64
	groups := p.Groups()
	for gi := range groups {
		g := &groups[gi]
		if !owner && g.OwnerOnly {
			continue
		}
		if !sameGroup(g, a, b) {
			gm |= 1 << gi
		}
	}
	return gm
}
