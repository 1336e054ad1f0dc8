package schema

import (
	"fmt"
	"math"
	"reflect"
	"sync/atomic"
	"unsafe"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/bitio"
	"github.com/archenet/archenet/replication/internal/quant"
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
	pose      *pose  // the pose kernel, for plans of that shape (pose.go)
	// clamps counts clamped values per group; clampGen is the registry's
	// generation counter (clamp.go).
	clamps   []clampCounters
	clampGen *atomic.Uint64
	// msg: a message type (RegisterMessage); refs the offsets of its
	// components.Ref fields.
	msg  bool
	refs []RefField
	// relation: the component is an arche relation (its first field
	// embeds ecs.Relation)
	relation bool
}

// IsRelation reports whether the component is an arche relation
// component (its first field embeds arche's ecs.Relation): its target is
// replicated with the entity's identity (a spawn entry), mapped to the
// clients' mirrors.
func (p *Plan) IsRelation() bool { return p.relation }

// RefField is a components.Ref field of a message: its offset in the
// struct and its lane.
type RefField struct {
	Offset uintptr
	Lane   int
}

// IsMessage reports whether the plan is a message type's
// ([RegisterMessage]); its ID is then its message id.
func (p *Plan) IsMessage() bool { return p.msg }

// Refs returns the plan's components.Ref fields, in field order (do not
// modify).
func (p *Plan) Refs() []RefField { return p.refs }

// step is one instruction of a full-encoding program: a run of fixed-width
// lanes packed into one ≤ 64-bit word, a run of world lanes with the same
// cell width, or one variable-width lane.
type step struct {
	kind  uint8
	bits  uint8 // total width of a packed run; the cell bits of a world run
	count uint8
	first uint16
	// lim: a world run's zigzagged cells below lim (a power of two) take
	// the one-word fast path (code and offset fit in 64 bits).
	lim uint64
	sh  [maxPack]uint8 // lane shifts inside a packed run's word
}

// maxPack bounds the lanes of one packed step, so their shifts sit in the
// step itself.
const maxPack = 8

const (
	stepPack  uint8 = iota // lanes[first:first+count] are fixed width, packed
	stepRest               // a Rest lane; when set, the next step (the axes) is skipped
	stepLane               // a variable-width lane (varint)
	stepWorld              // world lanes[first:first+count]: exp-Golomb cell + offset each
)

func (p *Plan) program(owner bool) []step {
	var prog []step
	pack := func(i int, bits uint8) {
		n := len(prog)
		if n > 0 && prog[n-1].kind == stepPack && int(prog[n-1].bits)+int(bits) <= 64 && prog[n-1].count < maxPack &&
			int(prog[n-1].first)+int(prog[n-1].count) == i && (n < 2 || prog[n-2].kind != stepRest) {
			last := &prog[n-1]
			last.sh[last.count] = last.bits
			last.count++
			last.bits += bits
			return
		}
		prog = append(prog, step{first: uint16(i), count: 1, bits: bits, kind: stepPack})
	}
	for i := 0; i < len(p.lanes); i++ {
		l := &p.lanes[i]
		if !owner && p.groups[l.Group].OwnerOnly {
			continue
		}
		switch l.Kind {
		case LaneRest:
			prog = append(prog, step{first: uint16(i), count: 1, bits: 1, kind: stepRest})
			// The three axes form their own packed step, skipped when at rest.
			ax := p.lanes[i+1].Bits
			prog = append(prog, step{first: uint16(i + 1), count: 3, bits: 3 * ax, kind: stepPack, sh: [maxPack]uint8{0, ax, 2 * ax}})
			i += 3
		case LaneWorld:
			// Consecutive world lanes with one cell width form a run.
			n := len(prog)
			if n > 0 && prog[n-1].kind == stepWorld && prog[n-1].bits == l.Bits && prog[n-1].count < maxPack &&
				int(prog[n-1].first)+int(prog[n-1].count) == i {
				prog[n-1].count++
				continue
			}
			// The code of zigzagged cell zz is 2z+1 bits, z = ⌊log2(zz+1)⌋;
			// with the offset it fits one word while z ≤ (63−cellBits)/2,
			// which zz < 2^z guarantees. lim is a power of two, so several
			// cells can be tested at once by OR-ing them.
			zmax := min((63-uint(l.Bits))/2, 20)
			prog = append(prog, step{first: uint16(i), count: 1, bits: l.Bits, kind: stepWorld, lim: 1 << zmax})
		case LaneVarint, LaneUvarint, LaneRef:
			prog = append(prog, step{first: uint16(i), count: 1, kind: stepLane})
		default:
			pack(i, l.Bits)
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
		case LaneRef:
			bits += refMaxBits
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
		case LaneRef:
			p.minBits++
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
	p.pose = detectPose(p)
	p.clamps = make([]clampCounters, len(p.groups))
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

// MinBits returns a lower bound of the full encoding's size in bits, for
// any owner flag.
func (p *Plan) MinBits() int { return p.minBits }

// MaxBits returns an upper bound of the full encoding's size in bits.
func (p *Plan) MaxBits() int { return p.maxBits }

// describe returns the canonical text of the layout that the protocol hash
// covers: one line per field with its Go kind and precision.
func (p *Plan) describe() string { return p.desc }

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

// quantizeOps is Quantize by the op interpreter.
func (p *Plan) quantizeOps(src unsafe.Pointer, lanes []uint64) {
	if len(p.lanes) == 0 {
		return // a marker component
	}
	_ = lanes[len(p.lanes)-1]
	for i := range p.ops {
		o := &p.ops[i]
		l := lanes[o.lane:]
		switch o.kind {
		case opScalar:
			v := f64(src, o.off[0], o.num)
			q := o.sc.Quantize(v)
			l[0] = q
			if q == 0 || q == o.sc.MaxQ() {
				p.checkClamp(o, v)
			}
		case opWorld:
			v := f64(src, o.off[0], o.num)
			q := o.wld.Quantize(v)
			l[0] = uint64(q)
			if worldEdge(q, v) {
				p.checkClamp(o, v)
			}
		case opAngle:
			v := f64(src, o.off[0], o.num)
			q := o.ang.Quantize(v)
			l[0] = q
			if q == 0 {
				p.checkClamp(o, v)
			}
		case opQuat:
			var c quant.Clamp
			l[0], l[1], l[2], l[3], c = o.qt.QuantizeClamp(f64(src, o.off[0], o.num), f64(src, o.off[1], o.num),
				f64(src, o.off[2], o.num), f64(src, o.off[3], o.num))
			if c != quant.ClampNone {
				p.noteClamp(o.lane, c)
			}
		case opVel:
			rest, x, y, z, c := o.vel.QuantizeClamp(f64(src, o.off[0], o.num), f64(src, o.off[1], o.num), f64(src, o.off[2], o.num))
			l[0], l[1], l[2], l[3] = 0, x, y, z
			if rest {
				l[0] = 1
			}
			if c != quant.ClampNone {
				p.noteClamp(o.lane, c)
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
				p.noteClamp(o.lane, quant.ClampRange)
			} else {
				l[0] = o.irng.Quantize(int64(v))
				if c := o.irng.Clamped(int64(v)); c != quant.ClampNone {
					p.noteClamp(o.lane, c)
				}
			}
		case opVarint, opUvarint, opBool:
			l[0] = loadInt(src, o.off[0], o.num)
		case opRef:
			l[0] = refNone
			if *(*bool)(unsafe.Add(src, o.off[1])) {
				id := (*components.NetID)(unsafe.Add(src, o.off[0]))
				l[0] = RefLane(id.Handle, id.Gen)
			}
		case opRefLanes:
			l[0], l[1], l[2] = 0, 0, 0
			if *(*bool)(unsafe.Add(src, o.off[1])) {
				id := (*components.NetID)(unsafe.Add(src, o.off[0]))
				l[0], l[1], l[2] = uint64(id.Index())+1, uint64(id.Owner()), uint64(id.Gen)
			}
		}
	}
}

// Dequantize writes the value that lanes represent into the struct at dst.
// Any lane values are accepted (out-of-range codes clamp), so it never
// panics on decoded input. Fields that are not replicated are left as they
// are. Panics if len(lanes) < NumLanes.
func (p *Plan) dequantize(lanes []uint64, dst unsafe.Pointer) {
	// A small front, as in Quantize.
	if k := p.pose; k != nil {
		if k.f32 {
			dequantizePose[float32](k, lanes, dst)
		} else {
			dequantizePose[float64](k, lanes, dst)
		}
		return
	}
	p.dequantizeOps(lanes, dst)
}

// dequantizeOps is Dequantize by the op interpreter.
func (p *Plan) dequantizeOps(lanes []uint64, dst unsafe.Pointer) {
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
		case opRef, opRefLanes:
			storeRef(o, l, dst)
		}
	}
}

// writeLane writes lane value v with lane l's full (absolute) encoding.
func writeLane(w *bitio.Writer, l *Lane, v uint64) {
	switch l.Kind {
	case LaneRef:
		writeRef(w, v)
	case LaneUvarint:
		w.WriteUvarint(v)
	case LaneVarint:
		w.WriteVarint(int64(v))
	case LaneWorld:
		cell, off := l.Grid.Split(int64(v))
		w.WriteExpGolomb(bitio.ZigZag(cell), 0)
		w.WriteBits(off, uint(l.Bits))
	default:
		w.WriteBits(v, uint(l.Bits))
	}
}

// ReadLane reads a value written as the lane's code and validates it; an invalid
// value sets r's sticky error (wrapping [ErrCorrupt]) and returns 0.
func ReadLane(r *bitio.Reader, l *Lane) uint64 {
	var v uint64
	switch l.Kind {
	case LaneRef:
		v = readRef(r)
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
		q, ok := l.Grid.Join(cell, off)
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
		writeLane(w, l, lanes[i])
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

// writeProg is Write by the program interpreter.
func (p *Plan) writeProg(w *bitio.Writer, lanes []uint64, owner bool) {
	prog := p.progAll
	if !owner {
		prog = p.progOther
	}
	lanes = lanes[:len(p.lanes)]
	var words [packWords]uint64
	var acc uint64
	var n uint
	si, wj := 0, 0
	for si < len(prog) {
		var k int
		si, wj, acc, n, k = pack(prog, lanes, si, wj, acc, n, &words)
		for _, x := range words[:k] {
			w.WriteBits(x, 64)
		}
		if si == len(prog) || k == len(words) {
			continue
		}
		// pack stopped at a lane it leaves to us: a varint or a far world
		// cell (lane wj of a world run).
		st := &prog[si]
		i := int(st.first) + wj
		w.WriteBits(acc, n)
		acc, n = 0, 0
		writeLane(w, &p.lanes[i], lanes[i])
		if wj++; st.kind != stepWorld || wj == int(st.count) {
			si, wj = si+1, 0
		}
	}
	w.WriteBits(acc, n)
}

// packWords is how many full words [pack] gathers before it returns.
const packWords = 4

// pack runs the program from lane wj of step si, gathering bits in acc (n
// bits) and full words in words. It returns when the program ends, when
// words is full, or at a lane it leaves to the caller (a varint, a far world
// cell): the step and lane where it stopped, the accumulator, and the number
// of full words. It makes no calls, so the compiler keeps its state in
// registers (Go's calling convention would spill every live value around a
// call), and its shift counts, known to be below 64, are masked with &63,
// which spares the compiler's oversized-shift fixups.
func pack(prog []step, lanes []uint64, si, wj int, acc uint64, n uint, words *[packWords]uint64) (int, int, uint64, uint, int) {
	k := 0
	for ; si < len(prog); si++ {
		if k == len(words) {
			return si, wj, acc, n, k
		}
		st := &prog[si]
		var v uint64
		var width uint
		switch st.kind {
		case stepPack:
			for j, x := range lanes[st.first : int(st.first)+int(st.count)] {
				v |= x << (st.sh[j&(maxPack-1)] & 63)
			}
			width = uint(st.bits)
		case stepWorld:
			// A run of world lanes: each is written here, and the step
			// index only advances past the run when all are done.
			cb := uint(st.bits) & 63
			ls := lanes[st.first : int(st.first)+int(st.count)]
			for j := wj; j < len(ls); j++ {
				x := ls[j]
				zz := bitio.ZigZag(int64(x) >> cb)
				if zz >= st.lim || k == len(words) { // a far cell, or no room
					return si, j, acc, n, k
				}
				v, width = worldCode(zz, x, cb)
				acc, n, k = merge(acc, n, v, width, words, k)
			}
			wj = 0
			continue
		case stepRest:
			v, width = lanes[st.first]&1, 1
			if v != 0 {
				si++ // a resting velocity sends no axes
			}
		default:
			return si, 0, acc, n, k
		}
		acc, n, k = merge(acc, n, v, width, words, k)
	}
	return si, 0, acc, n, k
}

// merge appends the width low bits of v (no higher bits set; 1 ≤ width ≤
// 64) to the accumulator acc of n < 64 bits, moving a completed word to
// words[k]. The caller leaves room for it.
func merge(acc uint64, n uint, v uint64, width uint, words *[packWords]uint64, k int) (uint64, uint, int) {
	if n+width < 64 {
		return acc | v<<(n&63), n + width, k
	}
	words[k&(packWords-1)] = acc | v<<(n&63)
	if n == 0 { // width 64: nothing is left over
		return 0, 0, k + 1
	}
	return v >> ((64 - n) & 63), n + width - 64, k + 1
}

// readPack reads packed step st into lanes, validating each code.
func (p *Plan) readPack(r *bitio.Reader, st *step, lanes []uint64) {
	acc := r.ReadBits(uint(st.bits))
	for i := int(st.first); i < int(st.first)+int(st.count); i++ {
		l := &p.lanes[i]
		v := acc & (1<<l.Bits - 1)
		acc >>= l.Bits
		if v > l.Max {
			r.SetErr(fmt.Errorf("%w: %s code %d exceeds %d", ErrCorrupt, p.groups[l.Group].Name, v, l.Max))
		}
		lanes[i] = v
	}
}

// Read decodes a full encoding written by [Plan.Write] with the same owner
// flag into lanes (owner-only lanes are left untouched when owner is false).
// It returns r's error: truncated input is [bitio.ErrShortBuffer], invalid
// values wrap [ErrCorrupt]. Never panics; never allocates on success.
func (p *Plan) Read(r *bitio.Reader, lanes []uint64, owner bool) error {
	if len(lanes) < len(p.lanes) {
		return fmt.Errorf("schema: %s: lane buffer of %d, need %d", p.Name, len(lanes), len(p.lanes))
	}
	if p.pose != nil {
		p.readPose(r, lanes)
		return r.Err()
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
			p.readPack(r, st, lanes)
		case stepRest:
			v := r.ReadBits(1)
			lanes[st.first] = v
			if v != 0 {
				si++
				for i := int(st.first) + 1; i <= int(st.first)+3; i++ {
					lanes[i] = ls[i].Zero
				}
			}
		case stepWorld:
			for i := int(st.first); i < int(st.first)+int(st.count); i++ {
				lanes[i] = ReadLane(r, &ls[i])
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

// refMaxBits bounds a reference's encoding: EG(0) of up to 2^24, the
// owner, EG(0) of up to 2^32 − 1.
const refMaxBits = 49 + 9 + 65

// WriteRef writes the reference to the entity of handle and gen (set) or
// to none as a LaneRef lane is written.
func WriteRef(w *bitio.Writer, handle, gen uint32, set bool) {
	if !set {
		writeRef(w, refNone)
		return
	}
	writeRef(w, RefLane(handle, gen))
}

// ReadRef reads what WriteRef wrote; out-of-range parts set r's error.
func ReadRef(r *bitio.Reader) (handle, gen uint32, set bool) {
	v := readRef(r)
	if r.Err() != nil || v == refNone {
		return 0, 0, false
	}
	return uint32(v), uint32(v >> 32), true
}

// writeRef writes a LaneRef value (see [LaneRef]).
func writeRef(w *bitio.Writer, v uint64) {
	if v == refNone {
		w.WriteExpGolomb(0, 0)
		return
	}
	handle, gen := uint32(v), v>>32
	w.WriteExpGolomb(uint64(handle&0xffffff)+1, 0)
	if owner := handle >> 24; owner == 0 {
		w.WriteBits(0, 1)
	} else {
		w.WriteBits(1|uint64(owner)<<1, 9)
	}
	w.WriteExpGolomb(gen, 0)
}

// readRef reads a LaneRef value; out-of-range parts set r's error.
func readRef(r *bitio.Reader) uint64 {
	x := r.ReadExpGolomb(0)
	if x == 0 {
		return refNone
	}
	var owner uint64
	if r.ReadBits(1) != 0 {
		if owner = r.ReadBits(8); owner == 0 && r.Err() == nil {
			r.SetErr(fmt.Errorf("%w: reference owner 0 written long", ErrCorrupt))
			return 0
		}
	}
	gen := r.ReadExpGolomb(0)
	if r.Err() != nil {
		return 0
	}
	if x > 1<<24 || gen > 0xffffffff {
		r.SetErr(fmt.Errorf("%w: reference index %d or generation %d out of range", ErrCorrupt, x-1, gen))
		return 0
	}
	return RefLane(uint32(owner<<24|(x-1)), uint32(gen))
}

// storeRef writes a reference's lanes into its components.Ref at dst: its
// ID and Set. Its Entity, the receiver's to resolve, is zeroed when they
// changed (and kept otherwise, so that a mirror's resolved reference
// stays resolved).
func storeRef(o *op, l []uint64, dst unsafe.Pointer) {
	var id components.NetID
	var set bool
	if o.kind == opRef {
		if set = l[0] != refNone; set {
			id = components.NetID{Handle: uint32(l[0]), Gen: uint32(l[0] >> 32)}
		}
	} else if set = l[0] != 0; set {
		id = components.NetID{Handle: components.MakeHandle(uint8(l[1]), uint32(l[0]-1)), Gen: uint32(l[2])}
	}
	pid, pset := (*components.NetID)(unsafe.Add(dst, o.off[0])), (*bool)(unsafe.Add(dst, o.off[1]))
	if *pid != id || *pset != set {
		*pid, *pset = id, set
		*(*[2]uint32)(unsafe.Add(dst, o.off[2])) = [2]uint32{}
	}
}
