package quant

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
)

// MaxBits is the widest quantized field a [Scalar] produces.
const MaxBits = 32

// ErrBadParams is wrapped by every constructor error of this package.
var ErrBadParams = errors.New("quant: bad parameters")

// Scalar quantizes a float in a bounded range to an unsigned integer
// q ∈ [0, MaxQ]: value = Min + q × Step. Round to nearest (ties away from
// Min); values outside the range clamp to its ends.
//
// Special inputs are clamped before any float→int conversion: +Inf → MaxQ,
// −Inf → 0, and NaN is treated as 0.0 (then clamped into the range), so a
// NaN coordinate does not fling an entity to a corner of the world.
type Scalar struct {
	min, step, inv float64
	maxQf          float64 // float64(maxQ)
	maxQ           uint64
	bits           uint8
}

// Float/int conversions go through int64: on amd64 a uint64 conversion
// costs several extra instructions and branches, and codes stay below 2^32.

func newScalar(min, step float64, maxQ uint64, bits uint8) Scalar {
	return Scalar{min: min, step: step, inv: 1 / step, maxQf: float64(maxQ), maxQ: maxQ, bits: bits}
}

// NewScalarBits returns a scalar over [min, max] using exactly n bits:
// Step = (max − min) / (2^n − 1), so both ends are exact. 1 ≤ n ≤ 32.
func NewScalarBits(min, max float64, n uint) (Scalar, error) {
	if err := checkRange(min, max); err != nil {
		return Scalar{}, err
	}
	if n < 1 || n > MaxBits {
		return Scalar{}, fmt.Errorf("%w: bits %d not in 1..%d", ErrBadParams, n, MaxBits)
	}
	maxQ := uint64(1)<<n - 1
	step := (max - min) / float64(maxQ)
	return newScalar(min, step, maxQ, uint8(n)), nil
}

// NewScalarStep returns a scalar over [min, max] with the given step; the
// bit width is the smallest that covers the range: MaxQ = ⌈(max−min)/step⌉.
// Values are exact multiples of step from min, so with min a multiple of
// step, 0 is exact. The top of the range may extend past max by less than
// one step. Fails if more than 32 bits would be needed.
func NewScalarStep(min, max, step float64) (Scalar, error) {
	if err := checkRange(min, max); err != nil {
		return Scalar{}, err
	}
	if !(step > 0) || math.IsInf(step, 0) {
		return Scalar{}, fmt.Errorf("%w: step %v must be positive and finite", ErrBadParams, step)
	}
	intervals := math.Ceil((max-min)/step - 1e-9)
	if intervals < 1 {
		intervals = 1
	}
	if intervals >= 1<<MaxBits {
		return Scalar{}, fmt.Errorf("%w: range %v..%v at step %v needs more than %d bits", ErrBadParams, min, max, step, MaxBits)
	}
	maxQ := uint64(intervals)
	return newScalar(min, step, maxQ, uint8(bits.Len64(maxQ))), nil
}

// NewSymmetric returns a scalar over [−limit, +limit] whose middle code
// decodes to exactly 0 (an even MaxQ), with a step of at most step. Used for
// velocities and residuals where "zero" must round-trip exactly.
func NewSymmetric(limit, step float64) (Scalar, error) {
	if !(limit > 0) || math.IsInf(limit, 0) {
		return Scalar{}, fmt.Errorf("%w: limit %v must be positive and finite", ErrBadParams, limit)
	}
	if !(step > 0) || math.IsInf(step, 0) {
		return Scalar{}, fmt.Errorf("%w: step %v must be positive and finite", ErrBadParams, step)
	}
	half := math.Ceil(limit/step - 1e-9)
	if 2*half >= 1<<MaxBits {
		return Scalar{}, fmt.Errorf("%w: ±%v at step %v needs more than %d bits", ErrBadParams, limit, step, MaxBits)
	}
	maxQ := uint64(2 * half)
	return newScalar(-half*step, step, maxQ, uint8(bits.Len64(maxQ))), nil
}

// NewSymmetricBits returns a symmetric scalar over [−limit, +limit] with n
// bits (2 ≤ n ≤ 32): MaxQ = 2^n − 2 so that the middle code is exactly 0.
func NewSymmetricBits(limit float64, n uint) (Scalar, error) {
	if !(limit > 0) || math.IsInf(limit, 0) {
		return Scalar{}, fmt.Errorf("%w: limit %v must be positive and finite", ErrBadParams, limit)
	}
	if n < 2 || n > MaxBits {
		return Scalar{}, fmt.Errorf("%w: bits %d not in 2..%d", ErrBadParams, n, MaxBits)
	}
	maxQ := uint64(1)<<n - 2
	step := 2 * limit / float64(maxQ)
	return newScalar(-limit, step, maxQ, uint8(n)), nil
}

func checkRange(min, max float64) error {
	if math.IsNaN(min) || math.IsNaN(max) || math.IsInf(min, 0) || math.IsInf(max, 0) {
		return fmt.Errorf("%w: range %v..%v must be finite", ErrBadParams, min, max)
	}
	if !(max > min) {
		return fmt.Errorf("%w: range %v..%v is empty", ErrBadParams, min, max)
	}
	return nil
}

// Quantize maps v to its code. Cost: a subtract, multiply, round and clamp.
func (s Scalar) Quantize(v float64) uint64 {
	if v != v { // NaN
		v = 0
	}
	t := (v-s.min)*s.inv + 0.5
	if !(t >= 1) { // also catches −Inf
		return 0
	}
	if t >= s.maxQf { // also catches +Inf
		return s.maxQ
	}
	return uint64(int64(t))
}

// Clamped reports whether Quantize clamps v: NaN, ±Inf, or a value more
// than half a step outside [Min, Max] (one that does not round to an end
// code within the usual error). Quantize gives such values an end code, so
// a caller that cares can check only those.
func (s Scalar) Clamped(v float64) Clamp {
	t := (v-s.min)*s.inv + 0.5
	if t >= 0 && t < s.maxQf+1 {
		return ClampNone
	}
	return floatClamp(v)
}

// Dequantize maps a code back to a value; codes above MaxQ clamp to MaxQ.
func (s Scalar) Dequantize(q uint64) float64 {
	if q > s.maxQ {
		q = s.maxQ
	}
	return s.min + float64(int64(q))*s.step
}

// Round returns Dequantize(Quantize(v)): the value a receiver will see.
func (s Scalar) Round(v float64) float64 { return s.Dequantize(s.Quantize(v)) }

// Bits returns the field width in bits.
func (s Scalar) Bits() uint { return uint(s.bits) }

// MaxQ returns the largest code.
func (s Scalar) MaxQ() uint64 { return s.maxQ }

// Min returns the value of code 0.
func (s Scalar) Min() float64 { return s.min }

// Max returns the value of code MaxQ.
func (s Scalar) Max() float64 { return s.min + s.maxQf*s.step }

// Step returns the distance between adjacent codes.
func (s Scalar) Step() float64 { return s.step }

// MaxError returns the largest |v − Round(v)| for v inside [Min, Max]: Step/2.
func (s Scalar) MaxError() float64 { return s.step / 2 }

// Int quantizes integers in [Min, Max] to codes 0..Max−Min in the smallest
// number of bits, ⌈log2(Max−Min+1)⌉ (0 bits for a single value). Out-of-range
// values clamp.
type Int struct {
	min, max int64
	bits     uint8
}

// NewInt returns an integer range. Fails if max < min or the span needs
// more than 64 bits.
func NewInt(min, max int64) (Int, error) {
	if max < min {
		return Int{}, fmt.Errorf("%w: int range %d..%d is empty", ErrBadParams, min, max)
	}
	span := uint64(max) - uint64(min)
	return Int{min: min, max: max, bits: uint8(bits.Len64(span))}, nil
}

// Quantize clamps v into the range and returns v − Min.
func (r Int) Quantize(v int64) uint64 {
	v = max(r.min, min(r.max, v))
	return uint64(v) - uint64(r.min)
}

// Clamped reports whether Quantize clamps v ([ClampRange] outside [Min,
// Max]).
func (r Int) Clamped(v int64) Clamp {
	if v < r.min || v > r.max {
		return ClampRange
	}
	return ClampNone
}

// Dequantize returns Min + q, clamped to Max.
func (r Int) Dequantize(q uint64) int64 {
	if q > r.MaxQ() {
		q = r.MaxQ()
	}
	return int64(uint64(r.min) + q)
}

// MaxQ returns the largest code, Max − Min.
func (r Int) MaxQ() uint64 { return uint64(r.max) - uint64(r.min) }

// Bits returns the field width.
func (r Int) Bits() uint { return uint(r.bits) }

// Min and Max return the range ends.
func (r Int) Min() int64 { return r.min }

// Max returns the upper end of the range.
func (r Int) Max() int64 { return r.max }
