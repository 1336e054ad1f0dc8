package components

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNetIDPacking(t *testing.T) {
	id := NetID{Handle: MakeHandle(7, 123456), Gen: 3}
	require.Equal(t, uint8(7), id.Owner())
	require.Equal(t, uint32(123456), id.Index())
	require.False(t, id.IsZero())
	require.True(t, NetID{}.IsZero())
	require.Equal(t, uint32(0xffffff), MakeHandle(0, 0xffffffff)&0xffffff, "index is masked to 24 bits")
	require.Equal(t, uint8(0), NetID{Handle: MakeHandle(0, 0xffffffff)}.Owner())
}

func TestQuatMath(t *testing.T) {
	q := QuatAxisAngle(Vec3{Y: 1}, math.Pi/2)
	v := q.Rotate(Vec3{X: 1})
	require.InDelta(t, 0, v.X, 1e-12)
	require.InDelta(t, -1, v.Z, 1e-12)
	require.InDelta(t, math.Pi/2, QuatIdentity().AngleTo(q), 1e-12)
	neg := Quat{-q.X, -q.Y, -q.Z, -q.W}
	require.InDelta(t, 0, q.AngleTo(neg), 1e-6, "q and −q are the same rotation")
	half := Slerp(QuatIdentity(), q, 0.5)
	require.InDelta(t, math.Pi/4, QuatIdentity().AngleTo(half), 1e-9)
	n := Nlerp(QuatIdentity(), neg, 0.5) // takes the short arc
	require.InDelta(t, math.Pi/4, QuatIdentity().AngleTo(n), 1e-9)
	require.Equal(t, QuatIdentity(), Quat{}.Normalize())
	require.Equal(t, QuatIdentity(), Quat{X: math.NaN()}.Normalize())
}

func TestVec3(t *testing.T) {
	a, b := Vec3{1, 2, 3}, Vec3{4, 6, 3}
	require.Equal(t, Vec3{3, 4, 0}, b.Sub(a))
	require.Equal(t, 5.0, b.Sub(a).Len())
	require.Equal(t, Vec3{2.5, 4, 3}, Lerp(a, b, 0.5))
	require.Equal(t, Vec3{5, 8, 6}, a.Add(b))
	require.Equal(t, Vec3{2, 4, 6}, a.Scale(2))
}
