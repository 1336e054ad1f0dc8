package schema

import (
	"testing"
	"unsafe"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/bitio"
)

func benchTransform() (*Plan, transform) {
	r := NewRegistry()
	p := MustRegister[transform](r)
	return p, transform{
		Pos: components.Vec3{X: 120.25, Y: 3.5, Z: -841.125},
		Rot: components.QuatAxisAngle(components.Vec3{X: 0.6, Y: 0.8}, 1.1),
	}
}

// BenchmarkTransformEncode: quantize a transform (3 world coordinates +
// smallest-three quaternion) and bit-pack it.
func BenchmarkTransformEncode(b *testing.B) {
	b.ReportAllocs()
	p, tr := benchTransform()
	lanes := make([]uint64, p.NumLanes())
	buf := make([]byte, 0, 64)
	var w bitio.Writer
	for b.Loop() {
		p.quantize(unsafe.Pointer(&tr), lanes)
		w.Reset(buf)
		p.Write(&w, lanes, true)
	}
}

// BenchmarkTransformQuantize: the quantize half alone (what a snapshot build
// does per entity).
func BenchmarkTransformQuantize(b *testing.B) {
	b.ReportAllocs()
	p, tr := benchTransform()
	lanes := make([]uint64, p.NumLanes())
	for b.Loop() {
		p.quantize(unsafe.Pointer(&tr), lanes)
	}
}

// BenchmarkTransformDecode: read the bit-packed transform and dequantize it.
func BenchmarkTransformDecode(b *testing.B) {
	b.ReportAllocs()
	p, tr := benchTransform()
	lanes := make([]uint64, p.NumLanes())
	p.quantize(unsafe.Pointer(&tr), lanes)
	var w bitio.Writer
	p.Write(&w, lanes, true)
	data := w.Bytes()
	var r bitio.Reader
	var out transform
	for b.Loop() {
		r.Reset(data)
		if err := p.Read(&r, lanes, true); err != nil {
			b.Fatal(err)
		}
		p.dequantize(lanes, unsafe.Pointer(&out))
	}
}

// BenchmarkTransformWrite: the bit-packing half alone (what a full record
// costs once its lanes are quantized).
func BenchmarkTransformWrite(b *testing.B) {
	b.ReportAllocs()
	p, tr := benchTransform()
	lanes := make([]uint64, p.NumLanes())
	p.quantize(unsafe.Pointer(&tr), lanes)
	buf := make([]byte, 0, 64)
	var w bitio.Writer
	for b.Loop() {
		w.Reset(buf)
		p.Write(&w, lanes, true)
	}
}
