package schema

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	arche "github.com/mlange-42/arche/ecs"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/internal/quant"
)

// Limits of one component plan.
const (
	MaxGroups = 64  // field-mask bits per component
	MaxLanes  = 256 // quantized integers per component
)

type numKind uint8

const (
	numF32 numKind = iota
	numF64
	numI8
	numI16
	numI32
	numI64
	numU8
	numU16
	numU32
	numU64
	numBool
)

var numNames = [...]string{"f32", "f64", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "bool"}

func numOf(k reflect.Kind) (numKind, bool) {
	switch k {
	case reflect.Float32:
		return numF32, true
	case reflect.Float64:
		return numF64, true
	case reflect.Int8:
		return numI8, true
	case reflect.Int16:
		return numI16, true
	case reflect.Int32:
		return numI32, true
	case reflect.Int64:
		return numI64, true
	case reflect.Int:
		if strconv.IntSize == 32 {
			return numI32, true
		}
		return numI64, true
	case reflect.Uint8:
		return numU8, true
	case reflect.Uint16:
		return numU16, true
	case reflect.Uint32:
		return numU32, true
	case reflect.Uint64, reflect.Uintptr:
		return numU64, true
	case reflect.Uint:
		if strconv.IntSize == 32 {
			return numU32, true
		}
		return numU64, true
	case reflect.Bool:
		return numBool, true
	}
	return 0, false
}

func (n numKind) isFloat() bool  { return n == numF32 || n == numF64 }
func (n numKind) isSigned() bool { return n >= numI8 && n <= numI64 }

// intLimits returns the value range of an integer kind.
func (n numKind) intLimits() (int64, uint64) {
	switch n {
	case numI8:
		return math.MinInt8, math.MaxInt8
	case numI16:
		return math.MinInt16, math.MaxInt16
	case numI32:
		return math.MinInt32, math.MaxInt32
	case numI64:
		return math.MinInt64, math.MaxInt64
	case numU8:
		return 0, math.MaxUint8
	case numU16:
		return 0, math.MaxUint16
	case numU32:
		return 0, math.MaxUint32
	}
	return 0, math.MaxUint64
}

type opKind uint8

const (
	opScalar opKind = iota
	opAngle
	opWorld
	opRaw
	opInt
	opVarint
	opUvarint
	opBool
	opQuat
	opVel
	opRef      // a message's reference: one LaneRef lane
	opRefLanes // a component's reference: index + 1 (0 none), owner, generation
)

// op is one compiled instruction: where a leaf (or composite) lives in the
// struct, how to quantize it, and its first lane.
type op struct {
	kind opKind
	num  numKind
	lane uint16
	off  [4]uintptr
	sc   quant.Scalar
	ang  quant.Angle
	wld  quant.Grid
	irng quant.Int
	qt   quant.Quat
	vel  quant.Velocity
}

// compileError names the type, the field and the problem.
type compileError struct {
	typ, field string
	err        error
}

func (e *compileError) Error() string {
	if e.field == "" {
		return fmt.Sprintf("schema: %s: %v", e.typ, e.err)
	}
	return fmt.Sprintf("schema: %s.%s: %v", e.typ, e.field, e.err)
}

func (e *compileError) Unwrap() error { return e.err }

type compiler struct {
	p    *Plan
	msg  bool // compiling a message (references allowed)
	desc strings.Builder
	tags map[string]string // WithTag overrides by field path
	used map[string]bool
}

func compile(t reflect.Type, name string, tags map[string]string, msg bool) (*Plan, error) {
	if t.Kind() != reflect.Struct {
		what := "replicated component"
		if msg {
			what = "message"
		}
		return nil, &compileError{typ: t.String(), err: fmt.Errorf("a %s must be a struct, not %s", what, t.Kind())}
	}
	p := &Plan{Name: name, Type: t, Size: t.Size(), msg: msg}
	c := &compiler{p: p, tags: tags, used: map[string]bool{}, msg: msg}
	err := c.walkStruct(t, 0, "", false)
	for path := range tags {
		if err == nil && !c.used[path] {
			err = fieldErr(path, "WithTag names no field")
		}
	}
	if err != nil {
		var ce *compileError
		if ok := asCompileError(err, &ce); ok {
			ce.typ = t.String()
			return nil, ce
		}
		return nil, &compileError{typ: t.String(), err: err}
	}
	if len(p.groups) == 0 && t.NumField() != 0 && !msg && !p.relation {
		return nil, &compileError{typ: t.String(), err: fmt.Errorf("no replicated fields (exported fields not tagged net:\"-\"); a marker component must be an empty struct")}
	}
	p.desc = c.desc.String()
	p.finish()
	return p, nil
}

func asCompileError(err error, target **compileError) bool {
	ce, ok := err.(*compileError)
	if ok {
		*target = ce
	}
	return ok
}

func fieldErr(path string, format string, args ...any) error {
	return &compileError{field: path, err: fmt.Errorf(format, args...)}
}

func join(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

func (c *compiler) walkStruct(t reflect.Type, base uintptr, prefix string, owner bool) error {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		if f.Type == relationType {
			if base != 0 || prefix != "" || i != 0 || !f.Anonymous {
				return fieldErr(join(prefix, f.Name), "arche's Relation marks a relation component only as its first, embedded field")
			}
			if c.msg {
				return fieldErr(f.Name, "a message cannot be a relation component")
			}
			c.p.relation = true
			c.desc.WriteString("relation\n")
			continue
		}
		path := join(prefix, f.Name)
		raw := f.Tag.Get("net")
		if o, ok := c.tags[path]; ok {
			raw = o
			c.used[path] = true
		}
		tg, err := parseTag(raw)
		if err != nil {
			return fieldErr(path, "bad net tag %q: %v", raw, err)
		}
		if tg.skip {
			continue
		}
		tg.owner = tg.owner || owner
		if err := c.walkValue(f.Type, base+f.Offset, path, tg); err != nil {
			return err
		}
	}
	return nil
}

// walkValue compiles a value of type t at offset off with tag tg.
func (c *compiler) walkValue(t reflect.Type, off uintptr, path string, tg tag) error {
	switch {
	case tg.quat:
		return c.addQuat(t, off, path, tg)
	case tg.vel:
		return c.addVel(t, off, path, tg)
	}
	if t == refType {
		return c.addRef(off, path, tg)
	}
	switch t.Kind() {
	case reflect.Struct:
		if tg.scalarOnly() {
			// A per-leaf tag on a struct applies to each leaf.
			for i := 0; i < t.NumField(); i++ {
				f := t.Field(i)
				if !f.IsExported() {
					continue
				}
				if err := c.walkValue(f.Type, off+f.Offset, join(path, f.Name), tg); err != nil {
					return err
				}
			}
			return nil
		}
		return c.walkStruct(t, off, path, tg.owner)
	case reflect.Array:
		if t.Len() > MaxGroups {
			return fieldErr(path, "array of %d elements is longer than %d", t.Len(), MaxGroups)
		}
		es := t.Elem().Size()
		for i := 0; i < t.Len(); i++ {
			if err := c.walkValue(t.Elem(), off+uintptr(i)*es, fmt.Sprintf("%s[%d]", path, i), tg); err != nil {
				return err
			}
		}
		return nil
	}
	num, ok := numOf(t.Kind())
	if !ok {
		return fieldErr(path, "type %s cannot be replicated (use numbers, bools, fixed arrays or structs; tag it net:\"-\" to skip)", t)
	}
	return c.addLeaf(num, off, path, tg)
}

func (c *compiler) newGroup(path string, owner bool, lanes ...Lane) (uint16, error) {
	p := c.p
	if len(p.groups) >= MaxGroups {
		return 0, fieldErr(path, "component has more than %d replicated fields", MaxGroups)
	}
	if len(p.lanes)+len(lanes) > MaxLanes {
		return 0, fieldErr(path, "component has more than %d quantized values", MaxLanes)
	}
	g := uint8(len(p.groups))
	first := len(p.lanes)
	for _, l := range lanes {
		l.Group = g
		p.lanes = append(p.lanes, l)
	}
	p.groups = append(p.groups, Group{Name: path, First: first, Count: len(lanes), OwnerOnly: owner})
	return uint16(first), nil
}

func ffmt(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

func (c *compiler) describe(path string, num numKind, owner bool, format string, args ...any) {
	fmt.Fprintf(&c.desc, "%s %s ", path, numNames[num])
	fmt.Fprintf(&c.desc, format, args...)
	if owner {
		c.desc.WriteString(" owner")
	}
	c.desc.WriteByte('\n')
}

func (c *compiler) addLeaf(num numKind, off uintptr, path string, tg tag) error {
	o := op{num: num, off: [4]uintptr{off}}
	var lane Lane
	var err error
	switch {
	case num == numBool:
		if tg.hasParams {
			return fieldErr(path, "bool takes no precision options (only owner)")
		}
		o.kind = opBool
		lane = Lane{Kind: LaneBool, Bits: 1, Max: 1}
		c.describe(path, num, tg.owner, "bool")
	case num.isFloat():
		lane, err = c.floatLeaf(&o, path, tg)
	default:
		lane, err = c.intLeaf(&o, path, tg)
	}
	if err != nil {
		return err
	}
	first, err := c.newGroup(path, tg.owner, lane)
	if err != nil {
		return err
	}
	o.lane = first
	c.p.ops = append(c.p.ops, o)
	return nil
}

// floatLeaf sets up the codec of a float leaf (o.num) from its tag.
func (c *compiler) floatLeaf(o *op, path string, tg tag) (Lane, error) {
	num := o.num
	var lane Lane
	switch {
	case tg.raw:
		if tg.hasRange || tg.step != 0 || tg.bits != 0 {
			return Lane{}, fieldErr(path, "raw takes no range, step or bits")
		}
		o.kind = opRaw
		w := uint8(32)
		if num == numF64 {
			w = 64
		}
		lane = Lane{Kind: LaneFixed, Bits: w, Max: math.MaxUint64 >> (64 - w)}
		c.describe(path, num, tg.owner, "raw")
	case tg.angle:
		if tg.bits == 0 {
			return Lane{}, fieldErr(path, "angle needs bits=N (N bits per full turn)")
		}
		a, err := quant.NewAngle(uint(tg.bits))
		if err != nil {
			return Lane{}, fieldErr(path, "%v", err)
		}
		o.kind, o.ang = opAngle, a
		lane = Lane{Kind: LaneAngle, Bits: uint8(tg.bits), Max: uint64(1)<<tg.bits - 1}
		c.describe(path, num, tg.owner, "angle bits=%d", tg.bits)
	case tg.world:
		if tg.step == 0 || tg.hasRange || tg.bits != 0 {
			return Lane{}, fieldErr(path, "world needs step=S (and optionally cell=BITS), no range or bits")
		}
		cb := tg.cellBits
		if cb == 0 {
			cb = quant.DefaultCellBits
		}
		g, err := quant.NewGrid(tg.step, uint(cb))
		if err != nil {
			return Lane{}, fieldErr(path, "%v", err)
		}
		o.kind, o.wld = opWorld, g
		lane = Lane{Kind: LaneWorld, Bits: uint8(cb), Max: math.MaxUint64, Grid: g}
		c.describe(path, num, tg.owner, "world step=%s cell=%d", ffmt(tg.step), cb)
	case tg.varint || tg.limit != 0 || tg.rest != 0 || tg.cellBits != 0:
		return Lane{}, fieldErr(path, "options varint, max, rest and cell do not apply to a float")
	case tg.hasRange:
		var s quant.Scalar
		var err error
		switch {
		case tg.step != 0:
			s, err = quant.NewScalarStep(tg.min, tg.max, tg.step)
		case tg.bits != 0:
			s, err = quant.NewScalarBits(tg.min, tg.max, uint(tg.bits))
		default:
			return Lane{}, fieldErr(path, "range needs step=S or bits=N")
		}
		if err != nil {
			return Lane{}, fieldErr(path, "%v", err)
		}
		o.kind, o.sc = opScalar, s
		lane = Lane{Kind: LaneFixed, Bits: uint8(s.Bits()), Max: s.MaxQ()}
		c.describe(path, num, tg.owner, "scalar min=%s step=%s maxq=%d", ffmt(s.Min()), ffmt(s.Step()), s.MaxQ())
	default:
		return Lane{}, fieldErr(path, "float has no precision: add net:\"range=MIN:MAX,step=S\" (or bits=N), angle, world, or raw")
	}
	return lane, nil
}

// intLeaf sets up the codec of an integer leaf (o.num) from its tag.
func (c *compiler) intLeaf(o *op, path string, tg tag) (Lane, error) {
	num := o.num
	var lane Lane
	lo, hi := num.intLimits()
	switch {
	case tg.hasRange:
		if !tg.intRange || tg.step != 0 || tg.bits != 0 {
			return Lane{}, fieldErr(path, "an integer range is range=MIN:MAX with integer ends and no step or bits")
		}
		if tg.imin < lo || (tg.imax >= 0 && uint64(tg.imax) > hi) {
			return Lane{}, fieldErr(path, "range %d:%d does not fit %s", tg.imin, tg.imax, numNames[num])
		}
		r, err := quant.NewInt(tg.imin, tg.imax)
		if err != nil {
			return Lane{}, fieldErr(path, "%v", err)
		}
		o.kind, o.irng = opInt, r
		lane = Lane{Kind: LaneFixed, Bits: uint8(r.Bits()), Max: r.MaxQ()}
		c.describe(path, num, tg.owner, "int min=%d max=%d", tg.imin, tg.imax)
	case tg.step != 0 || tg.bits != 0 || tg.raw || tg.angle || tg.world || tg.limit != 0 || tg.rest != 0 || tg.cellBits != 0:
		return Lane{}, fieldErr(path, "integers take range=MIN:MAX or varint (the default)")
	case num.isSigned():
		o.kind = opVarint
		lane = Lane{Kind: LaneVarint, Max: hi, Min: lo}
		c.describe(path, num, tg.owner, "varint")
	default:
		o.kind = opUvarint
		lane = Lane{Kind: LaneUvarint, Max: hi}
		c.describe(path, num, tg.owner, "uvarint")
	}
	return lane, nil
}

// floatFields returns the offsets and kind of n float fields of t: an array
// [n]float, or a struct whose exported fields are n floats of one kind
// (taken by name X, Y, Z, W when present, else in declaration order).
func floatFields(t reflect.Type, n int, path string) ([4]uintptr, numKind, error) {
	var offs [4]uintptr
	switch t.Kind() {
	case reflect.Array:
		num, ok := numOf(t.Elem().Kind())
		if t.Len() != n || !ok || !num.isFloat() {
			return offs, 0, fieldErr(path, "needs [%d]float32/float64 or a struct of %d floats, not %s", n, n, t)
		}
		for i := 0; i < n; i++ {
			offs[i] = uintptr(i) * t.Elem().Size()
		}
		return offs, num, nil
	case reflect.Struct:
		var fields []reflect.StructField
		for i := 0; i < t.NumField(); i++ {
			if f := t.Field(i); f.IsExported() {
				fields = append(fields, f)
			}
		}
		if len(fields) != n {
			return offs, 0, fieldErr(path, "needs a struct of exactly %d exported floats, %s has %d fields", n, t, len(fields))
		}
		names := []string{"X", "Y", "Z", "W"}[:n]
		byName := true
		for _, nm := range names {
			if _, ok := t.FieldByName(nm); !ok {
				byName = false
			}
		}
		var num numKind
		for i := 0; i < n; i++ {
			f := fields[i]
			if byName {
				f, _ = t.FieldByName(names[i])
			}
			k, ok := numOf(f.Type.Kind())
			if !ok || !k.isFloat() || (i > 0 && k != num) {
				return offs, 0, fieldErr(path, "needs %d floats of one kind, %s.%s is %s", n, t, f.Name, f.Type)
			}
			num = k
			offs[i] = f.Offset
		}
		return offs, num, nil
	}
	return offs, 0, fieldErr(path, "needs [%d]float or a struct of %d floats, not %s", n, n, t)
}

func (c *compiler) addQuat(t reflect.Type, off uintptr, path string, tg tag) error {
	if tg.bits == 0 || tg.hasRange || tg.step != 0 || tg.limit != 0 || tg.rest != 0 || tg.cellBits != 0 {
		return fieldErr(path, "quat takes bits=N (%d..%d) and nothing else", quant.MinQuatBits, quant.MaxQuatBits)
	}
	offs, num, err := floatFields(t, 4, path)
	if err != nil {
		return err
	}
	qc, err := quant.NewQuat(uint(tg.bits))
	if err != nil {
		return fieldErr(path, "%v", err)
	}
	for i := range offs {
		offs[i] += off
	}
	b := uint8(tg.bits)
	mx := uint64(1)<<b - 2
	first, err := c.newGroup(path, tg.owner,
		Lane{Kind: LaneQuatIndex, Bits: 2, Max: 3},
		Lane{Kind: LaneFixed, Bits: b, Max: mx},
		Lane{Kind: LaneFixed, Bits: b, Max: mx},
		Lane{Kind: LaneFixed, Bits: b, Max: mx})
	if err != nil {
		return err
	}
	c.p.ops = append(c.p.ops, op{kind: opQuat, num: num, lane: first, off: offs, qt: qc})
	c.describe(path, num, tg.owner, "quat bits=%d", tg.bits)
	return nil
}

func (c *compiler) addVel(t reflect.Type, off uintptr, path string, tg tag) error {
	if tg.limit == 0 || tg.hasRange || tg.cellBits != 0 || (tg.step == 0) == (tg.bits == 0) {
		return fieldErr(path, "vel needs max=M and one of step=S or bits=N (optionally rest=R)")
	}
	offs, num, err := floatFields(t, 3, path)
	if err != nil {
		return err
	}
	var v quant.Velocity
	if tg.step != 0 {
		v, err = quant.NewVelocity(tg.limit, tg.step, tg.rest)
	} else {
		v, err = quant.NewVelocityBits(tg.limit, uint(tg.bits), tg.rest)
	}
	if err != nil {
		return fieldErr(path, "%v", err)
	}
	for i := range offs {
		offs[i] += off
	}
	ax := v.Axis()
	b := uint8(ax.Bits())
	z := v.Zero()
	first, err := c.newGroup(path, tg.owner,
		Lane{Kind: LaneRest, Bits: 1, Max: 1},
		Lane{Kind: LaneFixed, Bits: b, Max: ax.MaxQ(), Zero: z},
		Lane{Kind: LaneFixed, Bits: b, Max: ax.MaxQ(), Zero: z},
		Lane{Kind: LaneFixed, Bits: b, Max: ax.MaxQ(), Zero: z})
	if err != nil {
		return err
	}
	c.p.ops = append(c.p.ops, op{kind: opVel, num: num, lane: first, off: offs, vel: v})
	c.describe(path, num, tg.owner, "vel max=%s step=%s rest=%s", ffmt(ax.Max()), ffmt(ax.Step()), ffmt(v.Rest()))
	return nil
}

// relationType is arche's relation marker.
var relationType = reflect.TypeFor[arche.Relation]()

// refType is components.Ref, which compiles to one reference lane.
var refType = reflect.TypeFor[components.Ref]()

func init() {
	if refType.Field(0).Type.Size() != 8 {
		panic("schema: components.Ref's Entity is not two uint32s") // (storeRef zeroes it so)
	}
}

// Offsets inside components.Ref.
var (
	refEntityOff = refType.Field(0).Offset
	refIDOff     = refType.Field(1).Offset
	refSetOff    = refType.Field(2).Offset
)

// addRef adds a components.Ref field as a group of its own: in a message
// one LaneRef lane; in a component three uvarint lanes — the slot index + 1
// (0: none), the owner and the generation — which delta coding keeps at
// no cost while the reference does not change.
func (c *compiler) addRef(off uintptr, path string, tg tag) error {
	if bare := (tag{owner: tg.owner}); tg != bare {
		return fieldErr(path, "a reference takes no precision tag")
	}
	o := op{kind: opRef, off: [4]uintptr{off + refIDOff, off + refSetOff, off + refEntityOff}}
	lanes := []Lane{{Kind: LaneRef, Max: refNone}}
	kind := "ref"
	if !c.msg {
		o.kind, kind = opRefLanes, "ref3"
		lanes = []Lane{{Kind: LaneUvarint, Max: 1 << 24}, {Kind: LaneUvarint, Max: 255}, {Kind: LaneUvarint, Max: 1<<32 - 1}}
	}
	first, err := c.newGroup(path, tg.owner, lanes...)
	if err != nil {
		return err
	}
	o.lane = first
	c.p.ops = append(c.p.ops, o)
	c.p.refs = append(c.p.refs, RefField{Offset: off, Lane: int(first)})
	fmt.Fprintf(&c.desc, "%s %s", path, kind)
	if tg.owner {
		c.desc.WriteString(" owner")
	}
	c.desc.WriteByte('\n')
	return nil
}
