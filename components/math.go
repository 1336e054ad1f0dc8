package components

import "math"

// Vec3 is a 3D vector in metres (positions) or metres per second
// (velocities). It uses float64 so that positions stay exact far from the
// origin; the wire precision is set by the `net` tag of the field that holds it.
type Vec3 struct {
	X, Y, Z float64
}

// Add returns v + o.
func (v Vec3) Add(o Vec3) Vec3 { return Vec3{v.X + o.X, v.Y + o.Y, v.Z + o.Z} }

// Sub returns v − o.
func (v Vec3) Sub(o Vec3) Vec3 { return Vec3{v.X - o.X, v.Y - o.Y, v.Z - o.Z} }

// Scale returns v × s.
func (v Vec3) Scale(s float64) Vec3 { return Vec3{v.X * s, v.Y * s, v.Z * s} }

// Dot returns the dot product of v and o.
func (v Vec3) Dot(o Vec3) float64 { return v.X*o.X + v.Y*o.Y + v.Z*o.Z }

// Len returns the Euclidean length of v.
func (v Vec3) Len() float64 { return math.Sqrt(v.Dot(v)) }

// Lerp returns the linear interpolation a + (b−a)·t.
func Lerp(a, b Vec3, t float64) Vec3 {
	return Vec3{a.X + (b.X-a.X)*t, a.Y + (b.Y-a.Y)*t, a.Z + (b.Z-a.Z)*t}
}

// Quat is a rotation quaternion (X, Y, Z vector part, W scalar part). The
// zero value is not a valid rotation; use [QuatIdentity].
type Quat struct {
	X, Y, Z, W float64
}

// QuatIdentity returns the identity rotation.
func QuatIdentity() Quat { return Quat{W: 1} }

// QuatAxisAngle returns the rotation of angle radians around the unit axis.
func QuatAxisAngle(axis Vec3, angle float64) Quat {
	s, c := math.Sincos(angle / 2)
	return Quat{axis.X * s, axis.Y * s, axis.Z * s, c}
}

// Dot returns the 4D dot product of q and o.
func (q Quat) Dot(o Quat) float64 { return q.X*o.X + q.Y*o.Y + q.Z*o.Z + q.W*o.W }

// Normalize returns q scaled to unit length; the zero quaternion becomes the
// identity.
func (q Quat) Normalize() Quat {
	n := math.Sqrt(q.Dot(q))
	if n == 0 || math.IsNaN(n) || math.IsInf(n, 0) {
		return QuatIdentity()
	}
	return Quat{q.X / n, q.Y / n, q.Z / n, q.W / n}
}

// Mul returns the Hamilton product q·o (apply o, then q).
func (q Quat) Mul(o Quat) Quat {
	return Quat{
		q.W*o.X + q.X*o.W + q.Y*o.Z - q.Z*o.Y,
		q.W*o.Y - q.X*o.Z + q.Y*o.W + q.Z*o.X,
		q.W*o.Z + q.X*o.Y - q.Y*o.X + q.Z*o.W,
		q.W*o.W - q.X*o.X - q.Y*o.Y - q.Z*o.Z,
	}
}

// Conj returns the conjugate of q (the inverse of a unit quaternion).
func (q Quat) Conj() Quat { return Quat{-q.X, -q.Y, -q.Z, q.W} }

// Rotate returns v rotated by the unit quaternion q.
func (q Quat) Rotate(v Vec3) Vec3 {
	p := q.Mul(Quat{v.X, v.Y, v.Z, 0}).Mul(q.Conj())
	return Vec3{p.X, p.Y, p.Z}
}

// AngleTo returns the angle in radians of the rotation between unit
// quaternions q and o (q and −q are the same rotation).
func (q Quat) AngleTo(o Quat) float64 {
	d := math.Abs(q.Dot(o))
	if d > 1 {
		d = 1
	}
	return 2 * math.Acos(d)
}

// Nlerp returns the normalized linear interpolation between unit quaternions
// a and b along the shorter arc. It is cheaper than [Slerp] and accurate for
// the small angles between consecutive snapshots.
func Nlerp(a, b Quat, t float64) Quat {
	if a.Dot(b) < 0 {
		b = Quat{-b.X, -b.Y, -b.Z, -b.W}
	}
	return Quat{
		a.X + (b.X-a.X)*t, a.Y + (b.Y-a.Y)*t, a.Z + (b.Z-a.Z)*t, a.W + (b.W-a.W)*t,
	}.Normalize()
}

// Slerp returns the spherical linear interpolation between unit quaternions
// a and b along the shorter arc, at constant angular speed (nearly equal
// ones linearly), normalized; the identity when the result is degenerate.
// Replication interpolates quaternion fields with it, so a game that
// interpolates its own copies draws what replication would.
func Slerp(a, b Quat, t float64) Quat {
	d := a.Dot(b)
	if d < 0 {
		b, d = Quat{-b.X, -b.Y, -b.Z, -b.W}, -d
	}
	wa, wb := 1-t, t
	if d <= 0.9995 {
		th := math.Acos(d)
		s := math.Sin(th)
		wa, wb = math.Sin((1-t)*th)/s, math.Sin(t*th)/s
	}
	q := Quat{a.X*wa + b.X*wb, a.Y*wa + b.Y*wb, a.Z*wa + b.Z*wb, a.W*wa + b.W*wb}
	n := math.Sqrt(q.X*q.X + q.Y*q.Y + q.Z*q.Z + q.W*q.W)
	if n == 0 || math.IsNaN(n) || math.IsInf(n, 0) {
		return QuatIdentity()
	}
	return Quat{q.X / n, q.Y / n, q.Z / n, q.W / n}
}
