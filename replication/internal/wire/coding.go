package wire

import (
	"github.com/archenet/archenet/replication/bitio"
	"github.com/archenet/archenet/replication/schema"
)

// Lane classes of the residual coding.
const (
	ClassWorld = iota // schema.LaneWorld: positions
	ClassOther        // every other numeric lane (quaternion components, scalars, velocities)
	NumClasses
)

// Bounds of the coding parameters (3 bits of offset, 4 of cap, 4 of plain
// order on the wire).
const (
	MinCodeOff = -4
	MaxCodeOff = 3
	MaxCodeCap = 15
	CodingBits = NumClasses * 11 // a Coding's size on the wire
	MaxCodeCtx = 16              // contexts above are clamped (k ≤ MaxCodeCap anyway)
)

// Coding is the residual coding parameters of one tick, which a snapshot
// header carries: per lane class, the offset from a predicted lane's
// context to its Rice order, the largest such order, and the order of an
// unpredicted lane (see package codec).
type Coding struct {
	Off   [NumClasses]int8
	Cap   [NumClasses]uint8
	Plain [NumClasses]uint8
}

// DefaultCoding is where an encoder starts before it has seen residuals,
// and the coding of views decoded against no baseline.
var DefaultCoding = Coding{Cap: [NumClasses]uint8{8, 8}, Plain: [NumClasses]uint8{2, 2}}

// LaneClass returns the residual coding class of a lane kind.
func LaneClass(k schema.LaneKind) int {
	if k == schema.LaneWorld {
		return ClassWorld
	}
	return ClassOther
}

// OrderCtx returns the Rice order of a predicted lane of class cl whose
// context is ctx: clamp(ctx + Off, 0, Cap).
func (c *Coding) OrderCtx(cl, ctx int) uint {
	k := ctx + int(c.Off[cl])
	return uint(max(0, min(k, int(c.Cap[cl]))))
}

// Valid reports whether every parameter is within its bounds.
func (c *Coding) Valid() bool {
	for cl := range NumClasses {
		if c.Off[cl] < MinCodeOff || c.Off[cl] > MaxCodeOff || c.Cap[cl] > MaxCodeCap || c.Plain[cl] > MaxCodeCap {
			return false
		}
	}
	return true
}

// AppendBits writes the coding's CodingBits bits.
func (c *Coding) AppendBits(w *bitio.Writer) {
	for cl := range NumClasses {
		w.WriteBits(uint64(int(c.Off[cl])-MinCodeOff), 3)
		w.WriteBits(uint64(c.Cap[cl]), 4)
		w.WriteBits(uint64(c.Plain[cl]), 4)
	}
}

// ReadBits reads a coding (check it with Valid).
func (c *Coding) ReadBits(r *bitio.Reader) {
	for cl := range NumClasses {
		c.Off[cl] = int8(int(r.ReadBits(3)) + MinCodeOff)
		c.Cap[cl] = uint8(r.ReadBits(4))
		c.Plain[cl] = uint8(r.ReadBits(4))
	}
}
