//go:build js

package websocket

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"syscall/js"
	"time"

	"github.com/archenet/archenet/transport"
)

// Dial opens a connection to the session URL rawURL (ws:// or wss://) with
// the browser's WebSocket, within Config.HandshakeTimeout. (An ws:// URL
// from an https page is refused by the browser: use wss://.)
func Dial(ctx context.Context, rawURL string, cfg *Config) (*Conn, error) {
	_, set, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	u, err := parseSessionURL(rawURL)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, set.HandshakeTimeout)
	defer cancel()
	s, err := openJS(ctx, rawURL)
	if err != nil {
		return nil, fmt.Errorf("websocket: dial %s: %w", rawURL, err)
	}
	return newConn(s, &set, false, addr{"websocket", "browser"}, addr{"websocket", u.Host}, nil, nil), nil
}

// Bounds of a browser socket: the bytes of received messages it queues for
// the reader (a server that floods the page closes it), and what its send
// buffer may hold before a datagram is dropped and a message waits.
const (
	jsQueueBytes = 8 << 20
	jsSendBuffer = 256 << 10
)

// jsSocket is the browser's WebSocket: its events queue the messages for
// next, which the connection's reader calls.
type jsSocket struct {
	ws    js.Value
	funcs []js.Func

	mu     sync.Mutex
	queue  []jsMessage
	bytes  int
	limit  int
	ready  chan struct{} // signalled when a message is queued
	closed chan struct{} // closed when the socket has closed
	err    error         // why
	r      bytes.Reader
}

type jsMessage struct {
	binary bool
	b      []byte
}

// jsCloseError is the browser's close event.
type jsCloseError struct {
	code   int
	reason string
	clean  bool
}

func (e *jsCloseError) Error() string {
	if e.reason == "" {
		return fmt.Sprintf("websocket closed (code %d)", e.code)
	}
	return fmt.Sprintf("websocket closed (code %d, %s)", e.code, e.reason)
}

// openJS opens the browser's WebSocket to url and waits for it to open.
func openJS(ctx context.Context, url string) (*jsSocket, error) {
	s := &jsSocket{ready: make(chan struct{}, 1), closed: make(chan struct{}), limit: 1 << 20}
	s.ws = js.Global().Get("WebSocket").New(url)
	s.ws.Set("binaryType", "arraybuffer")
	opened := make(chan struct{})
	var once sync.Once
	on := func(name string, f func(e js.Value)) {
		fn := js.FuncOf(func(_ js.Value, args []js.Value) any {
			f(args[0])
			return nil
		})
		s.funcs = append(s.funcs, fn)
		s.ws.Set(name, fn)
	}
	on("onopen", func(js.Value) { once.Do(func() { close(opened) }) })
	on("onmessage", func(e js.Value) {
		d := e.Get("data")
		var m jsMessage
		if d.Type() == js.TypeString {
			m = jsMessage{b: []byte(d.String())}
		} else {
			u := js.Global().Get("Uint8Array").New(d)
			m = jsMessage{binary: true, b: make([]byte, u.Get("length").Int())}
			js.CopyBytesToGo(m.b, u)
		}
		s.push(m)
	})
	on("onclose", func(e js.Value) {
		s.end(&jsCloseError{code: e.Get("code").Int(), reason: e.Get("reason").String(), clean: e.Get("wasClean").Bool()})
	})
	select {
	case <-opened:
		return s, nil
	case <-s.closed:
		s.release()
		return nil, s.err
	case <-ctx.Done():
		s.closeNow()
		return nil, ctx.Err()
	}
}

// push queues a received message (the browser's event: it cannot wait);
// past jsQueueBytes, or a message over the read limit, the socket closes.
func (s *jsSocket) push(m jsMessage) {
	s.mu.Lock()
	if len(m.b) > s.limit || s.bytes+len(m.b) > jsQueueBytes {
		s.mu.Unlock()
		s.fail(errors.New("the server sent more than the page queues"))
		return
	}
	s.queue = append(s.queue, m)
	s.bytes += len(m.b)
	s.mu.Unlock()
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// end records why the socket closed (the first reason counts).
func (s *jsSocket) end(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.closed:
		return
	default:
	}
	s.err = err
	close(s.closed)
}

// fail closes the socket for a reason of this end.
func (s *jsSocket) fail(err error) {
	s.end(err)
	s.ws.Call("close")
}

func (s *jsSocket) release() {
	for _, f := range s.funcs {
		f.Release()
	}
	s.funcs = nil
}

func (s *jsSocket) next(ctx context.Context) (bool, io.Reader, error) {
	for {
		s.mu.Lock()
		if len(s.queue) > 0 {
			m := s.queue[0]
			s.queue[0] = jsMessage{}
			s.queue = s.queue[1:]
			s.bytes -= len(m.b)
			s.mu.Unlock()
			s.r.Reset(m.b)
			return m.binary, &s.r, nil
		}
		s.mu.Unlock()
		select {
		case <-s.ready:
		case <-s.closed:
			s.mu.Lock()
			empty := len(s.queue) == 0
			s.mu.Unlock()
			if empty {
				return false, nil, s.err
			}
		case <-ctx.Done():
			return false, nil, ctx.Err()
		}
	}
}

// write sends b once the socket's send buffer has room (or ctx ends).
func (s *jsSocket) write(ctx context.Context, b []byte) error {
	for s.ws.Get("bufferedAmount").Int() > jsSendBuffer {
		select {
		case <-s.closed:
			return s.err
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return s.send(b)
}

// writeDatagram drops the datagram while the send buffer is full (a late
// state is worth nothing).
func (s *jsSocket) writeDatagram(_ context.Context, b []byte) error {
	if s.ws.Get("bufferedAmount").Int() > jsSendBuffer {
		return nil
	}
	return s.send(b)
}

func (s *jsSocket) send(b []byte) error {
	select {
	case <-s.closed:
		return s.err
	default:
	}
	u := js.Global().Get("Uint8Array").New(len(b))
	js.CopyBytesToJS(u, b)
	s.ws.Call("send", u)
	return nil
}

func (s *jsSocket) closeNow() {
	s.end(errors.New("closed"))
	s.ws.Call("close")
}

func (s *jsSocket) setReadLimit(n int) {
	s.mu.Lock()
	s.limit = n
	s.mu.Unlock()
}

// closeErrorOf maps the socket's end: the browser's close event (status
// 4000 + code from a peer that did not announce its close first), or a lost
// connection.
func closeErrorOf(err error) *transport.CloseError {
	var ce *jsCloseError
	switch {
	case errors.As(err, &ce) && ce.code >= closeStatusBase && ce.code < closeStatusBase+1000:
		return &transport.CloseError{Code: transport.CloseCode(ce.code - closeStatusBase), Reason: ce.reason, Remote: true}
	case errors.As(err, &ce) && ce.code == 1000:
		return &transport.CloseError{Code: transport.CodeNormal, Reason: ce.reason, Remote: true}
	case err == nil:
		return &transport.CloseError{Code: transport.CodeNormal, Reason: "connection closed"}
	default:
		return &transport.CloseError{Code: transport.CodeProtocolError, Reason: "websocket: connection lost: " + err.Error(), Remote: true}
	}
}
