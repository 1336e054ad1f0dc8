// Package quant maps game values to small integers and back: bounded
// fixed-point scalars, wrap-around angles, smallest-three quaternions,
// large-world positions on a float64 grid origin, velocities with an at-rest
// flag, and integer ranges.
//
// Every codec is a small immutable value built once from its precision
// ([NewScalarStep], [NewScalarBits], [NewSymmetric], [NewAngle], [NewQuat],
// [NewGrid], [NewVelocity], [NewInt]) with O(1), allocation-free Quantize
// and Dequantize methods. Quantization is arithmetic (scale, round, clamp),
// never a bit cast, so codes are identical on every platform. NaN and ±Inf
// are clamped to documented values before any float→int conversion, and every
// Dequantize accepts any code (corrupt codes clamp), so hostile input cannot
// make a codec panic. Whether an input was clamped (out of range, NaN,
// ±Inf) is reported by [Scalar.Clamped], [Grid.Clamped], [Angle.Clamped],
// [Int.Clamped], [Quat.QuantizeClamp] and [Velocity.QuantizeClamp] (see
// [Clamp]); Quantize gives clamped inputs end codes, so callers need to ask
// only for those.
//
// # Task index
//
//   - A coordinate in a known box: [Scalar] via [NewScalarStep] (range + step).
//   - A coordinate in a world of any size: [Grid] (grid cell + offset).
//   - A heading: [Angle]; diff two codes with [Angle.Delta].
//   - An orientation: [Quat] (2 + 3n bits).
//   - A velocity that is often zero: [Velocity].
//   - Health, ammo, an enum: [Int].
//   - What error to expect: the MaxError method of each codec.
//   - Was a value clamped: [Clamp], the Clamped / QuantizeClamp methods.
package quant
