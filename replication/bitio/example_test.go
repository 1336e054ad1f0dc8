package bitio_test

import (
	"fmt"

	"github.com/archenet/archenet/replication/bitio"
)

func Example() {
	var w bitio.Writer
	w.WriteBits(5, 3)  // a 3-bit enum
	w.WriteBool(true)  // a flag
	w.WriteVarint(-42) // a zigzag varint
	b := w.Bytes()
	fmt.Printf("% x (%d bits)\n", b, w.BitLen())

	r := bitio.NewReader(b)
	fmt.Println(r.ReadBits(3), r.ReadBool(), r.ReadVarint(), r.Err())
	r.ReadBits(16) // past the end: fails closed
	fmt.Println(r.Err())
	// Output:
	// 3d 05 (16 bits)
	// 5 true -42 <nil>
	// bitio: read past end of buffer
}
