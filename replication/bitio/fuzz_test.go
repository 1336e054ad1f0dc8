package bitio

import (
	"testing"
)

// FuzzReader drives a Reader with a program taken from the input: the first
// bytes choose operations and widths, the rest is the stream. The reader
// must never panic, never report more bits consumed than exist, and after an
// error must return zero values.
func FuzzReader(f *testing.F) {
	var w Writer
	w.WriteBits(0x3ff, 10)
	w.WriteUvarint(123456)
	w.WriteVarint(-77)
	w.WriteExpGolomb(42, 3)
	w.WriteRice(5, 1)
	w.WriteRice(1000, 2)
	w.WriteRice(0, 0)
	f.Add([]byte{0, 10, 1, 2, 3, 3, 6, 1, 6, 2, 6, 0}, w.Bytes())
	f.Add([]byte{6, 29, 6, 31, 6, 0}, []byte{0xf8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80})
	f.Add([]byte{1, 1, 1, 1}, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{3, 0}, make([]byte, 12))
	f.Fuzz(func(t *testing.T, prog, data []byte) {
		r := NewReader(data)
		for i := 0; i+1 < len(prog) && i < 256; i += 2 {
			n := uint(prog[i+1])
			var v uint64
			// The inlined fast paths must agree with the general ones
			// (value, position and error) on every input.
			ref := *r
			switch prog[i] % 7 {
			case 0:
				v = r.ReadBits(n % 70)
				if rv := ref.readBits(n % 70); rv != v || ref.pos != r.pos || ref.err != r.err {
					t.Fatalf("ReadBits(%d) = %d at %d, general path %d at %d", n%70, v, r.pos, rv, ref.pos)
				}
			case 1:
				v = r.ReadUvarint()
			case 2:
				v = uint64(r.ReadVarint())
			case 3:
				v = r.ReadExpGolomb(n % 34)
				if rv := ref.readExpGolomb(n % 34); rv != v || ref.pos != r.pos || ref.err != r.err {
					t.Fatalf("ReadExpGolomb(%d) = %d at %d, general path %d at %d", n%34, v, r.pos, rv, ref.pos)
				}
			case 4:
				r.Align()
			case 5:
				if r.ReadBool() {
					v = 1
				}
			case 6:
				v = r.ReadRice(n % 32)
				if rv := ref.readRice(n % 32); rv != v || ref.pos != r.pos || ref.err != r.err {
					t.Fatalf("ReadRice(%d) = %d at %d, general path %d at %d", n%32, v, r.pos, rv, ref.pos)
				}
			}
			if r.Err() != nil && v != 0 {
				t.Fatalf("non-zero value %d after error %v", v, r.Err())
			}
			if r.BitPos() > len(data)*8 {
				t.Fatalf("position %d past end %d", r.BitPos(), len(data)*8)
			}
		}
	})
}
