//go:build js && wasm

package webtransport

import (
	"context"
	"fmt"
	"syscall/js"
)

// JSError is a JavaScript exception or promise rejection (a DOMException,
// WebTransportError, TypeError, ...), as the browser reported it.
type JSError struct {
	Name    string // e.g. "WebTransportError"
	Message string
	Source  string // WebTransportError.source ("session" or "stream"), if any
}

// Error returns the name, the source if any, and the message.
func (e *JSError) Error() string {
	if e.Source != "" {
		return fmt.Sprintf("%s (%s): %s", e.Name, e.Source, e.Message)
	}
	return e.Name + ": " + e.Message
}

func jsError(v js.Value) error {
	if v.Type() != js.TypeObject {
		return &JSError{Name: "Error", Message: v.String()}
	}
	e := &JSError{Name: str(v.Get("name")), Message: str(v.Get("message"))}
	if s := v.Get("source"); s.Type() == js.TypeString {
		e.Source = s.String()
	}
	return e
}

func str(v js.Value) string {
	if v.Type() == js.TypeString {
		return v.String()
	}
	return ""
}

type settled struct {
	v   js.Value
	err error
}

// await waits for promise p to settle or ctx to end. Its callbacks only hand the result
// over (a syscall/js callback must not block); if ctx ends first, the callbacks are
// released once p settles.
func await(ctx context.Context, p js.Value) (js.Value, error) {
	ch := make(chan settled, 1)
	then := js.FuncOf(func(_ js.Value, args []js.Value) any {
		ch <- settled{v: arg0(args)}
		return nil
	})
	catch := js.FuncOf(func(_ js.Value, args []js.Value) any {
		ch <- settled{err: jsError(arg0(args))}
		return nil
	})
	release := func() { then.Release(); catch.Release() }
	p.Call("then", then, catch)
	select {
	case r := <-ch:
		release()
		return r.v, r.err
	case <-ctx.Done():
		go func() { <-ch; release() }()
		return js.Undefined(), context.Cause(ctx)
	}
}

func arg0(args []js.Value) js.Value {
	if len(args) == 0 {
		return js.Undefined()
	}
	return args[0]
}

// call calls method m of v, turning a thrown exception into an error.
func call(v js.Value, m string, args ...any) (r js.Value, err error) {
	defer func() {
		if p := recover(); p != nil {
			if je, ok := p.(js.Error); ok {
				err = jsError(je.Value)
				return
			}
			err = fmt.Errorf("%v", p)
		}
	}()
	return v.Call(m, args...), nil
}

// bytesToJS copies b into a new Uint8Array.
func bytesToJS(b []byte) js.Value {
	u := js.Global().Get("Uint8Array").New(len(b))
	js.CopyBytesToJS(u, b)
	return u
}
