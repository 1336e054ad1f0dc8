package schema

import (
	"github.com/archenet/archenet/replication/internal/quant"
	"math"
	"unsafe"
)

// Interpolable reports whether the component has a field that
// [Plan.InterpolateBytes] blends (a float, an angle, a world position, a
// quaternion, a velocity); one of only integers and bools just steps.
func (p *Plan) Interpolable() bool {
	for i := range p.ops {
		switch p.ops[i].kind {
		case opScalar, opAngle, opWorld, opRaw, opQuat, opVel:
			return true
		}
	}
	return false
}

// interpolate is InterpolateBytes on a pointer to the component.
func (p *Plan) interpolate(a, b []uint64, f float64, dst unsafe.Pointer) {
	if len(p.lanes) == 0 {
		return
	}
	_, _ = a[len(p.lanes)-1], b[len(p.lanes)-1]
	switch f {
	case 0: // on a snapshot: exactly its value
		p.dequantize(a, dst)
		return
	case 1:
		p.dequantize(b, dst)
		return
	}
	step := a
	if f >= 1 {
		step = b
	}
	lerp := func(x, y float64) float64 { return x + (y-x)*f }
	for i := range p.ops {
		o := &p.ops[i]
		la, lb := a[o.lane:], b[o.lane:]
		switch o.kind {
		case opScalar:
			setF64(dst, o.off[0], o.num, lerp(o.sc.Dequantize(la[0]), o.sc.Dequantize(lb[0])))
		case opWorld:
			setF64(dst, o.off[0], o.num, lerp(o.wld.Dequantize(int64(la[0])), o.wld.Dequantize(int64(lb[0]))))
		case opAngle:
			x, y := o.ang.Dequantize(la[0]), o.ang.Dequantize(lb[0])
			v := math.Remainder(x+math.Remainder(y-x, 2*math.Pi)*f, 2*math.Pi)
			if v >= math.Pi {
				v = -math.Pi
			}
			setF64(dst, o.off[0], o.num, v)
		case opQuat:
			xa, ya, za, wa := o.qt.Dequantize(la[0], la[1], la[2], la[3])
			xb, yb, zb, wb := o.qt.Dequantize(lb[0], lb[1], lb[2], lb[3])
			q := quant.Slerp([4]float64{xa, ya, za, wa}, [4]float64{xb, yb, zb, wb}, f)
			for i := range 4 {
				setF64(dst, o.off[i], o.num, q[i])
			}
		case opVel:
			xa, ya, za := o.vel.Dequantize(la[0] != 0, la[1], la[2], la[3])
			xb, yb, zb := o.vel.Dequantize(lb[0] != 0, lb[1], lb[2], lb[3])
			setF64(dst, o.off[0], o.num, lerp(xa, xb))
			setF64(dst, o.off[1], o.num, lerp(ya, yb))
			setF64(dst, o.off[2], o.num, lerp(za, zb))
		case opRaw:
			if o.num == numF32 {
				x, y := math.Float32frombits(uint32(la[0])), math.Float32frombits(uint32(lb[0]))
				*(*float32)(unsafe.Add(dst, o.off[0])) = float32(lerp(float64(x), float64(y)))
			} else {
				*(*float64)(unsafe.Add(dst, o.off[0])) = lerp(math.Float64frombits(la[0]), math.Float64frombits(lb[0]))
			}
		case opInt:
			storeInt(dst, o.off[0], o.num, uint64(o.irng.Dequantize(step[o.lane])))
		case opVarint, opUvarint, opBool:
			storeInt(dst, o.off[0], o.num, step[o.lane])
		case opRef, opRefLanes:
			storeRef(o, step[o.lane:], dst)
		}
	}
}
