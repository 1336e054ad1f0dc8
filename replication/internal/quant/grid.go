package quant

import (
	"fmt"
	"math"
)

// Grid quantizes large-world coordinates. A coordinate v becomes the
// integer q = round(v / Step) (an int64); on the wire q is split into a grid
// cell index q >> CellBits and an offset inside the cell (CellBits bits), and
// a receiver rebuilds v as the cell's float64 origin plus offset × Step.
// Because the origin is an exact float64 and the offset is a small integer,
// precision is Step/2 everywhere: at the origin and a thousand kilometres
// away alike. Deltas between ticks are taken on q, so crossing a cell
// boundary costs nothing extra.
//
// Coordinates are clamped to ±Limit (2^50 steps: ±1.1 × 10^12 m at 1 mm);
// NaN quantizes to 0.
type Grid struct {
	step, inv float64
	cellBits  uint8
}

// GridLimitSteps is the largest |q| a [Grid] produces.
const GridLimitSteps = int64(1) << 50

// DefaultCellBits is the offset width used when a tag gives none: 2^16 steps
// per cell (65.536 m at 1 mm).
const DefaultCellBits = 16

// NewGrid returns a large-world coordinate with the given step and cell size
// of 2^cellBits steps (1 ≤ cellBits ≤ 32).
func NewGrid(step float64, cellBits uint) (Grid, error) {
	if !(step > 0) || math.IsInf(step, 0) {
		return Grid{}, fmt.Errorf("%w: step %v must be positive and finite", ErrBadParams, step)
	}
	if cellBits < 1 || cellBits > MaxBits {
		return Grid{}, fmt.Errorf("%w: cell bits %d not in 1..%d", ErrBadParams, cellBits, MaxBits)
	}
	return Grid{step: step, inv: 1 / step, cellBits: uint8(cellBits)}, nil
}

// Quantize returns q = round(v / Step) (ties to even), clamped to
// ±[GridLimitSteps]; NaN gives 0.
func (g Grid) Quantize(v float64) int64 {
	t := v * g.inv
	if !(t < float64(GridLimitSteps) && t > -float64(GridLimitSteps)) {
		return clampGrid(t)
	}
	// Adding 1.5·2⁵² rounds t to an integer held in the low mantissa bits
	// (|t| < 2⁵¹), so the difference of the bit patterns is q: no
	// float→int conversion and no floor fix-up.
	const magic = 0x1.8p52
	return int64(math.Float64bits(t+magic) - math.Float64bits(magic))
}

// clampGrid is Quantize's path for |t| ≥ the limit and NaN.
func clampGrid(t float64) int64 {
	switch {
	case t >= float64(GridLimitSteps):
		return GridLimitSteps
	case t <= -float64(GridLimitSteps):
		return -GridLimitSteps
	}
	return 0 // NaN
}

// Clamped reports whether Quantize clamps v: NaN, ±Inf, or beyond ±Limit
// (see [Clamp]). Quantize gives such values a multiple of the limit (0 or
// ±GridLimitSteps), so a caller that cares can check only those codes:
// q&(GridLimitSteps−1) == 0.
func (g Grid) Clamped(v float64) Clamp {
	t := v * g.inv
	if t <= float64(GridLimitSteps) && t >= -float64(GridLimitSteps) {
		return ClampNone
	}
	return floatClamp(v)
}

// Dequantize returns the coordinate of q: q × Step, which equals the cell's
// origin plus offset × Step (q is exact in a float64, |q| ≤ 2⁵⁰, so the
// product has a single rounding).
func (g Grid) Dequantize(q int64) float64 {
	q = max(-GridLimitSteps, min(GridLimitSteps, q))
	return float64(q) * g.step
}

// Split returns the cell index and the offset inside the cell of q.
func (g Grid) Split(q int64) (cell int64, offset uint64) {
	return q >> g.cellBits, uint64(q) & (uint64(1)<<g.cellBits - 1)
}

// Join is the inverse of [Grid.Split]. ok is false when the result would be
// outside ±GridLimitSteps (a corrupt or hostile cell index) or the offset
// does not fit in CellBits.
func (g Grid) Join(cell int64, offset uint64) (q int64, ok bool) {
	lim := GridLimitSteps >> g.cellBits
	if cell < -lim-1 || cell > lim || offset >= uint64(1)<<g.cellBits {
		return 0, false
	}
	q = cell<<g.cellBits | int64(offset)
	if q > GridLimitSteps || q < -GridLimitSteps {
		return 0, false
	}
	return q, true
}

// Origin returns the float64 origin of a grid cell.
func (g Grid) Origin(cell int64) float64 {
	return float64(cell) * float64(uint64(1)<<g.cellBits) * g.step
}

// Step returns the quantization step.
func (g Grid) Step() float64 { return g.step }

// CellBits returns the width of the in-cell offset.
func (g Grid) CellBits() uint { return uint(g.cellBits) }

// CellSize returns the edge length of a grid cell: 2^CellBits × Step.
func (g Grid) CellSize() float64 { return float64(uint64(1)<<g.cellBits) * g.step }

// MaxError returns Step/2.
func (g Grid) MaxError() float64 { return g.step / 2 }
