package replication

import (
	"fmt"
	"iter"
	"unsafe"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/schema"
)

// Delivery says how a game message travels.
type Delivery uint8

const (
	// Reliable messages arrive exactly once and in the order they were
	// sent, on the reliable stream that carries spawns: a server message
	// about an entity never arrives before that entity's spawn. A client
	// that stops reading them falls under the server's reliable backlog
	// bound (it is dropped with transport.CodeSendBacklog).
	Reliable Delivery = iota
	// Unreliable messages ride in the tick's datagrams, inside the client's
	// byte budget (a few bytes over the message itself): they arrive at
	// most once, never older than the newest one applied, or not at all —
	// dropped rather than late. Server → client, they are sent with the
	// tick's snapshot (at most wire's 255-byte section a client a tick;
	// more are left out and counted, ServerStats.MessagesUnsent);
	// client → server, with the client's next datagram. For what is stale
	// a tick later: a sound, a muzzle flash, a cursor.
	Unreliable
)

// String names the delivery.
func (d Delivery) String() string {
	switch d {
	case Reliable:
		return "Reliable"
	case Unreliable:
		return "Unreliable"
	}
	return fmt.Sprintf("Delivery(%d)", uint8(d))
}

func (d Delivery) check() error {
	if d != Reliable && d != Unreliable {
		return fmt.Errorf("replication: unknown delivery %v", d)
	}
	return nil
}

// Message is one received game message (a type registered with
// schema.RegisterMessage).
type Message[T any] struct {
	// From is the client that sent it; 0 on a client (the server sent it).
	From ClientID
	// Tick is the server tick the message belongs to: on a client, the
	// net tick the server sent it in (play an event about an interpolated
	// entity when the render clock reaches it); on the server, the newest
	// server tick the client had applied when it sent it (what it saw).
	Tick uint32
	// Value is the message, quantized as its net tags say; its
	// components.Ref fields hold this side's entities.
	Value T
}

// inbox is a message type's receiving end, by message id.
type inbox interface {
	// deliver takes one decoded message: resolve maps each reference (false:
	// the message is refused, and why says why); it reports whether the
	// message was taken.
	deliver(from ClientID, tick uint32, lanes []uint64, resolve func(*components.Ref) (ok bool, why string)) (bool, string)
	// reset forgets the messages of the last Receive.
	reset()
}

// endpoint is the receiving half shared by ServerEndpoint and ClientEndpoint.
type endpoint[T any] struct {
	plan     *schema.Plan
	in       []Message[T]
	handlers []func(Message[T])
}

func (e *endpoint[T]) deliver(from ClientID, tick uint32, lanes []uint64, resolve func(*components.Ref) (bool, string)) (bool, string) {
	// Decoded in place (the message's memory is the slice's: nothing is
	// allocated per message once it has grown).
	e.in = append(e.in, Message[T]{From: from, Tick: tick})
	m := &e.in[len(e.in)-1]
	schema.DequantizeValue(e.plan, lanes, &m.Value)
	for _, f := range e.plan.Refs() {
		if ok, why := resolve(refAt(&m.Value, f.Offset)); !ok {
			*m = Message[T]{}
			e.in = e.in[:len(e.in)-1]
			return false, why
		}
	}
	for _, h := range e.handlers {
		h(*m)
	}
	return true, ""
}

func (e *endpoint[T]) reset() {
	clear(e.in)
	e.in = e.in[:0]
}

// received iterates over the messages of the last Receive.
func (e *endpoint[T]) received() iter.Seq[Message[T]] {
	return func(yield func(Message[T]) bool) {
		for _, m := range e.in {
			if !yield(m) {
				return
			}
		}
	}
}

// refAt is the components.Ref at offset off of *v (a message value).
func refAt[T any](v *T, off uintptr) *components.Ref {
	return (*components.Ref)(unsafe.Add(unsafe.Pointer(v), off))
}

// messagePlan returns the plan of message type T in reg, or an error that
// says how to register it.
func messagePlan[T any](reg *schema.Registry) (*schema.Plan, error) {
	p := schema.MessageOf[T](reg)
	if p == nil {
		var zero T
		return nil, fmt.Errorf("replication: %T is not a registered message type (register it with schema.RegisterMessage, on the server and on every client)", zero)
	}
	return p, nil
}
