package schema

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/bitio"
)

type pose32 struct {
	X, Y, Z    float32    `net:"world,step=0.01,cell=12"`
	QX, QY, QZ float32    `net:"-"`
	Rot        [4]float32 `net:"quat,bits=9"`
}

type notPose struct {
	Pos components.Vec3 `net:"world,step=0.001"`
	Rot components.Quat `net:"quat,bits=10,owner"` // owner-only: the interpreter
}

// poseValue returns a random value for a pose-shaped plan: mostly ordinary
// poses, sometimes far cells, huge or special floats and non-unit rotations.
func poseValue(rng *rand.Rand) [7]float64 {
	var v [7]float64
	for i := range v {
		switch rng.IntN(12) {
		case 0:
			v[i] = []float64{math.NaN(), math.Inf(1), math.Inf(-1), 0, math.Copysign(0, -1), 1e300, -1e300}[rng.IntN(7)]
		case 1:
			v[i] = (rng.Float64()*2 - 1) * 1e12 // far cells, clamped coordinates
		default:
			v[i] = (rng.Float64()*2 - 1) * 5000
		}
	}
	if rng.IntN(4) != 0 { // mostly unit rotations
		x, y, z, w := rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()
		n := math.Sqrt(x*x + y*y + z*z + w*w)
		v[3], v[4], v[5], v[6] = x/n, y/n, z/n, w/n
	}
	return v
}

// The pose kernel is a fast path only: for every value it gives the same
// lanes, the same bits and the same dequantized floats as the interpreters.
func TestPoseKernelMatchesInterpreter(t *testing.T) {
	r := NewRegistry()
	p64 := MustRegister[transform](r)
	p32 := MustRegister[pose32](r)
	pn := MustRegister[notPose](r)
	require.NotNil(t, p64.pose, "components-style transform takes the kernel")
	require.NotNil(t, p32.pose, "float32 pose with other cell and quaternion widths takes the kernel")
	require.Nil(t, pn.pose, "owner-only fields use the interpreter")

	rng := rand.New(rand.NewPCG(21, 22))
	for _, p := range []*Plan{p64, p32} {
		slow := *p
		slow.pose = nil
		fast, gen := make([]uint64, p.NumLanes()), make([]uint64, p.NumLanes())
		var wf, wg bitio.Writer
		for i := 0; i < 50_000; i++ {
			v := poseValue(rng)
			var src unsafe.Pointer
			var t64 transform
			var t32 pose32
			if p == p64 {
				t64 = transform{Pos: components.Vec3{X: v[0], Y: v[1], Z: v[2]}, Rot: components.Quat{X: v[3], Y: v[4], Z: v[5], W: v[6]}}
				src = unsafe.Pointer(&t64)
			} else {
				t32 = pose32{X: float32(v[0]), Y: float32(v[1]), Z: float32(v[2]), Rot: [4]float32{float32(v[3]), float32(v[4]), float32(v[5]), float32(v[6])}}
				src = unsafe.Pointer(&t32)
			}
			p.quantize(src, fast)
			slow.quantize(src, gen)
			require.Equal(t, gen, fast, "%s lanes of %v", p.Name, v)
			// Dequantize: the kernel writes the same floats, and only the
			// replicated fields, for valid lanes and for any others.
			lanes := append([]uint64(nil), fast...)
			if i%3 == 0 {
				for j := range lanes {
					lanes[j] = rng.Uint64() >> rng.IntN(64)
				}
			}
			if p == p64 {
				var a, b transform
				p.dequantize(lanes, unsafe.Pointer(&a))
				slow.dequantize(lanes, unsafe.Pointer(&b))
				require.Equal(t, fmt.Sprint(b), fmt.Sprint(a), "lanes %v", lanes)
			} else {
				a := pose32{QX: 7, QY: 8, QZ: 9}
				b := a
				p.dequantize(lanes, unsafe.Pointer(&a))
				slow.dequantize(lanes, unsafe.Pointer(&b))
				require.Equal(t, fmt.Sprint(b), fmt.Sprint(a), "lanes %v", lanes)
				require.Equal(t, float32(8), a.QY)
			}
			for _, owner := range []bool{true, false} {
				wf.Reset(nil)
				wg.Reset(nil)
				wf.WriteBits(uint64(i), uint(i%13)) // any alignment
				wg.WriteBits(uint64(i), uint(i%13))
				p.Write(&wf, fast, owner)
				slow.Write(&wg, gen, owner)
				require.Equal(t, wg.Bytes(), wf.Bytes(), "%s bits of %v", p.Name, v)
			}
		}
	}
}

// Reading with the pose kernel gives the interpreter's lanes, position and
// error for valid encodings at any alignment, for their truncations, and for
// random bytes.
func TestPoseReadMatchesInterpreter(t *testing.T) {
	r := NewRegistry()
	p64 := MustRegister[transform](r)
	p32 := MustRegister[pose32](r)
	rng := rand.New(rand.NewPCG(31, 32))
	for _, p := range []*Plan{p64, p32} {
		slow := *p
		slow.pose = nil
		lanes := make([]uint64, p.NumLanes())
		fast, gen := make([]uint64, p.NumLanes()), make([]uint64, p.NumLanes())
		check := func(data []byte, skip uint) {
			var rf, rg bitio.Reader
			rf.Reset(data)
			rg.Reset(data)
			rf.ReadBits(skip)
			rg.ReadBits(skip)
			ef := p.Read(&rf, fast, true)
			eg := slow.Read(&rg, gen, true)
			require.Equal(t, fmt.Sprint(eg), fmt.Sprint(ef), "%s %x", p.Name, data)
			require.Equal(t, rg.BitPos(), rf.BitPos(), "%s %x", p.Name, data)
			if eg == nil {
				require.Equal(t, gen, fast, "%s %x", p.Name, data)
			}
		}
		for i := 0; i < 20_000; i++ {
			v := poseValue(rng)
			var src unsafe.Pointer
			if p == p64 {
				src = unsafe.Pointer(&transform{Pos: components.Vec3{X: v[0], Y: v[1], Z: v[2]}, Rot: components.Quat{X: v[3], Y: v[4], Z: v[5], W: v[6]}})
			} else {
				src = unsafe.Pointer(&pose32{X: float32(v[0]), Y: float32(v[1]), Z: float32(v[2]), Rot: [4]float32{float32(v[3]), float32(v[4]), float32(v[5]), float32(v[6])}})
			}
			p.quantize(src, lanes)
			skip := uint(i % 13)
			var w bitio.Writer
			w.WriteBits(rng.Uint64(), skip)
			p.Write(&w, lanes, true)
			if i%2 == 0 { // trailing bytes: the kernel's windows reach further
				w.WriteBits(rng.Uint64(), 64)
			}
			data := w.Bytes()
			check(data, skip)
			check(data[:rng.IntN(len(data))], skip)
			junk := make([]byte, rng.IntN(24))
			for j := range junk {
				junk[j] = byte(rng.Uint32() >> rng.IntN(32))
			}
			check(junk, 0)
		}
		check(make([]byte, 16), 0) // an all-zero window: no code ends in it
	}
}
