package bitio

import "testing"

func BenchmarkWriteBits(b *testing.B) {
	b.ReportAllocs()
	buf := make([]byte, 0, 4096)
	var w Writer
	for b.Loop() {
		w.Reset(buf)
		for i := 0; i < 256; i++ {
			w.WriteBits(uint64(i), 13)
		}
		buf = w.Bytes()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/256, "ns/field")
}

func BenchmarkReadBits(b *testing.B) {
	b.ReportAllocs()
	var w Writer
	for i := 0; i < 256; i++ {
		w.WriteBits(uint64(i), 13)
	}
	data := w.Bytes()
	var r Reader
	var sink uint64
	for b.Loop() {
		r.Reset(data)
		for i := 0; i < 256; i++ {
			sink += r.ReadBits(13)
		}
	}
	_ = sink
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/256, "ns/field")
}
