package schema

import (
	"fmt"
	"hash/fnv"
	"reflect"
	"slices"
	"sync/atomic"
	"unsafe"
)

// MaxComponents is the largest number of component types a [Registry]
// holds, so that an entity's replicated component set fits in a uint64.
const MaxComponents = 64

// Registry assigns replicated component types their ids (in registration
// order) and computes the protocol hash. Server and clients must register the
// same types with the same precision in the same order; the hash, exchanged
// at connect, detects any difference. A Registry is not safe for concurrent
// registration; after setup it is read-only and safe to share.
type Registry struct {
	plans  []*Plan
	byType map[reflect.Type]*Plan
	byName map[string]*Plan
	// msgs are the message types (RegisterMessage), in their own id space
	msgs      []*Plan
	msgByType map[reflect.Type]*Plan
	// clampGen counts clamps by any plan (see ClampGeneration).
	clampGen atomic.Uint64
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{byType: map[reflect.Type]*Plan{}, byName: map[string]*Plan{}, msgByType: map[reflect.Type]*Plan{}}
}

// Option configures a registration.
type Option func(*regOptions) error

type regOptions struct {
	name string
	tags map[string]string
}

// WithTag registers the type as if field (a path such as "Pos" or
// "Stats.Health") carried the net tag tag instead of its own: the same Go
// type replicated at another precision, chosen at run time (a game mode, a
// benchmark). Server and clients must register alike; the protocol hash
// tells them apart. A field path that names no field is an error.
func WithTag(field, tag string) Option {
	return func(o *regOptions) error {
		if o.tags == nil {
			o.tags = map[string]string{}
		}
		o.tags[field] = tag
		return nil
	}
}

// WithName sets the registered name (default: the Go type's name). The name
// is part of the protocol hash and must be unique in the registry.
func WithName(name string) Option {
	return func(o *regOptions) error {
		if name == "" {
			return fmt.Errorf("schema: empty component name")
		}
		o.name = name
		return nil
	}
}

// Register compiles the replication plan of component type T and adds it to
// r. Errors name the type, the field and the problem, e.g.
// "schema: game.Ship.Speed: float has no precision: ...". Cost: reflection,
// once per type.
func Register[T any](r *Registry, opts ...Option) (*Plan, error) {
	return r.RegisterType(reflect.TypeFor[T](), opts...)
}

// MustRegister is [Register] that panics on error, for package-level setup
// of types known to be valid.
func MustRegister[T any](r *Registry, opts ...Option) *Plan {
	p, err := Register[T](r, opts...)
	if err != nil {
		panic(err)
	}
	return p
}

// RegisterType is [Register] for a reflect.Type.
func (r *Registry) RegisterType(t reflect.Type, opts ...Option) (*Plan, error) {
	o, err := options(t, "", opts, func(name string) bool { _, dup := r.byName[name]; return dup }, r.byType[t] != nil, len(r.plans), MaxComponents)
	if err != nil {
		return nil, err
	}
	p, err := compile(t, o.name, o.tags, false)
	if err != nil {
		return nil, err
	}
	p.ID = uint8(len(r.plans))
	p.clampGen = &r.clampGen
	r.plans = append(r.plans, p)
	r.byType[t] = p
	r.byName[o.name] = p
	return p, nil
}

// MaxMessages is the largest number of message types a [Registry] holds.
const MaxMessages = 64

// RegisterMessage compiles message type T (a struct whose fields carry net
// precision tags, as a component's do, and may include components.Ref
// fields) and adds it to r's message types. Messages have their own ids, in
// registration order; they are part of the protocol hash, so server and
// clients must register the same message types alike, and a mismatch
// names the message that differs. Owner-only tags have no meaning for
// messages and are refused; a struct with no fields is a valid message (a
// signal).
func RegisterMessage[T any](r *Registry, opts ...Option) (*Plan, error) {
	return r.RegisterMessageType(reflect.TypeFor[T](), opts...)
}

// MustRegisterMessage is [RegisterMessage] that panics on error.
func MustRegisterMessage[T any](r *Registry, opts ...Option) *Plan {
	p, err := RegisterMessage[T](r, opts...)
	if err != nil {
		panic(err)
	}
	return p
}

// RegisterMessageType is [RegisterMessage] for a reflect.Type.
func (r *Registry) RegisterMessageType(t reflect.Type, opts ...Option) (*Plan, error) {
	o, err := options(t, "message ", opts, func(name string) bool {
		return slices.ContainsFunc(r.msgs, func(m *Plan) bool { return m.Name == name })
	}, r.msgByType[t] != nil, len(r.msgs), MaxMessages)
	if err != nil {
		return nil, err
	}
	p, err := compile(t, o.name, o.tags, true)
	if err != nil {
		return nil, err
	}
	if p.ownerOnly != 0 {
		return nil, fmt.Errorf("schema: message %s: owner-only fields have no meaning in a message", t)
	}
	p.ID = uint8(len(r.msgs))
	p.clampGen = &r.clampGen
	r.msgs = append(r.msgs, p)
	r.msgByType[t] = p
	return p, nil
}

// Messages returns the message types' plans in id order (do not modify).
func (r *Registry) Messages() []*Plan { return r.msgs }

// Message returns the plan of message id, or nil.
func (r *Registry) Message(id int) *Plan {
	if id < 0 || id >= len(r.msgs) {
		return nil
	}
	return r.msgs[id]
}

// MessageOf returns the plan of message type T, or nil.
func MessageOf[T any](r *Registry) *Plan { return r.msgByType[reflect.TypeFor[T]()] }

// MessageByType returns the plan of a message Go type, or nil.
func (r *Registry) MessageByType(t reflect.Type) *Plan { return r.msgByType[t] }

// options applies a registration's options to type t (a component, or
// kind "message "), and checks them: a name, not taken (taken), the type
// not registered yet (dup), below max of its kind (n registered).
func options(t reflect.Type, kind string, opts []Option, taken func(string) bool, dup bool, n, max int) (regOptions, error) {
	o := regOptions{name: t.Name()}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return o, err
		}
	}
	switch {
	case o.name == "":
		return o, fmt.Errorf("schema: %s%s: unnamed type needs WithName", kind, t)
	case dup:
		return o, fmt.Errorf("schema: %s%s registered twice", kind, t)
	case taken(o.name):
		return o, fmt.Errorf("schema: %s%s: name %q already used; register with WithName", kind, t, o.name)
	case n >= max && kind == "":
		return o, fmt.Errorf("schema: %s: more than %d replicated component types", t, max)
	case n >= max:
		return o, fmt.Errorf("schema: %s%s: more than %d message types", kind, t, max)
	}
	return o, nil
}

// Len returns the number of registered components.
func (r *Registry) Len() int { return len(r.plans) }

// Plan returns the plan with the given id, or nil.
func (r *Registry) Plan(id int) *Plan {
	if id < 0 || id >= len(r.plans) {
		return nil
	}
	return r.plans[id]
}

// Plans returns all plans in id order (do not modify).
func (r *Registry) Plans() []*Plan { return r.plans }

// ByType returns the plan of a Go type, or nil.
func (r *Registry) ByType(t reflect.Type) *Plan { return r.byType[t] }

// PlanOf returns the plan of T, or nil.
func PlanOf[T any](r *Registry) *Plan { return r.byType[reflect.TypeFor[T]()] }

// Hash returns the protocol hash: 64-bit FNV-1a over a canonical text of
// every registered component in id order — its name and, per replicated
// field, the field path, Go kind, codec and precision (see
// [Plan.describe]) — prefixed with the wire-format version. Any change of a
// replicated type, its precision, owner-only flags or registration order
// changes the hash.
func (r *Registry) Hash() uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "archenet schema v1\n")
	for _, p := range r.plans {
		fmt.Fprintf(h, "component %d %s\n%s", p.ID, p.Name, p.desc)
	}
	for _, p := range r.msgs { // (none: the hash of a registry without messages is unchanged)
		fmt.Fprintf(h, "message %d %s\n%s", p.ID, p.Name, p.desc)
	}
	return h.Sum64()
}

// Hash returns the component's own hash: 64-bit FNV-1a over its name and
// [Plan.describe] (not its id). Two registries whose protocol hashes differ
// can compare these to find the component that differs.
func (p *Plan) Hash() uint64 {
	h := fnv.New64a()
	kind := "component"
	if p.msg {
		kind = "message"
	}
	fmt.Fprintf(h, "%s %s\n%s", kind, p.Name, p.desc)
	return h.Sum64()
}

// QuantizeValue reads the component value v into lanes (see
// [Plan.QuantizeBytes]); it panics if T is
// not the plan's type.
func QuantizeValue[T any](p *Plan, v *T, lanes []uint64) {
	p.check(reflect.TypeFor[T]())
	p.quantize(unsafe.Pointer(v), lanes)
}

// DequantizeValue writes the value that lanes represent into v (see
// [Plan.DequantizeBytes]); it panics if T
// is not the plan's type.
func DequantizeValue[T any](p *Plan, lanes []uint64, v *T) {
	p.check(reflect.TypeFor[T]())
	p.dequantize(lanes, unsafe.Pointer(v))
}
