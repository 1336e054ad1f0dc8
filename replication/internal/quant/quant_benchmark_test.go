package quant

import (
	"math"
	"math/rand/v2"
	"testing"
)

func BenchmarkQuatQuantize(b *testing.B) {
	b.ReportAllocs()
	qc, _ := NewQuat(10)
	var sink uint64
	x, y, z, w := 0.1, -0.7, 0.2, 0.6
	n := math.Sqrt(x*x + y*y + z*z + w*w)
	x, y, z, w = x/n, y/n, z/n, w/n // games keep rotations normalized
	for b.Loop() {
		l, a, bb, c := qc.Quantize(x, y, z, w)
		sink += l + a + bb + c
	}
	_ = sink
}

func BenchmarkQuatDequantize(b *testing.B) {
	b.ReportAllocs()
	qc, _ := NewQuat(10)
	l, a, bb, c := qc.Quantize(0.1, -0.7, 0.2, 0.6)
	var sink float64
	for b.Loop() {
		x, y, z, w := qc.Dequantize(l, a, bb, c)
		sink += x + y + z + w
	}
	_ = sink
}

func BenchmarkScalarQuantize(b *testing.B) {
	b.ReportAllocs()
	s, _ := NewScalarStep(-2048, 2048, 1.0/256)
	var sink uint64
	v := 17.123
	for b.Loop() {
		sink += s.Quantize(v)
		v += 0.001
	}
	_ = sink
}

// BenchmarkQuatQuantizeMixed quantizes a cycle of 1024 random rotations, so
// data-dependent branches (which component is largest, which way each code
// rounds) cost what they cost on real entities.
func BenchmarkQuatQuantizeMixed(b *testing.B) {
	b.ReportAllocs()
	qc, _ := NewQuat(10)
	rng := rand.New(rand.NewPCG(1, 2))
	var qs [1024][4]float64
	for i := range qs {
		qs[i][0], qs[i][1], qs[i][2], qs[i][3] = randomUnitQuat(rng)
	}
	var sink uint64
	i := 0
	for b.Loop() {
		q := &qs[i&1023]
		l, a, bb, c := qc.Quantize(q[0], q[1], q[2], q[3])
		sink += l + a + bb + c
		i++
	}
	_ = sink
}
