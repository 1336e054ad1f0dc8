//go:build js && wasm

package webtransport

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"syscall/js"
	"time"

	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/internal/connio"
	"github.com/archenet/archenet/transport/internal/frame"
)

// Conn is the browser end of an archenet connection over the page's WebTransport
// session: datagrams are the session's datagrams, messages length-prefixed frames on
// the bidirectional stream Dial opened. It implements [transport.Conn].
//
// Reader goroutines await the datagram and stream readers' promises and fill bounded
// queues; sends go through a [transport.Outbox] whose writer goroutines await the
// writers' ready and write promises, so SendDatagram and SendMessage never block the
// game loop. Datagrams are at most [MaxDatagramPayload] bytes both ways, and the
// page sends at most the browser's maxDatagramSize if that is smaller (1215 in
// Chromium 156, 1024 in Chromium 148): [Conn.MaxDatagramSize].
type Conn struct {
	wt       js.Value // the WebTransport object
	writer   js.Value // the message stream's WritableStreamDefaultWriter
	reader   js.Value // its ReadableStreamDefaultReader
	dgWriter js.Value
	dgReader js.Value
	url      string
	maxDg    int

	ctx    context.Context // ends when the session has ended
	cancel context.CancelFunc

	core connio.Core // queues, outbox, counters, close requests, the end
	rtt  atomic.Int64
}

var _ transport.Conn = (*Conn)(nil)

func newConn(wtv, writer, reader js.Value, url string, set *connio.Settings) *Conn {
	dgs := wtv.Get("datagrams")
	// Let the browser queue a burst of datagrams (its default high-water mark is 1).
	dgs.Set("incomingHighWaterMark", set.DatagramQueueLen)
	dgs.Set("outgoingHighWaterMark", set.DatagramSendQueueLen)
	c := &Conn{
		wt: wtv, writer: writer, reader: reader, url: url,
		dgWriter: datagramWriter(dgs),
		dgReader: dgs.Get("readable").Call("getReader"),
		maxDg:    MaxDatagramPayload,
	}
	if m := dgs.Get("maxDatagramSize"); m.Type() == js.TypeNumber && m.Int() < c.maxDg {
		c.maxDg = m.Int()
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.core.Init(connio.Setup{Ctx: c.ctx, Settings: set, Writer: jsWriter{c}, Closed: c.closedErr})
	c.core.Go(c.readDatagrams)
	c.core.Go(func() {
		c.core.ReadMessages(bufio.NewReaderSize(&streamReader{r: c.reader, ctx: c.ctx}, 4<<10), false, nil)
	})
	c.core.Go(c.pollRTT)
	c.core.Go(c.closer)
	go c.watch()
	return c
}

// datagramWriter returns the writer of the session's datagrams: createWritable() where
// the browser has it (the newer API), else the writable attribute.
func datagramWriter(dgs js.Value) js.Value {
	if dgs.Get("createWritable").Type() == js.TypeFunction {
		return dgs.Call("createWritable").Call("getWriter")
	}
	return dgs.Get("writable").Call("getWriter")
}

// jsWriter is the blocking send side the Outbox drains: it awaits the browser.
type jsWriter struct{ c *Conn }

func (w jsWriter) WriteDatagram(b []byte) error {
	c := w.c
	if _, err := await(c.ctx, c.dgWriter.Get("ready")); err != nil {
		return err
	}
	_, err := await(c.ctx, c.dgWriter.Call("write", bytesToJS(b)))
	return err
}

// deadlineError is a message write that waited past its deadline.
type deadlineError struct{}

func (deadlineError) Error() string { return "webtransport: message write deadline exceeded" }
func (deadlineError) Timeout() bool { return true }

func (w jsWriter) WriteMessage(b []byte, deadline time.Time) error {
	c := w.c
	ctx, cancel := context.WithDeadlineCause(c.ctx, deadline, deadlineError{})
	defer cancel()
	if _, err := await(ctx, c.writer.Get("ready")); err != nil {
		return err
	}
	_, err := await(ctx, c.writer.Call("write", bytesToJS(frame.Append(nil, b))))
	return err
}

func (c *Conn) readDatagrams() {
	for {
		res, err := await(c.ctx, c.dgReader.Call("read"))
		if err != nil || res.Get("done").Bool() {
			return
		}
		v := res.Get("value")
		b := make([]byte, v.Get("length").Int())
		js.CopyBytesToGo(b, v)
		c.core.PushDatagram(b)
	}
}

// pollRTT reads the session's smoothed RTT from getStats() once a second.
func (c *Conn) pollRTT() {
	if c.wt.Get("getStats").Type() != js.TypeFunction {
		return
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		st, err := await(c.ctx, c.wt.Call("getStats"))
		if err == nil {
			if ms := st.Get("smoothedRtt"); ms.Type() == js.TypeNumber {
				c.rtt.Store(int64(ms.Float() * float64(time.Millisecond)))
			}
		}
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// closer carries out the first close request: the server sees its code and reason.
func (c *Conn) closer() {
	if r, ok := c.core.AwaitClose(); ok {
		_, _ = call(c.wt, "close", map[string]any{"closeCode": int(r.Code), "reason": r.Reason})
	}
}

// watch waits for the session to end and records why.
func (c *Conn) watch() {
	info, err := await(context.Background(), c.wt.Get("closed"))
	ce := c.core.Local()
	if ce == nil {
		ce = closeErrorOfJS(info, err)
	}
	c.cancel()
	c.core.Stop()
	c.core.End(ce)
}

// closeErrorOfJS maps how the closed promise settled: resolved with the peer's
// WebTransportCloseInfo, or rejected when the connection was lost.
func closeErrorOfJS(info js.Value, err error) *transport.CloseError {
	if err != nil {
		return &transport.CloseError{Code: transport.CodeInternal, Reason: "connection lost: " + err.Error()}
	}
	ce := &transport.CloseError{Remote: true}
	if info.Type() == js.TypeObject {
		if code := info.Get("closeCode"); code.Type() == js.TypeNumber {
			ce.Code = connio.CloseCodeOf(uint64(code.Int()))
		}
		ce.Reason = str(info.Get("reason"))
	}
	return ce
}

func (c *Conn) closedErr() error {
	select {
	case <-c.core.Done():
		return c.Err()
	default:
	}
	if c.core.Local() != nil || c.ctx.Err() != nil {
		return fmt.Errorf("webtransport: session closing: %w", transport.ErrClosed)
	}
	return nil
}

// SendDatagram implements [transport.Conn]. It never blocks.
func (c *Conn) SendDatagram(b []byte) error {
	if err := c.closedErr(); err != nil {
		return err
	}
	if len(b) > c.maxDg {
		return &transport.DatagramTooLargeError{Size: len(b), Max: c.maxDg}
	}
	return c.core.SendDatagram(b)
}

// ReceiveDatagram implements [transport.Conn].
func (c *Conn) ReceiveDatagram(ctx context.Context) ([]byte, error) {
	return c.core.ReceiveDatagram(ctx)
}

// PollDatagram implements [transport.Conn].
func (c *Conn) PollDatagram() ([]byte, bool) { return c.core.PollDatagram() }

// MaxDatagramSize implements [transport.Conn]: [MaxDatagramPayload], or the browser's
// maxDatagramSize if smaller.
func (c *Conn) MaxDatagramSize() int { return c.maxDg }

// SendMessage implements [transport.Conn]. It never blocks.
func (c *Conn) SendMessage(b []byte) error { return c.core.SendMessage(b) }

// ReceiveMessage implements [transport.Conn].
func (c *Conn) ReceiveMessage(ctx context.Context) ([]byte, error) {
	return c.core.ReceiveMessage(ctx)
}

// PollMessage implements [transport.Conn].
func (c *Conn) PollMessage() ([]byte, bool) { return c.core.PollMessage() }

// MaxMessageSize implements [transport.Conn].
func (c *Conn) MaxMessageSize() int { return c.core.MaxMessageSize() }

// CloseWithReason implements [transport.Conn]: the server sees code and reason.
func (c *Conn) CloseWithReason(code transport.CloseCode, reason string) error {
	return c.core.CloseWait(code, reason)
}

// Close implements [transport.Conn].
func (c *Conn) Close() error { return c.CloseWithReason(transport.CodeNormal, "") }

// Done implements [transport.Conn].
func (c *Conn) Done() <-chan struct{} { return c.core.Done() }

// Err implements [transport.Conn].
func (c *Conn) Err() error { return c.core.Err() }

// Addr is the address of a browser connection's ends: the session URL for the remote
// end, "page" for the local one (a page cannot learn its own UDP address).
type Addr string

// Network returns "webtransport".
func (Addr) Network() string { return "webtransport" }

// String returns the address as text.
func (a Addr) String() string { return string(a) }

// RemoteAddr implements [transport.Conn]: the session URL.
func (c *Conn) RemoteAddr() net.Addr { return Addr(c.url) }

// LocalAddr implements [transport.Conn].
func (c *Conn) LocalAddr() net.Addr { return Addr("page") }

// Stats implements [transport.Conn]. RTT is the browser's smoothedRtt (getStats, read
// once a second).
func (c *Conn) Stats() transport.Stats {
	return c.core.Stats(time.Duration(c.rtt.Load()))
}
