package quant

// Clamp says whether a quantizer had to substitute an input it cannot
// represent, and why. A value that rounds to an end code within the usual
// error (half a step past the end of the range) is not clamped.
//
// The Quantize methods ignore it; the QuantizeClamp variants return it
// alongside the codes, decided on the branches that already handle such
// inputs, so the common path costs nothing extra. When several inputs of
// one composite (a quaternion, a velocity) are clamped, the most severe kind
// is returned: NaN, then Inf, then out of range.
type Clamp uint8

// Clamp kinds, in increasing severity.
const (
	ClampNone  Clamp = iota // the value was represented (to the field's precision)
	ClampRange              // a finite value outside the field's range, clamped to its end
	ClampInf                // ±Inf, clamped to an end (or, for angles and quaternions, replaced)
	ClampNaN                // NaN, replaced (by 0, or the identity rotation)
)

var clampNames = [...]string{"none", "out-of-range", "inf", "nan"}

// String names the kind: "none", "out-of-range", "inf" or "nan".
func (c Clamp) String() string {
	if int(c) < len(clampNames) {
		return clampNames[c]
	}
	return "clamp?"
}

// floatClamp classifies a float that fell outside a range: Inf, NaN or an
// ordinary out-of-range value.
func floatClamp(v float64) Clamp {
	switch {
	case v != v:
		return ClampNaN
	case v > maxFloat || v < -maxFloat:
		return ClampInf
	}
	return ClampRange
}

const maxFloat = 0x1p1023 * (1 + (1 - 0x1p-52)) // math.MaxFloat64
