package schema

import (
	"fmt"
	"reflect"
	"unsafe"
)

// A component's memory, for code that holds it untyped (arche's World.Get
// returns an unsafe.Pointer): the Bytes methods read and write a component
// value through a byte slice of at least Plan.Size bytes over it, e.g.
// unsafe.Slice((*byte)(world.Get(e, id)), plan.Size). Code with a typed
// value uses QuantizeValue, DequantizeValue, RoundValue and
// InterpolateValue instead.

// QuantizeBytes reads the component value held in src (the memory of a
// p.Type, at least Size bytes) into lanes. Allocation-free, no reflection.
// Panics if src is shorter than Size or len(lanes) < NumLanes.
func (p *Plan) QuantizeBytes(src []byte, lanes []uint64) {
	p.quantize(p.memory(src), lanes)
}

// DequantizeBytes writes the value that lanes represent into dst (the
// memory of a p.Type, at least Size bytes). Any lane values are accepted
// (out-of-range codes clamp), so it never panics on decoded input. Fields
// that are not replicated are left as they are. Panics if dst is shorter
// than Size or len(lanes) < NumLanes.
func (p *Plan) DequantizeBytes(lanes []uint64, dst []byte) {
	p.dequantize(lanes, p.memory(dst))
}

// InterpolateBytes writes into dst (the memory of a p.Type, at least Size
// bytes) the state a fraction f of
// the way from quantized state a to quantized state b (both NumLanes long):
// floats, world positions and velocities linearly, angles the shorter way
// round (the result wrapped into [−π, π)), quaternions by spherical linear
// interpolation on the shorter arc; f > 1 extrapolates them. Integers and
// bools step: a's value while f < 1, b's from
// f ≥ 1. Interpolation happens on the dequantized values, so the result is
// not snapped to the quantization grid; at f = 0 and f = 1 it is exactly
// a's and b's dequantized value. Allocation-free. Panics if dst is
// shorter than Size or a or b shorter than NumLanes.
func (p *Plan) InterpolateBytes(a, b []uint64, f float64, dst []byte) {
	p.interpolate(a, b, f, p.memory(dst))
}

// memory returns the start of b after checking that it holds a p.Type.
func (p *Plan) memory(b []byte) unsafe.Pointer {
	if uintptr(len(b)) < p.Size {
		panic(fmt.Sprintf("schema: %d bytes for a %s of %d", len(b), p.Name, p.Size))
	}
	return unsafe.Pointer(unsafe.SliceData(b))
}

// RoundValue quantizes v and writes the dequantized result back, so the
// server simulates exactly what clients receive (do this at the end of a
// tick for predicted entities). lanes is scratch of NumLanes. It panics if
// T is not the plan's type.
func RoundValue[T any](p *Plan, v *T, lanes []uint64) {
	p.check(reflect.TypeFor[T]())
	p.quantize(unsafe.Pointer(v), lanes)
	p.dequantize(lanes, unsafe.Pointer(v))
}

// InterpolateValue writes into v the interpolation at f between the values
// that a and b represent (the rules are [Plan.InterpolateBytes]'s); it
// panics if T is not the plan's type. Allocation-free.
func InterpolateValue[T any](p *Plan, a, b []uint64, f float64, v *T) {
	p.check(reflect.TypeFor[T]())
	p.interpolate(a, b, f, unsafe.Pointer(v))
}

// check panics if t is not the plan's type. (It does not take the value:
// a value passed on to the panic's message would escape, and its caller's
// variable with it.)
func (p *Plan) check(t reflect.Type) {
	if t != p.Type {
		panic(fmt.Sprintf("schema: plan %s used with %s", p.Name, t))
	}
}
