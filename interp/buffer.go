package interp

import (
	"math"

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

// Buffer is a snapshot interpolation buffer for one entity: the last
// [BufferSize] authoritative states, ordered by server network tick. It is a
// fixed-size value (about 1 KiB) with no heap allocation, meant to be used
// directly as an arche component; its zero value is an empty buffer.
//
// Ticks are uint32 network ticks compared with serial-number arithmetic
// (RFC 1982): a tick is newer than another if it is ahead by less than 2³¹,
// so ticks may wrap around.
type Buffer struct {
	snaps [BufferSize]Snapshot // ring, oldest at head, sorted by tick
	head  uint8
	n     uint8
}

func (b *Buffer) at(i int) *Snapshot { return &b.snaps[(int(b.head)+i)%BufferSize] }

// Len returns the number of snapshots held.
func (b *Buffer) Len() int { return int(b.n) }

// At returns the i-th snapshot, oldest first. Panics if i is out of [0, Len).
func (b *Buffer) At(i int) Snapshot {
	if i < 0 || i >= int(b.n) {
		panic("interp: Buffer.At index out of range")
	}
	return *b.at(i)
}

// Newest returns the newest tick held and false if the buffer is empty.
func (b *Buffer) Newest() (uint32, bool) {
	if b.n == 0 {
		return 0, false
	}
	return b.at(int(b.n) - 1).Tick, true
}

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
	s := Snapshot{Tick: tick, Pos: pos, Rot: rot.Normalize()}
	n := int(b.n)
	if n == 0 {
		b.head, b.n = 0, 1
		b.snaps[0] = s
		return true
	}
	if d := int32(tick - b.at(n-1).Tick); d > 0 { // the common case: newest
		if n == BufferSize {
			b.snaps[b.head] = s
			b.head = uint8((int(b.head) + 1) % BufferSize)
		} else {
			*b.at(n) = s
			b.n++
		}
		return true
	}
	// Late: find the newest snapshot older than tick.
	i := n - 1
	for ; i >= 0; i-- {
		d := int32(tick - b.at(i).Tick)
		if d == 0 {
			*b.at(i) = s
			return true
		}
		if d > 0 {
			break
		}
	}
	if n == BufferSize {
		if i < 0 {
			return false // older than everything in a full buffer
		}
		// Drop the oldest, shift snapshots 1..i down, insert at i.
		for j := 0; j < i; j++ {
			*b.at(j) = *b.at(j + 1)
		}
		*b.at(i) = s
		return true
	}
	// Shift snapshots i+1..n-1 up, insert at i+1.
	for j := n; j > i+1; j-- {
		*b.at(j) = *b.at(j - 1)
	}
	*b.at(i + 1) = s
	b.n++
	return true
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
	n := int(b.n)
	if n == 0 {
		return components.Vec3{}, components.QuatIdentity(), ModeEmpty
	}
	fl := math.Floor(renderTick)
	frac := renderTick - fl
	base := uint32(int64(fl)) // render tick modulo 2³²
	newest := b.at(n - 1)
	if r := float64(int32(base-newest.Tick)) + frac; r >= 0 {
		if r == 0 {
			return newest.Pos, newest.Rot, ModeInterpolating
		}
		if n == 1 || maxExtrapTicks <= 0 {
			return newest.Pos, newest.Rot, ModeHolding
		}
		mode := ModeExtrapolating
		if r > maxExtrapTicks {
			r, mode = maxExtrapTicks, ModeHolding
		}
		prev := b.at(n - 2)
		t := 1 + r/float64(newest.Tick-prev.Tick)
		return components.Lerp(prev.Pos, newest.Pos, t), components.Slerp(prev.Rot, newest.Rot, t), mode
	}
	for i := n - 2; i >= 0; i-- {
		a := b.at(i)
		if r := float64(int32(base-a.Tick)) + frac; r >= 0 {
			next := b.at(i + 1)
			t := r / float64(next.Tick-a.Tick)
			return components.Lerp(a.Pos, next.Pos, t), components.Slerp(a.Rot, next.Rot, t), ModeInterpolating
		}
	}
	oldest := b.at(0)
	return oldest.Pos, oldest.Rot, ModeHolding
}
