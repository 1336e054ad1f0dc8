package interp

import "math"

// WrapAngle returns a wrapped into [−π, π), the range replicated angles
// decode to (quant.Angle), so a decoded angle is its own wrap. NaN and ±Inf
// give NaN.
func WrapAngle(a float64) float64 {
	a = math.Remainder(a, 2*math.Pi) // [−π, π]
	if a >= math.Pi {
		a -= 2 * math.Pi
	}
	return a
}

// AngleDiff returns the signed shortest rotation b − a in [−π, π): the
// angle to add to a to reach b.
func AngleDiff(a, b float64) float64 { return WrapAngle(b - a) }

// LerpAngle interpolates between angles a and b (radians) along the shorter
// arc and returns the result wrapped into [−π, π). LerpAngle(170°, −170°, ½)
// is −180°, not 0°. t outside [0, 1] extrapolates along the same arc.
func LerpAngle(a, b, t float64) float64 { return WrapAngle(a + AngleDiff(a, b)*t) }
