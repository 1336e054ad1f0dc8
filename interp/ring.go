package interp

import "math"

// ticked is an entry of a ring: something stamped with a network tick.
type ticked[T any] interface {
	*T
	tickOf() uint32
}

// ring holds up to BufferSize entries sorted by tick (serial-number order),
// oldest at head: the storage and the search of [Buffer] and [Track].
type ring[T any, P ticked[T]] struct {
	items [BufferSize]T
	head  uint8
	n     uint8
}

func (r *ring[T, P]) at(i int) P { return &r.items[(int(r.head)+i)%BufferSize] }

func (r *ring[T, P]) tick(i int) uint32 { return P(r.at(i)).tickOf() }

// newest returns the newest tick held; false if empty.
func (r *ring[T, P]) newest() (uint32, bool) {
	if r.n == 0 {
		return 0, false
	}
	return r.tick(int(r.n) - 1), true
}

// put returns the entry in which to store the state of tick, in order: the
// entry already holding tick (replace), or a new one. A full ring drops its
// oldest entry to make room (returned in old, with evicted set) unless tick
// is older than everything held: then ok is false and nothing changes.
// O(1) for a newest tick, O(BufferSize) for a late one.
func (r *ring[T, P]) put(tick uint32) (e P, old T, evicted, ok bool) {
	n := int(r.n)
	if n == 0 {
		r.head, r.n = 0, 1
		return r.at(0), old, false, true
	}
	if int32(tick-r.tick(n-1)) > 0 { // the common case: newest
		if n == BufferSize {
			old, evicted = r.items[r.head], true
			r.head = uint8((int(r.head) + 1) % BufferSize)
			return r.at(n - 1), old, true, true
		}
		r.n++
		return r.at(n), old, false, true
	}
	// Late: find the newest entry not newer than tick.
	i := n - 1
	for ; i >= 0; i-- {
		d := int32(tick - r.tick(i))
		if d == 0 {
			return r.at(i), old, false, true
		}
		if d > 0 {
			break
		}
	}
	if n == BufferSize {
		if i < 0 {
			return nil, old, false, false // older than everything in a full ring
		}
		// Drop the oldest, shift entries 1..i down, insert at i.
		old, evicted = *r.at(0), true
		for j := 0; j < i; j++ {
			*r.at(j) = *r.at(j + 1)
		}
		return r.at(i), old, true, true
	}
	// Shift entries i+1..n-1 up, insert at i+1.
	for j := n; j > i+1; j-- {
		*r.at(j) = *r.at(j - 1)
	}
	r.n++
	return r.at(i + 1), old, false, true
}

// sample finds renderTick (a fractional tick; only its value modulo 2³²
// matters) among the entries: the state there is a + t·(b − a). Between two
// entries t is in [0, 1]; past the newest, a and b are the two newest and
// t > 1 extrapolates, for at most maxExtrapTicks ticks (≤ 0: never), then
// holds at that limit; before the oldest, on an entry, or with one entry,
// a == b. ModeEmpty: nothing held (a and b nil). O(k) in the entries newer
// than renderTick.
func (r *ring[T, P]) sample(renderTick, maxExtrapTicks float64) (a, b P, t float64, mode Mode) {
	n := int(r.n)
	if n == 0 {
		return nil, nil, 0, ModeEmpty
	}
	fl := math.Floor(renderTick)
	frac := renderTick - fl
	base := uint32(int64(fl)) // render tick modulo 2³²
	newest := r.at(n - 1)
	if d := float64(int32(base-newest.tickOf())) + frac; d >= 0 {
		if d == 0 {
			return newest, newest, 0, ModeInterpolating
		}
		if n == 1 || maxExtrapTicks <= 0 {
			return newest, newest, 0, ModeHolding
		}
		mode := ModeExtrapolating
		if d > maxExtrapTicks {
			d, mode = maxExtrapTicks, ModeHolding
		}
		prev := r.at(n - 2)
		return prev, newest, 1 + d/float64(newest.tickOf()-prev.tickOf()), mode
	}
	for i := n - 2; i >= 0; i-- {
		a := r.at(i)
		if d := float64(int32(base-a.tickOf())) + frac; d >= 0 {
			next := r.at(i + 1)
			return a, next, d / float64(next.tickOf()-a.tickOf()), ModeInterpolating
		}
	}
	oldest := r.at(0)
	return oldest, oldest, 0, ModeHolding
}
