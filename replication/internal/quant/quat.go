package quant

import (
	"fmt"
	"math"

	"github.com/archenet/archenet/components"
)

// Quat quantizes unit quaternions with the smallest-three scheme: the
// component of largest magnitude is dropped (its index takes 2 bits), the
// quaternion is negated if that component is negative (q and −q are the same
// rotation), and the other three, each within ±1/√2, are quantized with n
// bits. The receiver rebuilds the dropped one as √(1 − a² − b² − c²) and
// renormalizes. A rotation costs 2 + 3n bits.
//
// Tie-break: among components of equal magnitude the lowest index (x, y, z,
// w order) is dropped, so encoding is deterministic. The input is normalized
// first; a zero, NaN or infinite quaternion encodes as the identity.
//
// Worst-case error, with the error-minimizing rounding that Quantize does:
// [Quat.MaxError], 2·K·Δ radians with Δ = √2/(2ⁿ−2) the component step and
// K = 1.0538 — 0.3349° at 9 bits, 0.1671° at 10 bits. How it was obtained:
// to first order in Δ the 4-D error of the rebuilt quaternion is Δ·e on the
// three sent components (e their rounding errors in steps) and −Δ(c·e)/l on
// the rebuilt one (c the sent components, l the dropped one); Quantize takes
// the smallest of nearest rounding and its three single flips, and
// maximizing that minimum over all rotations and half-step offsets gives
// exactly Δ, i.e. 2Δ of rotation (at l = |c| = ½ and at the tie
// l = c₁ = 1/√2, offsets at half steps). More comes only from Dequantize's
// clamp, which keeps the rebuilt component the largest: at a near-tie
// between the dropped component and a sent one (both ≈ 0.5615, the other
// two ≈ ±0.4298 at half steps, the tied one ≈ 0.43 step off its code) the
// flip chosen for the unclamped rebuild ends clamped, and numerical
// maximization of that first-order model gives K = 1.05379. Adversarial
// search of Quantize/Dequantize themselves at 6–16 bits (scans of
// half-step offsets at near-ties, hill climbing from random and three-way
// tie starts) approaches the bound from below, up to 0.3311° at 9 bits and
// 0.1661° at 10 (TestQuatWorstCaseBound), and never exceeds it. Random
// rotations seldom come close: 100,000 give 0.29° and 0.15°, 3.5 million
// 0.317° and 0.159°. Plain rounding would allow 2√3·Δ: 0.55° and 0.27°.
// The component scale has an exact 0, so the identity round-trips.
type Quat struct {
	c    Scalar
	bits uint8
	// bias is 1.5·2⁵² + MaxQ/2, the rounding constant of code with the
	// scale's offset folded in: −Min/Step = MaxQ/2 is an integer.
	bias float64
}

// MinQuatBits and MaxQuatBits bound the per-component width of [Quat].
const (
	MinQuatBits = 4
	MaxQuatBits = 20
)

// NewQuat returns a smallest-three codec with n bits per component.
func NewQuat(n uint) (Quat, error) {
	if n < MinQuatBits || n > MaxQuatBits {
		return Quat{}, fmt.Errorf("%w: quaternion bits %d not in %d..%d", ErrBadParams, n, MinQuatBits, MaxQuatBits)
	}
	c, err := NewSymmetricBits(math.Sqrt2/2, n) // 0 exact: identity round-trips
	if err != nil {
		return Quat{}, err
	}
	return Quat{c: c, bits: uint8(n), bias: quatMagic + float64(c.maxQ/2)}, nil
}

// quatMagic is 1.5·2⁵²: adding it to a float of magnitude below 2⁵¹ rounds
// it to an integer held in the low mantissa bits (ties to even).
const quatMagic = 0x1.8p52

// Bits returns the per-component width n; a rotation takes 2 + 3n bits.
func (qc Quat) Bits() uint { return uint(qc.bits) }

// QuatErrorFactor is K in the worst-case rotation error 2·K·Δ of [Quat]
// (Δ the component step), rounded up from 1.05379; see [Quat] for how it
// was obtained.
const QuatErrorFactor = 1.0538

// MaxError returns the worst-case rotation error of a round trip in
// radians, 2·[QuatErrorFactor]·Δ with Δ = √2/(2ⁿ−2): 0.3349° (5.845 mrad)
// at 9 bits, 0.1671° at 10 bits. It is the bound for unit-length input;
// input within 2⁻²⁰ of unit length, which Quantize takes as it is, can add
// of the order of 10⁻⁶ rad.
func (qc Quat) MaxError() float64 { return 2 * QuatErrorFactor * qc.c.step }

// Quantize returns the index of the dropped component (0..3 for x, y, z, w)
// and the codes of the other three in x, y, z, w order.
//
// Inputs within 2⁻²⁰ of unit length (what a game's rotations are) are used
// as they are: the relative error of not normalizing is below 10⁻⁶, far
// under the 10⁻³-sized steps, and skipping it takes the normalization off
// the critical path. Others are normalized first.
func (qc *Quat) Quantize(x, y, z, w float64) (largest uint64, a, b, c uint64) {
	largest, a, b, c, _ = qc.QuantizeClamp(x, y, z, w)
	return largest, a, b, c
}

// QuantizeClamp is [Quat.Quantize] that also reports a quaternion with a
// NaN or ±Inf component ([ClampNaN] before [ClampInf]), which encodes as the
// identity. A zero quaternion (a zero-valued struct) also encodes as the
// identity but is not reported: it is the usual "no rotation set". The check
// runs only on the path for input that is not unit length.
func (qc *Quat) QuantizeClamp(x, y, z, w float64) (largest uint64, a, b, c uint64, cl Clamp) {
	// Pick the largest magnitude on the IEEE bit patterns: for
	// non-negative floats they order like the values, and integer selects
	// compile to conditional moves (no mispredicted branches on real data).
	// Strict comparisons keep the lowest index on ties.
	const sign = 1 << 63
	ux, uy, uz, uw := math.Float64bits(x), math.Float64bits(y), math.Float64bits(z), math.Float64bits(w)
	big, bu, bv := uint64(0), ux, ux&^sign
	if m := uy &^ sign; m > bv {
		big, bu, bv = 1, uy, m
	}
	if m := uz &^ sign; m > bv {
		big, bu, bv = 2, uz, m
	}
	if m := uw &^ sign; m > bv {
		big, bu, bv = 3, uw, m
	}
	// The other three in x, y, z, w order, negated when the dropped one is
	// negative (q and −q are the same rotation).
	pu, ru, su := ux, uy, uz
	if big == 0 {
		pu = uy
	}
	if big <= 1 {
		ru = uz
	}
	if big <= 2 {
		su = uw
	}
	neg := bu & sign
	p := math.Float64frombits(pu ^ neg)
	r := math.Float64frombits(ru ^ neg)
	s := math.Float64frombits(su ^ neg)
	l := math.Float64frombits(bv)
	// The squares serve the unit-length test here and the flip gains
	// below. The argmax above is the same after normalizing, and NaN, ±Inf
	// and zero fail the test.
	pp, rr, ss, l2 := p*p, r*r, s*s, l*l
	if d := l2 + pp + rr + ss - 1; !(d < 1.0/(1<<20) && d > -1.0/(1<<20)) {
		return qc.quantizeOther(x, y, z, w)
	}

	// Error-minimizing rounding. Plain round-to-nearest leaves the error
	// of the rebuilt component free: Δl ≈ −(pΔp + rΔr + sΔs)/l, which near
	// l = ½ triples the per-component error. Starting from nearest
	// rounding, the single-component flip that most lowers
	// |E|²·l² = l²(Δp²+Δr²+Δs²) + (pΔp+rΔr+sΔs)² is taken if it helps
	// (errors in steps; no division, no square root). This cuts the worst
	// case from 2√3·Δ to 2·1.054·Δ (0.55° to 0.335° at 9 bits; see Quat).
	// Rounding component i the other way moves its error d by δ = −sign(d)
	// and changes |E|²·l² by
	// g = l² + c² − 2·sign(d)·h with h = l²d + c·S, S = Σ c·d. g < 0 needs
	// |2h| > l² + c²; for about nine rotations in ten no component
	// passes that test, and the codes stay as rounded.
	q0, d0 := qc.code(p)
	q1, d1 := qc.code(r)
	q2, d2 := qc.code(s)
	// H = 2h = 2l²d + c·2S.
	L, S2 := 2*l2, 2*(p*d0+r*d1+s*d2)
	h0, h1, h2 := L*d0+p*S2, L*d1+r*S2, L*d2+s*S2
	t0, t1, t2 := l2+pp, l2+rr, l2+ss
	if h0*h0 > t0*t0 || h1*h1 > t1*t1 || h2*h2 > t2*t2 {
		q0, q1, q2 = qc.flipBest(q0, q1, q2, d0, d1, d2, h0, h1, h2, t0, t1, t2)
	}
	return big, q0, q1, q2, ClampNone
}

// quantizeOther is Quantize for input that is not unit length to 2⁻²⁰:
// it normalizes (a zero, NaN or infinite quaternion becomes the identity)
// and quantizes that. normalizeQuat's result is unit length to a few ulps
// for every input, so Quantize comes back here at most once.
func (qc *Quat) quantizeOther(x, y, z, w float64) (uint64, uint64, uint64, uint64, Clamp) {
	cl := ClampNone
	if d := (x - x) + (y - y) + (z - z) + (w - w); d != 0 { // a NaN or ±Inf component
		cl = ClampInf
		if x != x || y != y || z != z || w != w {
			cl = ClampNaN
		}
	}
	l, a, b, c, _ := qc.QuantizeClamp(normalizeQuat(x, y, z, w))
	return l, a, b, c, cl
}

// code returns the nearest code of a sent component v and its rounding
// error in steps (code − exact). v is within ±1/√2 (1 + 2⁻²¹) — the
// input is unit length to 2⁻²⁰ and v is not the largest — so the exact
// position t lies in [−¼, MaxQ + ¼] and rounds into range; the unsigned
// min only guards that bound.
func (qc *Quat) code(v float64) (uint64, float64) {
	// With u = v/Step, the exact position is t = u + MaxQ/2; r = u + bias
	// rounds it to an integer in the low mantissa bits, and the difference
	// of the bit patterns is that integer.
	u := v * qc.c.inv
	r := u + qc.bias
	q := min(math.Float64bits(r)-math.Float64bits(quatMagic), qc.c.maxQ)
	return q, (r - qc.bias) - u
}

// normalizeQuat scales (x, y, z, w) to unit length; a zero, NaN or
// infinite quaternion becomes the identity. Dividing by the largest
// magnitude first keeps tiny and huge inputs from underflowing or
// overflowing the sum of squares.
func normalizeQuat(x, y, z, w float64) (float64, float64, float64, float64) {
	m := max(math.Abs(x), math.Abs(y), math.Abs(z), math.Abs(w))
	if !(m > 0 && m <= math.MaxFloat64) { // zero, NaN or infinite
		return 0, 0, 0, 1
	}
	x, y, z, w = x/m, y/m, z/m, w/m
	inv := 1 / math.Sqrt(x*x+y*y+z*z+w*w)
	return x * inv, y * inv, z * inv, w * inv
}

// flipBest takes the single flip with the most negative gain
// g = t − sign(d)·H (t = l² + c², H = 2h), if any is negative (a second
// flip never changed the measured worst case).
func (qc *Quat) flipBest(q0, q1, q2 uint64, d0, d1, d2, h0, h1, h2, t0, t1, t2 float64) (uint64, uint64, uint64) {
	g0, g1, g2 := flipGain(d0, h0, t0), flipGain(d1, h1, t1), flipGain(d2, h2, t2)
	maxQ := qc.c.maxQ
	switch {
	case g0 < 0 && g0 <= g1 && g0 <= g2:
		q0 = stepCode(q0, d0, maxQ)
	case g1 < 0 && g1 <= g2:
		q1 = stepCode(q1, d1, maxQ)
	case g2 < 0:
		q2 = stepCode(q2, d2, maxQ)
	}
	return q0, q1, q2
}

// flipGain returns the change of |E|²·l² if a code with rounding error d
// (in steps) were rounded the other way, given H = 2h: t − H if it was
// rounded up (d > 0; the other way is down), else t + H.
func flipGain(d, H, t float64) float64 {
	if d > 0 {
		return t - H
	}
	return t + H
}

// stepCode rounds code q the other way: down if its error d is positive,
// else up; it never leaves 0..maxQ (a flip past an end is a no-op).
func stepCode(q uint64, d float64, maxQ uint64) uint64 {
	if d > 0 {
		if q == 0 {
			return 0
		}
		return q - 1
	}
	return min(q+1, maxQ)
}

// Dequantize rebuilds the unit quaternion (x, y, z, w) from its codes.
// Any input (even corrupt codes) yields a finite unit quaternion.
func (qc *Quat) Dequantize(largest, a, b, c uint64) (x, y, z, w float64) {
	p, r, s := qc.c.Dequantize(a), qc.c.Dequantize(b), qc.c.Dequantize(c)
	m := max(abs(p), abs(r), abs(s))
	l2 := 1 - p*p - r*r - s*s
	var l float64
	if l2 > m*m {
		// The common case: the rebuilt component is the largest, and the
		// four are unit length to rounding.
		l = math.Sqrt(l2)
	} else {
		// Codes at the edge of (or, corrupt, outside) the sphere. Keep the
		// dropped component strictly the largest, so that quantizing the
		// result again picks the same index (near |l| = |other| the rebuilt
		// value can come out a hair smaller); the nudge is 1e-9, far below
		// any quantization step. Then renormalize (the norm is ≥ m > 0).
		l = math.Sqrt(max(0, l2))
		if l <= m {
			l = m + 1e-9
		}
		inv := 1 / math.Sqrt(p*p+r*r+s*s+l*l)
		p, r, s, l = p*inv, r*inv, s*inv, l*inv
	}
	switch largest & 3 {
	case 0:
		return l, p, r, s
	case 1:
		return p, l, r, s
	case 2:
		return p, r, l, s
	}
	return p, r, s, l
}

// abs is math.Abs for the finite values here, as a compare (math.Abs goes
// through the integer registers).
func abs(v float64) float64 {
	if v < 0 {
		return -v
	}
	return v
}

// QuatAngle returns the rotation angle in radians between unit quaternions
// (x1, y1, z1, w1) and (x2, y2, z2, w2).
func QuatAngle(x1, y1, z1, w1, x2, y2, z2, w2 float64) float64 {
	d := math.Abs(x1*x2 + y1*y2 + z1*z2 + w1*w2)
	if d > 1 {
		d = 1
	}
	return 2 * math.Acos(d)
}

// Slerp is [components.Slerp] on quaternions as (x, y, z, w) arrays: the
// interpolation replication applies to quaternion fields is the game's, bit
// for bit, so a game that interpolates its own copies draws what
// replication would.
func Slerp(a, b [4]float64, t float64) [4]float64 {
	q := components.Slerp(components.Quat{X: a[0], Y: a[1], Z: a[2], W: a[3]}, components.Quat{X: b[0], Y: b[1], Z: b[2], W: b[3]}, t)
	return [4]float64{q.X, q.Y, q.Z, q.W}
}
