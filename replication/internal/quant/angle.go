package quant

import (
	"fmt"
	"math"
)

// Angle quantizes an angle in radians to n bits over a full turn, with
// wrap-around: code = round(θ / 2π × 2^n) mod 2^n. Decoded angles lie in
// [−π, π). NaN and ±Inf quantize to code 0 (angle 0).
type Angle struct {
	bits  uint8
	scale float64 // 2^n / 2π
}

// NewAngle returns an n-bit angle, 2 ≤ n ≤ 32.
func NewAngle(n uint) (Angle, error) {
	if n < 2 || n > MaxBits {
		return Angle{}, fmt.Errorf("%w: angle bits %d not in 2..%d", ErrBadParams, n, MaxBits)
	}
	return Angle{bits: uint8(n), scale: float64(uint64(1)<<n) / (2 * math.Pi)}, nil
}

// Quantize maps θ (any finite value) to its code.
func (a Angle) Quantize(theta float64) uint64 {
	if math.IsNaN(theta) || math.IsInf(theta, 0) {
		return 0
	}
	full := float64(uint64(1) << a.bits)
	t := theta * a.scale
	t -= math.Floor(t/full) * full // [0, full) up to rounding
	q := uint64(t + 0.5)
	return q & (uint64(1)<<a.bits - 1)
}

// Clamped reports whether Quantize replaces θ: NaN or ±Inf (code 0). Angles
// wrap, so no finite value is clamped.
func (a Angle) Clamped(theta float64) Clamp {
	if theta-theta == 0 {
		return ClampNone
	}
	return floatClamp(theta)
}

// Dequantize returns the angle of code q in [−π, π).
func (a Angle) Dequantize(q uint64) float64 {
	q &= uint64(1)<<a.bits - 1
	half := uint64(1) << (a.bits - 1)
	v := float64(q)
	if q >= half {
		v -= float64(uint64(1) << a.bits)
	}
	return v / a.scale
}

// Bits returns the field width.
func (a Angle) Bits() uint { return uint(a.bits) }

// MaxError returns the largest angular error in radians: half a step, π/2^n.
func (a Angle) MaxError() float64 { return math.Pi / float64(uint64(1)<<a.bits) }

// Delta returns the signed shortest difference cur − base between two codes
// of this angle, in steps, wrapping around the turn: it lies in
// [−2^(n−1), 2^(n−1)).
func (a Angle) Delta(base, cur uint64) int64 {
	n := a.bits
	d := (cur - base) & (uint64(1)<<n - 1)
	if d >= uint64(1)<<(n-1) {
		return int64(d) - int64(uint64(1)<<n)
	}
	return int64(d)
}
