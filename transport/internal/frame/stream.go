package frame

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/archenet/archenet/transport"
)

// Preamble is the first byte a client writes on the message stream it opens
// (transport/quic, transport/webtransport); frames follow in both directions.
const Preamble = 0xA1

// ReadStream is the receive side of a message stream with a read deadline, as
// quic-go's and webtransport-go's streams have it.
type ReadStream interface {
	io.Reader
	SetReadDeadline(t time.Time) error
}

// WriteStream is the send side of a message stream with a write deadline, as
// quic-go's and webtransport-go's streams have it.
type WriteStream interface {
	io.Writer
	SetWriteDeadline(t time.Time) error
}

// Accept is a server's wait for a client's message stream: accept (a QUIC
// connection's or a WebTransport session's AcceptStream) until ctx ends, then
// the preamble within timeout. A stream not opened in time is a
// transport.CodeTimeout *Error, a preamble missing or wrong a
// transport.CodeProtocolError one.
func Accept[S ReadStream](ctx context.Context, accept func(context.Context) (S, error), timeout time.Duration) (S, *Error) {
	s, err := accept(ctx)
	if err != nil {
		return s, &Error{transport.CodeTimeout, "message stream not opened in time"}
	}
	_ = s.SetReadDeadline(time.Now().Add(timeout))
	var pre [1]byte
	if _, err := io.ReadFull(s, pre[:]); err != nil {
		return s, &Error{transport.CodeProtocolError, "message stream preamble missing"}
	}
	if pre[0] != Preamble {
		return s, &Error{transport.CodeProtocolError, fmt.Sprintf("bad message stream preamble %#x", pre[0])}
	}
	_ = s.SetReadDeadline(time.Time{})
	return s, nil
}

// Buffer is a stream writer's frame, kept from one message to the next so that
// framing allocates nothing; a frame above 64 KiB is let go once written, so a
// rare large message does not pin its memory. Not safe for concurrent use (each
// writer goroutine owns one).
type Buffer struct{ b []byte }

// Frame returns the frame carrying payload, valid until the next Frame or
// Release.
func (f *Buffer) Frame(payload []byte) []byte {
	f.b = Append(f.b[:0], payload)
	return f.b
}

// Release lets a frame above 64 KiB go (call it once the frame is written).
func (f *Buffer) Release() {
	if cap(f.b) > 64<<10 {
		f.b = nil
	}
}

// Write writes the frame carrying payload to s, waiting for s at most until
// deadline: an Outbox's WriteMessage over a stream.
func (f *Buffer) Write(s WriteStream, payload []byte, deadline time.Time) error {
	_ = s.SetWriteDeadline(deadline)
	_, err := s.Write(f.Frame(payload))
	f.Release()
	return err
}
