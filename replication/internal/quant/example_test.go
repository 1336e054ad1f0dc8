package quant_test

import (
	"fmt"
	"math"

	"github.com/archenet/archenet/replication/internal/quant"
)

func ExampleNewScalarStep() {
	x, _ := quant.NewScalarStep(-2048, 2048, 1.0/256)
	q := x.Quantize(17.123)
	fmt.Println(x.Bits(), q, x.Dequantize(q), x.MaxError())
	// Output: 21 528671 17.12109375 0.001953125
}

func ExampleNewQuat() {
	qc, _ := quant.NewQuat(9)
	s, c := math.Sincos(0.3) // 0.6 rad around Y
	l, a, b, cc := qc.Quantize(0, s, 0, c)
	x, y, z, w := qc.Dequantize(l, a, b, cc)
	fmt.Printf("%d bits, error %.3f°\n", 2+3*qc.Bits(), quant.QuatAngle(0, s, 0, c, x, y, z, w)*180/math.Pi)
	// Output: 29 bits, error 0.142°
}

func ExampleNewGrid() {
	g, _ := quant.NewGrid(0.001, 16) // 1 mm, 65.536 m cells
	q := g.Quantize(1_000_000.0004)  // a thousand kilometres out
	cell, off := g.Split(q)
	fmt.Printf("%d %d %.4f\n", cell, off, g.Dequantize(q))
	// Output: 15258 51712 1000000.0000
}
