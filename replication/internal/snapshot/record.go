package snapshot

import (
	"errors"
	"fmt"
	"math/bits"

	"github.com/archenet/archenet/replication/bitio"
	"github.com/archenet/archenet/replication/schema"
)

// Record kinds. On the wire, after the slot gap, a record of an entity the
// baseline view holds starts with a code of its kind and field masks: "1"
// delta with the predicted masks (for a predicted record), "01" delta
// repeating the previous delta's masks, "001" delta with its masks, "0001"
// full, "0000" removal. A record of an entity the baseline lacks is full,
// with no code.
const (
	kindDelta   = 0
	kindFull    = 1
	kindRemoval = 2
)

// ErrCorrupt is wrapped by errors for datagrams that decode to impossible
// content (a delta for an entity the baseline lacks, an unknown component).
var ErrCorrupt = errors.New("snapshot: corrupt datagram")

// maxGen bounds generations on the wire (they are exp-Golomb coded).
const maxGen = 1<<31 - 1

// writeFull writes a full record body: generation, owner, component set and
// every component's full encoding.
func writeFull(w *bitio.Writer, plans []*schema.Plan, m Meta, lanes []uint64, owner bool) {
	w.WriteExpGolomb(uint64(m.Gen&maxGen), 0)
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

// readFull decodes a full record body into dst (appending lanes) and
// returns the meta. Owner-only fields are on the wire when the entity's
// owner is me (me ≠ 0); otherwise their lanes are zero.
func readFull(r *bitio.Reader, plans []*schema.Plan, me uint8, dst []uint64) (Meta, []uint64, error) {
	var m Meta
	g := r.ReadExpGolomb(0)
	if g > maxGen {
		return m, dst, fmt.Errorf("%w: generation %d", ErrCorrupt, g)
	}
	m.Gen = uint32(g)
	o := r.ReadExpGolomb(0)
	if o > 255 {
		return m, dst, fmt.Errorf("%w: owner %d", ErrCorrupt, o)
	}
	m.Owner = uint8(o)
	m.Set = r.ReadBits(uint(len(plans)))
	if err := r.Err(); err != nil {
		return m, dst, err
	}
	if m.Set == 0 {
		return m, dst, fmt.Errorf("%w: entity with no components", ErrCorrupt)
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

// readMasks reads the field masks of a delta record for set: per component
// a "changed" bit and, if set, one bit per group (owner-only groups only
// when owner). It returns the masks and, when the mask section is at most 64
// bits, its raw value and length (for "same masks as the previous record").
func readMasks(r *bitio.Reader, plans []*schema.Plan, set uint64, owner bool, masks *[schema.MaxComponents]uint64) (raw uint64, nbits int) {
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
				r.SetErr(fmt.Errorf("%w: changed component with an empty field mask", ErrCorrupt))
			}
			masks[ci] = mask
		}
		ci++
	}
	return raw, nbits
}

// recShape is what a delta record's body holds: residuals for the groups
// masks selects (one word per component of set, as readMasks gives them;
// nil: all groups).
type recShape struct {
	set   uint64
	masks []uint64
}

// lanePred is what a record's residuals are read against: each lane's
// predicted value and the Rice order of its residual.
type lanePred struct {
	lanes  []uint64
	orders []uint8
}

// readDeltaBody reads a delta record's residuals (for the groups sh
// selects) into cur: each numeric lane is its prediction plus its residual,
// read at the lane's order.
func readDeltaBody(r *bitio.Reader, plans []*schema.Plan, sh *recShape, cur []uint64, pred *lanePred) error {
	off := 0
	ci := 0
	for s := sh.set; s != 0; s &= s - 1 {
		p := plans[bits.TrailingZeros64(s)]
		n := p.NumLanes()
		c, pr, ks := cur[off:off+n], pred.lanes[off:off+n], pred.orders[off:off+n]
		off += n
		mask := sh.masks[ci]
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
						r.SetErr(fmt.Errorf("%w: %s.%s delta out of range", ErrCorrupt, p.Name, g.Name))
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

// predict fills out with the linear extrapolation of each lane from its
// value in an older view (v.prev, view tick t2) through its value in the
// baseline view (v.base, tick t1) to tick t: base + round((base − prev)·(t − t1)/(t1 − t2)),
// x.num = t − t1 and x.den = t1 − t2, in exact integer arithmetic (wrapping
// for angles) so encoder and decoder agree bit for bit. Bools, rest flags
// and quaternion indexes are not extrapolated (out = base), nor are the
// lanes of a quaternion whose dropped component differs between the two
// views. It fills out.orders with each lane's residual order under cod:
// from the extrapolation's step for extrapolated lanes (a jump counts as a
// zero step), the class's plain order for the lanes of a quaternion that
// is not, 0 for quaternion indexes (see Coding).
//
// With v.third (the values in the view den ticks before prev's), world
// lanes are extrapolated quadratically instead (quadFrom).
//
// Only the groups sh selects are filled: a record carries no residual for
// the others, which keep out's values.
func predict(plans []*schema.Plan, sh *recShape, v *recViews, x extrap, cod *Coding, out *lanePred) {
	off, ci := 0, 0
	for s := sh.set; s != 0; s &= s - 1 {
		p := plans[bits.TrailingZeros64(s)]
		n := p.NumLanes()
		a, b, o, ks := v.base[off:off+n], v.prev[off:off+n], out.lanes[off:off+n], out.orders[off:off+n]
		var c []uint64
		if v.third != nil {
			c = v.third[off : off+n]
		}
		off += n
		mask := ^uint64(0)
		if sh.masks != nil {
			mask = sh.masks[ci]
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
					o[l], ks[l] = a[l], cod.Plain[laneClass(ln.Kind)]
				default:
					d := ln.Delta(b[l], a[l])
					var step int64
					if d <= 1<<40 && d >= -(1<<40) { // else a jump, not motion
						step = divRound(d*x.num, x.den)
					}
					if c != nil && ln.Kind == schema.LaneWorld {
						step = quadFrom(d, ln.Delta(c[l], b[l]), x.num, x.den, step)
					}
					o[l] = a[l] + uint64(step)
					ks[l] = uint8(cod.orderCtx(laneClass(ln.Kind), stepCtx(step)))
				}
			}
		}
	}
}

// halfRound returns x/2 rounded to nearest, ties away from zero.
func halfRound(x int64) int64 {
	if x >= 0 {
		return (x + 1) >> 1
	}
	return -((-x + 1) >> 1)
}

// divRound returns a/b rounded to nearest, ties away from zero (b > 0,
// |a| < 2^62). The views a prediction spans are usually 2 or 4 ticks apart:
// a power of two is a shift, which takes a cycle where a division takes tens.
func divRound(a, b int64) int64 {
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

// plainOrders fills orders with each lane's residual order for a record
// coded against the baseline alone: the class's plain order (0 for quaternion
// indexes, bools and rest flags).
func plainOrders(plans []*schema.Plan, set uint64, cod *Coding, orders []uint8) {
	off := 0
	for s := set; s != 0; s &= s - 1 {
		p := plans[bits.TrailingZeros64(s)]
		for l := range p.Lanes() {
			ln := &p.Lanes()[l]
			switch ln.Kind {
			case schema.LaneBool, schema.LaneRest, schema.LaneQuatIndex:
				orders[off+l] = 0
			default:
				orders[off+l] = cod.Plain[laneClass(ln.Kind)]
			}
		}
		off += p.NumLanes()
	}
}

// quadFrom returns the step of a world lane's quadratic extrapolation num
// ticks past its value a, through its values b and c den and 2·den ticks
// before a, from its last two deltas db = a − b and dc = b − c: velocity
// (3a − 4b + c)/(2·den) and acceleration (a − 2b + c)/den², in exact
// integer arithmetic. Views whose values jump (more than 2^40 steps apart)
// or lie more than 256 ticks apart give the linear step lin.
func quadFrom(db, dc, num, den, lin int64) int64 {
	if db > 1<<40 || db < -(1<<40) || dc > 1<<40 || dc < -(1<<40) || num > 256 || den > 256 {
		return lin // (and no overflow below: |terms| < 2^59)
	}
	if den == 1 { // consecutive views, the common case: no division
		return halfRound((3*db-dc)*num + (db-dc)*num*num)
	}
	return divRound((3*db-dc)*num*den+(db-dc)*num*num, 2*den*den)
}
