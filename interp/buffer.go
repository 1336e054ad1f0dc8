package interp

import (
	"github.com/archenet/archenet/components"
)

// BufferSize is the number of snapshots a [Buffer] holds: about half a
// second at 30 Hz, far more than the interpolation delay needs, leaving room
// for late packets.
const BufferSize = 16

// Mode says how [Buffer.Sample] produced its result.
type Mode uint8

const (
	// ModeEmpty: the buffer holds no snapshot; the result is meaningless.
	ModeEmpty Mode = iota
	// ModeInterpolating: the render tick lies between two snapshots (or on
	// one); the result is on the interpolated path.
	ModeInterpolating
	// ModeExtrapolating: the render tick is past the newest snapshot by no
	// more than the extrapolation limit; the result continues the motion of
	// the two newest snapshots.
	ModeExtrapolating
	// ModeHolding: the render tick is past the extrapolation limit (the
	// result stays at the limit), or before the oldest snapshot (the result
	// is the oldest snapshot), or only one snapshot is known.
	ModeHolding
)

// String returns the mode's name.
func (m Mode) String() string {
	switch m {
	case ModeEmpty:
		return "empty"
	case ModeInterpolating:
		return "interpolating"
	case ModeExtrapolating:
		return "extrapolating"
	case ModeHolding:
		return "holding"
	}
	return "Mode(?)"
}

// Snapshot is one authoritative state of an entity at a server network tick.
type Snapshot struct {
	Tick uint32
	Pos  components.Vec3
	Rot  components.Quat
}

// tickOf is the snapshot's tick (the ring's ordering key).
func (s *Snapshot) tickOf() uint32 { return s.Tick }

// Buffer is a snapshot interpolation buffer for one entity: the last
// [BufferSize] authoritative states, ordered by server network tick. It is a
// fixed-size value (about 1 KiB) with no heap allocation, meant to be used
// directly as an arche component; its zero value is an empty buffer.
//
// Ticks are uint32 network ticks compared with serial-number arithmetic
// (RFC 1982): a tick is newer than another if it is ahead by less than 2³¹,
// so ticks may wrap around.
type Buffer struct {
	r ring[Snapshot, *Snapshot]
}

// Len returns the number of snapshots held.
func (b *Buffer) Len() int { return int(b.r.n) }

// At returns the i-th snapshot, oldest first. Panics if i is out of [0, Len).
func (b *Buffer) At(i int) Snapshot {
	if i < 0 || i >= int(b.r.n) {
		panic("interp: Buffer.At index out of range")
	}
	return *b.r.at(i)
}

// Newest returns the newest tick held and false if the buffer is empty.
func (b *Buffer) Newest() (uint32, bool) { return b.r.newest() }

// Reset empties the buffer, e.g. after the entity teleported or respawned,
// so that the next snapshots are not interpolated from the old place.
func (b *Buffer) Reset() { *b = Buffer{} }

// Push stores the authoritative state of tick and reports whether it was
// stored. Snapshots may arrive in any order: a tick already held is replaced
// (a tick that comes in several datagrams is pushed again as the later ones
// complete it), and when the buffer is full a tick older than everything
// held is ignored as too old; otherwise a full buffer drops its oldest
// snapshot. rot is normalized (the zero quaternion becomes the
// identity). O(1) for in-order ticks, O(BufferSize) for late ones; never
// allocates.
func (b *Buffer) Push(tick uint32, pos components.Vec3, rot components.Quat) bool {
	e, _, _, ok := b.r.put(tick)
	if ok {
		*e = Snapshot{Tick: tick, Pos: pos, Rot: rot.Normalize()}
	}
	return ok
}

// Sample returns the entity's position and rotation at renderTick, a
// fractional network tick (see [Clock.RenderTick]; only its value modulo 2³²
// matters, so it may be an unwrapped tick count).
//
// Between two snapshots it interpolates linearly in position and by
// [components.Slerp] in rotation (constant angular speed), across any gap
// left by lost snapshots. Past the newest snapshot it extrapolates the
// motion of the two newest snapshots for at most maxExtrapTicks ticks and
// then holds at that limit, so a stalled stream never sends an entity
// flying. Before the oldest snapshot, or with a single snapshot, it holds
// that snapshot. maxExtrapTicks ≤ 0 disables extrapolation. On an empty
// buffer it returns the zero position, the identity rotation and
// [ModeEmpty].
//
// Allocation-free; O(k) in the number of snapshots newer than renderTick.
func (b *Buffer) Sample(renderTick, maxExtrapTicks float64) (components.Vec3, components.Quat, Mode) {
	a, c, t, mode := b.r.sample(renderTick, maxExtrapTicks)
	switch {
	case mode == ModeEmpty:
		return components.Vec3{}, components.QuatIdentity(), ModeEmpty
	case a == c:
		return a.Pos, a.Rot, mode
	}
	return components.Lerp(a.Pos, c.Pos, t), components.Slerp(a.Rot, c.Rot, t), mode
}
