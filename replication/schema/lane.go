package schema

import (
	"github.com/archenet/archenet/replication/internal/quant"
)

// LaneKind says how one quantized integer of a component is put on the wire.
type LaneKind uint8

// Lane kinds.
const (
	LaneFixed     LaneKind = iota // Bits bits, code ≤ Max (scalars, ints, raw floats)
	LaneAngle                     // Bits bits, wraps around: deltas are taken modulo 2^Bits
	LaneBool                      // 1 bit
	LaneUvarint                   // unsigned varint (untagged unsigned integers)
	LaneVarint                    // zigzag varint (untagged signed integers); value is an int64
	LaneWorld                     // large-world coordinate q (an int64): varint cell + CellBits offset
	LaneQuatIndex                 // 2 bits: which quaternion component was dropped
	LaneRest                      // 1 bit: velocity at rest; when 1 the next 3 lanes are not sent
	LaneRef                       // an entity reference (components.Ref): see RefLane
)

var laneKindNames = [...]string{"fixed", "angle", "bool", "uvarint", "varint", "world", "quatidx", "rest", "ref"}

// A LaneRef lane holds RefNone or RefLane(id) of the named entity's NetID.
// On the wire: EG(0) of index + 1 (0 = none); then the owner, 1 bit "owner
// 0" else 1 + 8 bits; then EG(0) of the generation. About 2·log2(index) + 3
// bits for a server-owned entity of generation 0.
const refNone = ^uint64(0)

// RefNone is the value of a LaneRef lane that names no entity.
const RefNone = refNone

// RefLane packs a NetID into a LaneRef lane value.
func RefLane(handle, gen uint32) uint64 { return uint64(gen)<<32 | uint64(handle) }

// String names the lane kind ("fixed", "angle", …).
func (k LaneKind) String() string {
	if int(k) < len(laneKindNames) {
		return laneKindNames[k]
	}
	return "lane?"
}

// Lane describes one quantized integer of a component: how wide it is on the
// wire, which values are valid, and how to take deltas of it. A component's
// quantized state is a []uint64 with one element per lane.
type Lane struct {
	Kind LaneKind
	// Bits is the fixed wire width (Fixed, Angle, Bool, QuatIndex, Rest) or
	// the in-cell offset width (World); 0 for varints.
	Bits uint8
	// Max is the largest valid code of a fixed-width lane, or the largest
	// value of a varint lane (as an int64 for Varint). A decoder treats a
	// larger value as corrupt.
	Max uint64
	// Min is the smallest valid value of a Varint lane.
	Min int64
	// Group is the index of the field group (the field-mask bit) the lane
	// belongs to.
	Group uint8
	// Zero is the code of a resting axis (velocity lanes after a Rest lane).
	Zero uint64
	// Grid is the grid of a LaneWorld lane.
	Grid quant.Grid
}

// Delta returns cur − base as a signed step count: modulo 2^Bits for angle
// lanes (the shortest way around), two's complement for signed lanes.
func (l *Lane) Delta(base, cur uint64) int64 {
	if l.Kind == LaneAngle {
		return AngleDelta(base, cur, l.Bits)
	}
	return int64(cur - base)
}

// AngleDelta is [Lane.Delta] of an angle lane of n bits (1 ≤ n ≤ 63): cur −
// base modulo 2^n, the shortest way around.
func AngleDelta(base, cur uint64, n uint8) int64 {
	n &= 63
	d := (cur - base) & (1<<n - 1)
	if d >= 1<<(n-1) {
		return int64(d) - int64(uint64(1)<<n)
	}
	return int64(d)
}

// Apply returns base + d, the inverse of [Lane.Delta]. ok is false when the
// result is not a valid code for the lane (a corrupt delta).
func (l *Lane) Apply(base uint64, d int64) (v uint64, ok bool) {
	v = base + uint64(d)
	switch l.Kind {
	case LaneAngle:
		return v & (uint64(1)<<l.Bits - 1), true
	case LaneWorld:
		s := int64(v)
		return v, s >= -quant.GridLimitSteps && s <= quant.GridLimitSteps
	case LaneVarint:
		s := int64(v)
		return v, s >= l.Min && s <= int64(l.Max)
	case LaneUvarint:
		return v, v <= l.Max
	default:
		return v, v <= l.Max
	}
}

// Group is a field of a component as the field mask sees it: one scalar
// leaf, or one composite (a quaternion, a velocity) spanning several lanes.
type Group struct {
	// Name is the field path, e.g. "Pos.X" or "Rot".
	Name string
	// First and Count select the group's lanes.
	First, Count int
	// OwnerOnly groups are sent only to the client that owns the entity.
	OwnerOnly bool
}
