package schema

import (
	"fmt"
	"math"
	"math/bits"
	"reflect"
	"unsafe"

	"github.com/archenet/archenet/replication/bitio"
)

// ErrCorrupt is wrapped by decode errors for values no encoder produces
// (codes out of range, impossible cells).
var ErrCorrupt = fmt.Errorf("schema: corrupt value")

// Plan is the compiled replication layout of one component type: its lanes
// (the quantized integers that represent a value), its field groups (what a
// field mask selects), and the instructions that move values between a
// struct in memory and lanes without reflection. Plans are immutable and safe
// for concurrent use.
type Plan struct {
	// ID is the component's index in its [Registry] (0..63).
	ID uint8
	// Name is the registered name, part of the protocol hash.
	Name string
	// Type is the Go struct type.
	Type reflect.Type
	// Size is the struct size in bytes.
	Size uintptr

	lanes     []Lane
	groups    []Group
	ops       []op
	desc      string
	maxBits   int
	minBits   int    // lower bound of the full encoding without owner-only groups
	ownerOnly uint64 // group mask
	progAll   []step // full-encoding program with owner-only groups
	progOther []step // full-encoding program without them
}

// step is one instruction of a full-encoding program: a run of fixed-width
// lanes packed into one ≤ 64-bit word, or one variable-width lane.
type step struct {
	first, count uint16
	bits         uint8 // total width of a packed run; a world lane's cell bits
	kind         uint8
	w            [maxPack]uint8 // lane widths of a packed run
}

// maxPack bounds the lanes of one packed step, so their widths sit in the
// step itself.
const maxPack = 8

const (
	stepPack  uint8 = iota // lanes[first:first+count] are fixed width, packed
	stepRest               // a Rest lane; when set, the next step (the axes) is skipped
	stepLane               // a variable-width lane (varint)
	stepWorld              // a world lane: exp-Golomb cell + offset
)

func (p *Plan) program(owner bool) []step {
	var prog []step
	for i := 0; i < len(p.lanes); i++ {
		l := &p.lanes[i]
		if !owner && p.groups[l.Group].OwnerOnly {
			continue
		}
		switch l.Kind {
		case LaneRest:
			prog = append(prog, step{first: uint16(i), count: 1, bits: 1, kind: stepRest})
			// The three axes form their own packed step, skipped when at rest.
			ax := &p.lanes[i+1]
			prog = append(prog, step{first: uint16(i + 1), count: 3, bits: 3 * ax.Bits, kind: stepPack, w: [maxPack]uint8{ax.Bits, ax.Bits, ax.Bits}})
			i += 3
		case LaneWorld:
			prog = append(prog, step{first: uint16(i), count: 1, bits: l.Bits, kind: stepWorld})
		case LaneVarint, LaneUvarint:
			prog = append(prog, step{first: uint16(i), count: 1, kind: stepLane})
		default:
			n := len(prog)
			if n > 0 && prog[n-1].kind == stepPack && int(prog[n-1].bits)+int(l.Bits) <= 64 && prog[n-1].count < maxPack &&
				int(prog[n-1].first+prog[n-1].count) == i && (n < 2 || prog[n-2].kind != stepRest) {
				prog[n-1].w[prog[n-1].count] = l.Bits
				prog[n-1].count++
				prog[n-1].bits += l.Bits
			} else {
				prog = append(prog, step{first: uint16(i), count: 1, bits: l.Bits, kind: stepPack, w: [maxPack]uint8{l.Bits}})
			}
		}
	}
	return prog
}

func (p *Plan) finish() {
	bits := 0
	for i := range p.lanes {
		l := &p.lanes[i]
		switch l.Kind {
		case LaneUvarint, LaneVarint:
			bits += 80
		case LaneWorld:
			bits += 80 + int(l.Bits)
		default:
			bits += int(l.Bits)
		}
	}
	p.maxBits = bits
	for i := 0; i < len(p.lanes); i++ {
		l := &p.lanes[i]
		if p.groups[l.Group].OwnerOnly {
			continue
		}
		switch l.Kind {
		case LaneUvarint, LaneVarint:
			p.minBits += 8
		case LaneWorld:
			p.minBits += 1 + int(l.Bits)
		case LaneFixed, LaneAngle, LaneBool, LaneQuatIndex, LaneRest:
			if l.Kind == LaneRest {
				p.minBits++ // the axes may be skipped
				i += 3
				continue
			}
			p.minBits += int(l.Bits)
		}
	}
	p.progAll = p.program(true)
	p.progOther = p.program(false)
	for i, g := range p.groups {
		if g.OwnerOnly {
			p.ownerOnly |= 1 << i
		}
	}
}

// NumLanes returns how many uint64 lanes a value of this component takes.
func (p *Plan) NumLanes() int { return len(p.lanes) }

// Lanes returns the lane descriptors (do not modify).
func (p *Plan) Lanes() []Lane { return p.lanes }

// Groups returns the field groups (do not modify); group i is bit i of a
// field mask.
func (p *Plan) Groups() []Group { return p.groups }

// OwnerOnlyMask returns the field-mask bits of owner-only groups.
func (p *Plan) OwnerOnlyMask() uint64 { return p.ownerOnly }

// AllGroups returns the field mask with every group set.
func (p *Plan) AllGroups() uint64 {
	if len(p.groups) == 64 {
		return math.MaxUint64
	}
	return 1<<len(p.groups) - 1
}

// MinBits returns a lower bound of the full encoding's size in bits, for
// any owner flag.
func (p *Plan) MinBits() int { return p.minBits }

// MaxBits returns an upper bound of the full encoding's size in bits.
func (p *Plan) MaxBits() int { return p.maxBits }

// Describe returns the canonical text of the layout that the protocol hash
// covers: one line per field with its Go kind and precision.
func (p *Plan) Describe() string { return p.desc }

func f64(ptr unsafe.Pointer, off uintptr, n numKind) float64 {
	if n == numF32 {
		return float64(*(*float32)(unsafe.Add(ptr, off)))
	}
	return *(*float64)(unsafe.Add(ptr, off))
}

func setF64(ptr unsafe.Pointer, off uintptr, n numKind, v float64) {
	if n == numF32 {
		*(*float32)(unsafe.Add(ptr, off)) = float32(v)
		return
	}
	*(*float64)(unsafe.Add(ptr, off)) = v
}

func loadInt(ptr unsafe.Pointer, off uintptr, n numKind) uint64 {
	p := unsafe.Add(ptr, off)
	switch n {
	case numI8:
		return uint64(int64(*(*int8)(p)))
	case numI16:
		return uint64(int64(*(*int16)(p)))
	case numI32:
		return uint64(int64(*(*int32)(p)))
	case numI64, numU64:
		return *(*uint64)(p)
	case numU8:
		return uint64(*(*uint8)(p))
	case numU16:
		return uint64(*(*uint16)(p))
	case numU32:
		return uint64(*(*uint32)(p))
	case numBool:
		if *(*bool)(p) {
			return 1
		}
	}
	return 0
}

func storeInt(ptr unsafe.Pointer, off uintptr, n numKind, v uint64) {
	p := unsafe.Add(ptr, off)
	switch n {
	case numI8, numU8:
		*(*uint8)(p) = uint8(v)
	case numI16, numU16:
		*(*uint16)(p) = uint16(v)
	case numI32, numU32:
		*(*uint32)(p) = uint32(v)
	case numI64, numU64:
		*(*uint64)(p) = v
	case numBool:
		*(*bool)(p) = v != 0
	}
}

// Quantize reads the component value at src (a pointer to a value of
// p.Type, e.g. from arche's World.Get) into lanes. Allocation-free, no
// reflection. Panics if len(lanes) < NumLanes; src must point to a p.Type.
func (p *Plan) Quantize(src unsafe.Pointer, lanes []uint64) {
	if len(p.lanes) == 0 {
		return // a marker component
	}
	_ = lanes[len(p.lanes)-1]
	for i := range p.ops {
		o := &p.ops[i]
		l := lanes[o.lane:]
		switch o.kind {
		case opScalar:
			l[0] = o.sc.Quantize(f64(src, o.off[0], o.num))
		case opWorld:
			l[0] = uint64(o.wld.Quantize(f64(src, o.off[0], o.num)))
		case opAngle:
			l[0] = o.ang.Quantize(f64(src, o.off[0], o.num))
		case opQuat:
			l[0], l[1], l[2], l[3] = o.qt.Quantize(f64(src, o.off[0], o.num), f64(src, o.off[1], o.num),
				f64(src, o.off[2], o.num), f64(src, o.off[3], o.num))
		case opVel:
			rest, x, y, z := o.vel.Quantize(f64(src, o.off[0], o.num), f64(src, o.off[1], o.num), f64(src, o.off[2], o.num))
			l[0], l[1], l[2], l[3] = 0, x, y, z
			if rest {
				l[0] = 1
			}
		case opRaw:
			if o.num == numF32 {
				l[0] = uint64(math.Float32bits(*(*float32)(unsafe.Add(src, o.off[0]))))
			} else {
				l[0] = math.Float64bits(*(*float64)(unsafe.Add(src, o.off[0])))
			}
		case opInt:
			v := loadInt(src, o.off[0], o.num)
			if o.num == numU64 && v > math.MaxInt64 {
				l[0] = o.irng.MaxQ()
			} else {
				l[0] = o.irng.Quantize(int64(v))
			}
		case opVarint, opUvarint, opBool:
			l[0] = loadInt(src, o.off[0], o.num)
		}
	}
}

// Dequantize writes the value that lanes represent into the struct at dst.
// Any lane values are accepted (out-of-range codes clamp), so it never
// panics on decoded input. Fields that are not replicated are left as they
// are. Panics if len(lanes) < NumLanes.
func (p *Plan) Dequantize(lanes []uint64, dst unsafe.Pointer) {
	if len(p.lanes) == 0 {
		return
	}
	_ = lanes[len(p.lanes)-1]
	for i := range p.ops {
		o := &p.ops[i]
		l := lanes[o.lane:]
		switch o.kind {
		case opScalar:
			setF64(dst, o.off[0], o.num, o.sc.Dequantize(l[0]))
		case opWorld:
			setF64(dst, o.off[0], o.num, o.wld.Dequantize(int64(l[0])))
		case opAngle:
			setF64(dst, o.off[0], o.num, o.ang.Dequantize(l[0]))
		case opQuat:
			x, y, z, w := o.qt.Dequantize(l[0], l[1], l[2], l[3])
			setF64(dst, o.off[0], o.num, x)
			setF64(dst, o.off[1], o.num, y)
			setF64(dst, o.off[2], o.num, z)
			setF64(dst, o.off[3], o.num, w)
		case opVel:
			x, y, z := o.vel.Dequantize(l[0] != 0, l[1], l[2], l[3])
			setF64(dst, o.off[0], o.num, x)
			setF64(dst, o.off[1], o.num, y)
			setF64(dst, o.off[2], o.num, z)
		case opRaw:
			if o.num == numF32 {
				*(*float32)(unsafe.Add(dst, o.off[0])) = math.Float32frombits(uint32(l[0]))
			} else {
				*(*float64)(unsafe.Add(dst, o.off[0])) = math.Float64frombits(l[0])
			}
		case opInt:
			storeInt(dst, o.off[0], o.num, uint64(o.irng.Dequantize(l[0])))
		case opVarint, opUvarint, opBool:
			storeInt(dst, o.off[0], o.num, l[0])
		}
	}
}

// Round quantizes the value at ptr and writes the dequantized result back,
// so the server simulates exactly what clients receive (do this at the end
// of a tick for predicted entities). lanes is scratch of NumLanes.
func (p *Plan) Round(ptr unsafe.Pointer, lanes []uint64) {
	p.Quantize(ptr, lanes)
	p.Dequantize(lanes, ptr)
}

// WriteLane writes lane value v with lane l's full (absolute) encoding.
func WriteLane(w *bitio.Writer, l *Lane, v uint64) {
	switch l.Kind {
	case LaneUvarint:
		w.WriteUvarint(v)
	case LaneVarint:
		w.WriteVarint(int64(v))
	case LaneWorld:
		cell, off := l.World.Split(int64(v))
		w.WriteExpGolomb(bitio.ZigZag(cell), 0)
		w.WriteBits(off, uint(l.Bits))
	default:
		w.WriteBits(v, uint(l.Bits))
	}
}

// ReadLane reads a value written by [WriteLane] and validates it; an invalid
// value sets r's sticky error (wrapping [ErrCorrupt]) and returns 0.
func ReadLane(r *bitio.Reader, l *Lane) uint64 {
	var v uint64
	switch l.Kind {
	case LaneUvarint:
		v = r.ReadUvarint()
		if v > l.Max {
			r.SetErr(fmt.Errorf("%w: %d exceeds %d", ErrCorrupt, v, l.Max))
			return 0
		}
	case LaneVarint:
		s := r.ReadVarint()
		if s < l.Min || s > int64(l.Max) {
			r.SetErr(fmt.Errorf("%w: %d outside %d..%d", ErrCorrupt, s, l.Min, int64(l.Max)))
			return 0
		}
		v = uint64(s)
	case LaneWorld:
		cell := bitio.UnZigZag(r.ReadExpGolomb(0))
		off := r.ReadBits(uint(l.Bits))
		q, ok := l.World.Join(cell, off)
		if !ok && r.Err() == nil {
			r.SetErr(fmt.Errorf("%w: grid cell %d out of range", ErrCorrupt, cell))
		}
		v = uint64(q)
	default:
		v = r.ReadBits(uint(l.Bits))
		if v > l.Max {
			r.SetErr(fmt.Errorf("%w: code %d exceeds %d", ErrCorrupt, v, l.Max))
			return 0
		}
	}
	if r.Err() != nil {
		return 0
	}
	return v
}

// WriteGroup writes the lanes of group g in full.
func (p *Plan) WriteGroup(w *bitio.Writer, g int, lanes []uint64) {
	gr := &p.groups[g]
	for i := gr.First; i < gr.First+gr.Count; i++ {
		l := &p.lanes[i]
		WriteLane(w, l, lanes[i])
		if l.Kind == LaneRest && lanes[i] != 0 {
			return // a resting velocity sends no axes
		}
	}
}

// ReadGroup reads group g into lanes; see [ReadLane] for errors.
func (p *Plan) ReadGroup(r *bitio.Reader, g int, lanes []uint64) {
	gr := &p.groups[g]
	for i := gr.First; i < gr.First+gr.Count; i++ {
		l := &p.lanes[i]
		lanes[i] = ReadLane(r, l)
		if l.Kind == LaneRest && lanes[i] != 0 {
			for j := i + 1; j < gr.First+gr.Count; j++ {
				lanes[j] = p.lanes[j].Zero
			}
			return
		}
	}
}

// Write appends the full encoding of lanes: every group in order, except
// owner-only groups when owner is false (they are omitted entirely).
// Runs of fixed-width lanes are packed into single 64-bit writes.
// Allocation-free once w's buffer has grown.
func (p *Plan) Write(w *bitio.Writer, lanes []uint64, owner bool) {
	prog := p.progAll
	if !owner {
		prog = p.progOther
	}
	lanes = lanes[:len(p.lanes)]
	// Bits gather in a local accumulator and reach the writer 64 at a time.
	var acc uint64
	var n uint
	for si := 0; si < len(prog); si++ {
		st := &prog[si]
		var v uint64
		var width uint
		switch st.kind {
		case stepPack:
			ls := lanes[st.first : st.first+st.count]
			var sh uint8
			for j, x := range ls {
				v |= x << sh
				sh += st.w[j&(maxPack-1)]
			}
			width = uint(st.bits)
		case stepWorld:
			q := int64(lanes[st.first])
			cb := uint(st.bits)
			zz := bitio.ZigZag(q >> cb)
			off := uint64(q) & (1<<cb - 1)
			if zz >= 1<<20 || 2*uint(bits.Len64(zz+1))-1+cb > 64 {
				w.WriteBits(acc, n)
				acc, n = 0, 0
				WriteLane(w, &p.lanes[st.first], lanes[st.first])
				continue
			}
			x := zz + 1
			z := uint(bits.Len64(x)) - 1
			code := 1<<z | (x&^(1<<z))<<(z+1)
			v, width = code|off<<(2*z+1), 2*z+1+cb
		case stepRest:
			v, width = lanes[st.first]&1, 1
			if v != 0 {
				si++ // a resting velocity sends no axes
			}
		default:
			w.WriteBits(acc, n)
			acc, n = 0, 0
			WriteLane(w, &p.lanes[st.first], lanes[st.first])
			continue
		}
		if n+width <= 64 {
			acc |= v << n
			n += width
		} else {
			w.WriteBits(acc, n)
			acc, n = v, width
		}
	}
	w.WriteBits(acc, n)
}

// Read decodes a full encoding written by [Plan.Write] with the same owner
// flag into lanes (owner-only lanes are left untouched when owner is false).
// It returns r's error: truncated input is [bitio.ErrShortBuffer], invalid
// values wrap [ErrCorrupt]. Never panics; never allocates on success.
func (p *Plan) Read(r *bitio.Reader, lanes []uint64, owner bool) error {
	if len(lanes) < len(p.lanes) {
		return fmt.Errorf("schema: %s: lane buffer of %d, need %d", p.Name, len(lanes), len(p.lanes))
	}
	prog := p.progAll
	if !owner {
		prog = p.progOther
	}
	ls := p.lanes
	lanes = lanes[:len(ls)]
	for si := 0; si < len(prog); si++ {
		st := &prog[si]
		switch st.kind {
		case stepPack:
			acc := r.ReadBits(uint(st.bits))
			for i := int(st.first); i < int(st.first)+int(st.count); i++ {
				l := &ls[i]
				v := acc & (1<<l.Bits - 1)
				acc >>= l.Bits
				if v > l.Max {
					r.SetErr(fmt.Errorf("%w: %s code %d exceeds %d", ErrCorrupt, p.groups[l.Group].Name, v, l.Max))
				}
				lanes[i] = v
			}
		case stepRest:
			v := r.ReadBits(1)
			lanes[st.first] = v
			if v != 0 {
				si++
				for i := int(st.first) + 1; i <= int(st.first)+3; i++ {
					lanes[i] = ls[i].Zero
				}
			}
		default:
			lanes[st.first] = ReadLane(r, &ls[st.first])
		}
		if r.Err() != nil {
			return r.Err()
		}
	}
	return nil
}
