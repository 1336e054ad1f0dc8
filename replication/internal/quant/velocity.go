package quant

import (
	"fmt"
	"math"
)

// Velocity quantizes a 3-vector with a bounded symmetric scalar per axis and
// a 1-bit "at rest" flag: when every axis is within the rest threshold the
// vector is sent as that single bit and decodes to exactly zero. Resting
// bodies are the common case in physics scenes, so the flag saves 3 × Bits
// per resting entity.
type Velocity struct {
	axis Scalar
	rest float64
}

// NewVelocity returns a velocity codec over ±limit per axis with a step of
// at most step. rest is the at-rest threshold; values below Step/2 (including
// 0) mean Step/2, i.e. "every axis quantizes to zero".
func NewVelocity(limit, step, rest float64) (Velocity, error) {
	a, err := NewSymmetric(limit, step)
	if err != nil {
		return Velocity{}, err
	}
	return newVelocity(a, rest)
}

// NewVelocityBits is [NewVelocity] with an axis width of n bits.
func NewVelocityBits(limit float64, n uint, rest float64) (Velocity, error) {
	a, err := NewSymmetricBits(limit, n)
	if err != nil {
		return Velocity{}, err
	}
	return newVelocity(a, rest)
}

func newVelocity(a Scalar, rest float64) (Velocity, error) {
	if math.IsNaN(rest) || math.IsInf(rest, 0) || rest < 0 {
		return Velocity{}, fmt.Errorf("%w: rest threshold %v", ErrBadParams, rest)
	}
	return Velocity{axis: a, rest: max(rest, a.Step()/2)}, nil
}

// Axis returns the per-axis scalar.
func (v Velocity) Axis() Scalar { return v.axis }

// Rest returns the effective at-rest threshold.
func (v Velocity) Rest() float64 { return v.rest }

// Zero returns the code of 0 on an axis.
func (v Velocity) Zero() uint64 { return v.axis.MaxQ() / 2 }

// Quantize returns the rest flag and the axis codes; when at rest the codes
// are [Velocity.Zero]. NaN axes count as 0.
func (v Velocity) Quantize(x, y, z float64) (rest bool, qx, qy, qz uint64) {
	if !(math.Abs(x) > v.rest) && !(math.Abs(y) > v.rest) && !(math.Abs(z) > v.rest) {
		zc := v.Zero()
		return true, zc, zc, zc
	}
	return false, v.axis.Quantize(x), v.axis.Quantize(y), v.axis.Quantize(z)
}

// QuantizeClamp is [Velocity.Quantize] that also reports the most severe
// clamp of the three axes (see [Clamp]). A vector whose axes are NaN or
// within the rest threshold is at rest, and reported as NaN if any is NaN.
func (v Velocity) QuantizeClamp(x, y, z float64) (rest bool, qx, qy, qz uint64, c Clamp) {
	rest, qx, qy, qz = v.Quantize(x, y, z)
	if rest {
		if x != x || y != y || z != z {
			c = ClampNaN
		}
		return rest, qx, qy, qz, c
	}
	c = max(v.axis.Clamped(x), v.axis.Clamped(y), v.axis.Clamped(z))
	return rest, qx, qy, qz, c
}

// Dequantize returns the vector of the codes; at rest it is exactly zero.
func (v Velocity) Dequantize(rest bool, qx, qy, qz uint64) (x, y, z float64) {
	if rest {
		return 0, 0, 0
	}
	return v.axis.Dequantize(qx), v.axis.Dequantize(qy), v.axis.Dequantize(qz)
}

// MaxError returns the largest per-axis error for a non-resting vector
// within range: Step/2 (a resting vector is off by at most the threshold).
func (v Velocity) MaxError() float64 { return v.axis.MaxError() }
