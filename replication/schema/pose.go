package schema

import (
	"math/bits"
	"unsafe"

	"github.com/archenet/archenet/replication/bitio"
	"github.com/archenet/archenet/replication/internal/quant"
)

// Most of what a game replicates is poses: a large-world position and a
// rotation (components.Transform and its look-alikes). A plan of exactly
// that shape — three world coordinates on one grid, then a quaternion, all
// float32 or all float64, nothing owner-only — skips the op interpreter:
// quantizePose, dequantizePose, write and readPose do the same work with
// the layout fixed when the plan is compiled. They produce the same lanes,
// bits, floats, positions and errors as the general paths
// (TestPoseKernelMatchesInterpreter and TestPoseReadMatchesInterpreter
// compare them on random and hostile values); only the speed differs.
type pose struct {
	pos  [3]uintptr // offsets of X, Y, Z
	rot  [4]uintptr // offsets of x, y, z, w
	wld  quant.Grid
	qt   quant.Quat
	f32  bool
	cb   uint8  // world cell bits
	lim  uint64 // zigzagged cells below lim take the one-word code
	qb   uint8  // quaternion bits per component
	mask uint64 // 2^cb − 1: the in-cell offset
}

// detectPose returns the pose kernel for p, or nil if p is not pose-shaped.
func detectPose(p *Plan) *pose {
	if len(p.ops) != 4 || len(p.lanes) != 7 || p.ownerOnly != 0 {
		return nil
	}
	num := p.ops[0].num
	if num != numF32 && num != numF64 {
		return nil
	}
	k := &pose{wld: p.ops[0].wld, qt: p.ops[3].qt, f32: num == numF32}
	for i := 0; i < 3; i++ {
		o := &p.ops[i]
		if o.kind != opWorld || o.num != num || o.lane != uint16(i) || o.wld != k.wld {
			return nil
		}
		k.pos[i] = o.off[0]
	}
	q := &p.ops[3]
	if q.kind != opQuat || q.num != num || q.lane != 3 {
		return nil
	}
	k.rot = q.off
	k.cb = uint8(k.wld.CellBits())
	k.qb = uint8(k.qt.Bits())
	// The same program the interpreter runs: one world run, one packed word.
	prog := p.progAll
	if len(prog) != 2 || prog[0].kind != stepWorld || prog[0].count != 3 || prog[1].kind != stepPack || prog[1].count != 4 {
		return nil
	}
	k.lim = prog[0].lim
	k.mask = 1<<k.cb - 1
	return k
}

// Quantize reads the component value at src (a pointer to a value of
// p.Type, e.g. from arche's World.Get) into lanes. Allocation-free, no
// reflection. Panics if len(lanes) < NumLanes; src must point to a p.Type.
func (p *Plan) quantize(src unsafe.Pointer, lanes []uint64) {
	k := p.pose
	if k == nil {
		p.quantizeOps(src, lanes)
		return
	}
	if k.f32 {
		quantizePose[float32](p, k, src, lanes)
	} else {
		quantizePose[float64](p, k, src, lanes)
	}
}

// quantizePose is Plan.quantize for a pose of float type F. Clamps are
// checked only for positions with a code a clamp produces (±the limit,
// or 0 from a NaN) and on the quaternion's path for input that is not unit length.
func quantizePose[F float32 | float64](p *Plan, k *pose, src unsafe.Pointer, lanes []uint64) {
	_ = lanes[6]
	at := func(off uintptr) float64 { return float64(*(*F)(unsafe.Add(src, off))) }
	g := &k.wld
	x, y, z := at(k.pos[0]), at(k.pos[1]), at(k.pos[2])
	q0, q1, q2 := g.Quantize(x), g.Quantize(y), g.Quantize(z)
	lanes[0], lanes[1], lanes[2] = uint64(q0), uint64(q1), uint64(q2)
	var c quant.Clamp
	lanes[3], lanes[4], lanes[5], lanes[6], c = k.qt.QuantizeClamp(at(k.rot[0]), at(k.rot[1]), at(k.rot[2]), at(k.rot[3]))
	if worldEdge(q0, x) || worldEdge(q1, y) || worldEdge(q2, z) || c != quant.ClampNone {
		p.checkPose(x, y, z, c)
	}
}

// checkPose counts the clamps of a pose whose quantization may have
// clamped: positions by World.Clamped, the rotation's clamp c as found.
//
//go:noinline
func (p *Plan) checkPose(x, y, z float64, c quant.Clamp) {
	g := &p.pose.wld
	for i, v := range [3]float64{x, y, z} {
		if ci := g.Clamped(v); ci != quant.ClampNone {
			p.noteClamp(uint16(i), ci)
		}
	}
	if c != quant.ClampNone {
		p.noteClamp(3, c)
	}
}

// dequantizePose is Plan.dequantize for a pose of float type F.
func dequantizePose[F float32 | float64](k *pose, lanes []uint64, dst unsafe.Pointer) {
	_ = lanes[6]
	set := func(off uintptr, v float64) { *(*F)(unsafe.Add(dst, off)) = F(v) }
	g := &k.wld
	set(k.pos[0], g.Dequantize(int64(lanes[0])))
	set(k.pos[1], g.Dequantize(int64(lanes[1])))
	set(k.pos[2], g.Dequantize(int64(lanes[2])))
	x, y, z, w := k.qt.Dequantize(lanes[3], lanes[4], lanes[5], lanes[6])
	set(k.rot[0], x)
	set(k.rot[1], y)
	set(k.rot[2], z)
	set(k.rot[3], w)
}

// readPose is Plan.Read for a pose. Each world lane whose code and offset
// lie in one 57-bit window is decoded from it; others, and any value that
// needs an error, go through ReadLane, so results and errors are the
// interpreter's.
func (p *Plan) readPose(r *bitio.Reader, lanes []uint64) {
	k := p.pose
	_ = lanes[6]
	cb := uint(k.cb) & 63
	for i := 0; i < 3; i++ {
		win, ok := r.Peek57()
		z := uint(bits.TrailingZeros64(win)) // 64 when win is 0
		if l := 2*z + 1; ok && l+cb <= 57 {
			z &= 31                         // it is ≤ 28: tell the compiler
			e := 1<<z | win>>(z+1)&(1<<z-1) // zz + 1
			q, ok := k.wld.Join(bitio.UnZigZag(e-1), win>>l&k.mask)
			if ok {
				r.Skip(l + cb)
				lanes[i] = uint64(q)
				continue
			}
		}
		lanes[i] = ReadLane(r, &p.lanes[i])
	}
	p.readPack(r, &p.progAll[1], lanes)
}

// Write appends the full encoding of lanes: every group in order, except
// owner-only groups when owner is false (they are omitted entirely).
// Runs of fixed-width lanes are packed into single 64-bit writes.
// Allocation-free once w's buffer has grown.
func (p *Plan) Write(w *bitio.Writer, lanes []uint64, owner bool) {
	// A pose is written here, with its layout fixed (one call layer less
	// on the hottest path); everything else, and a pose with a far grid
	// cell, by the program interpreter.
	k := p.pose
	if k == nil {
		p.writeProg(w, lanes, owner)
		return
	}
	_ = lanes[6]
	cb := uint(k.cb) & 63
	x0, x1, x2 := lanes[0], lanes[1], lanes[2]
	z0 := bitio.ZigZag(int64(x0) >> cb)
	z1 := bitio.ZigZag(int64(x1) >> cb)
	z2 := bitio.ZigZag(int64(x2) >> cb)
	if z0|z1|z2 >= k.lim { // lim is a power of two
		p.writeProg(w, lanes, owner)
		return
	}
	var words [packWords]uint64
	var nw int
	var acc, v uint64
	var n, width uint
	if z0|z1|z2 < uint64(len(egTable)) { // cells near the origin: codes from the table
		e0, e1, e2 := egTable[z0&0xff], egTable[z1&0xff], egTable[z2&0xff]
		m := k.mask
		acc, n = uint64(e0&egCodeMask)|(x0&m)<<(e0>>egWidthShift), uint(e0>>egWidthShift)+cb
		v, width = uint64(e1&egCodeMask)|(x1&m)<<(e1>>egWidthShift), uint(e1>>egWidthShift)+cb
		acc, n, nw = merge(acc, n, v, width, &words, nw)
		v, width = uint64(e2&egCodeMask)|(x2&m)<<(e2>>egWidthShift), uint(e2>>egWidthShift)+cb
		acc, n, nw = merge(acc, n, v, width, &words, nw)
	} else {
		acc, n = worldCode(z0, x0, cb)
		v, width = worldCode(z1, x1, cb)
		acc, n, nw = merge(acc, n, v, width, &words, nw)
		v, width = worldCode(z2, x2, cb)
		acc, n, nw = merge(acc, n, v, width, &words, nw)
	}
	qb := uint(k.qb) & 31
	v = lanes[3] | lanes[4]<<2 | lanes[5]<<((2+qb)&63) | lanes[6]<<((2+2*qb)&63)
	acc, n, nw = merge(acc, n, v, 2+3*qb, &words, nw)
	for _, x := range words[:nw] {
		w.WriteBits(x, 64)
	}
	w.WriteBits(acc, n)
}

// worldCode returns the one-word full encoding of a world lane x whose
// zigzagged cell is zz (zz < the step's lim): the exp-Golomb code of zz+1 =
// 1xxx (z bits x) — z zeros, a one, then the x bits, LSB first — followed by
// the cb-bit offset.
func worldCode(zz, x uint64, cb uint) (uint64, uint) {
	e := zz + 1
	z := uint(bits.Len64(e)-1) & 31
	v := (e<<1 | 1) << z                       // the leading one of e lands at bit 2z+1
	v ^= (x&(1<<cb-1) ^ 1) << ((2*z + 1) & 63) // clear it; the offset goes there
	return v, 2*z + 1 + cb
}

// egTable holds the exp-Golomb codes of small zigzagged cells zz: the code
// of zz+1 in the low bits, its width from bit egWidthShift.
var egTable = func() (t [256]uint32) {
	for zz := range t {
		code, width := worldCode(uint64(zz), 0, 0)
		t[zz] = uint32(code) | uint32(width)<<egWidthShift
	}
	return t
}()

const (
	egWidthShift = 24
	egCodeMask   = 1<<egWidthShift - 1
)
