package quic

import (
	"bufio"
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	quicgo "github.com/quic-go/quic-go"

	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/internal/admission"
	"github.com/archenet/archenet/transport/internal/connio"
	"github.com/archenet/archenet/transport/internal/frame"
	"github.com/archenet/archenet/transport/internal/quicnet"
)

// Conn is an archenet connection over QUIC: datagrams are QUIC DATAGRAM frames
// (RFC 9221), messages are length-prefixed frames on one bidirectional stream.
// It implements [transport.Conn].
//
// Each Conn runs five goroutines: one drains quic-go's small datagram queue into a
// bounded queue of our own (enforcing the flood limit), one reads the stream into a
// bounded message queue, two write (datagrams and messages, through a
// [transport.Outbox], so that sends never block the caller), and one waits for the
// connection to end. All have exited when [Conn.Done] is closed.
type Conn struct {
	qc     *quicgo.Conn
	stream *quicgo.Stream

	core connio.Core // queues, outbox, counters, close requests, the end

	tbuf frame.Buffer // TryWriteMessage's (called under the outbox's lock)
	wbuf frame.Buffer // WriteMessage's (the message writer goroutine)

	probeMu    sync.Mutex
	maxPayload atomic.Int64 // the newest known maximum datagram payload

	onClose func(*Conn) // called once the connection has ended, before Done is closed
}

var (
	_ transport.Conn         = (*Conn)(nil)
	_ transport.CloseStarter = (*Conn)(nil)
)

// probe exceeds any QUIC datagram payload (quic-go packets are at most 1452 bytes), so
// SendDatagram(probe) never sends and always reports the current maximum. It is never
// written (quic-go checks the size before it copies anything), so connections share it.
var probe = make([]byte, 4096)

func newConn(qc *quicgo.Conn, stream *quicgo.Stream, br *bufio.Reader, s *connio.Settings, onClose func(*Conn)) *Conn {
	c := &Conn{qc: qc, stream: stream, onClose: onClose}
	// adm is the connection's place in its listener's pre-handshake budget
	// (nil for a dialed connection), released when it sends a Welcome or
	// closes.
	adm := admission.Of(qc)
	c.core.Init(connio.Setup{
		Ctx: qc.Context(), Settings: s, Writer: connWriter{c}, Closed: c.closedErr,
		Log:    s.CloseLog("archenet/quic: closing connection", qc.RemoteAddr()),
		Server: adm != nil, Welcomed: adm.Release,
	})
	c.MaxDatagramSize()
	if br == nil {
		br = bufio.NewReaderSize(stream, 4<<10) // larger reads bypass it
	}
	c.core.Go(func() { c.core.ReadDatagrams(qc.ReceiveDatagram, 0) })
	// The stream ending while the connection lives on is a protocol error.
	c.core.Go(func() { c.core.ReadMessages(br, true, func(error) bool { return qc.Context().Err() != nil }) })
	go c.watch()
	return c
}

// connWriter is the blocking send side the Outbox drains.
type connWriter struct{ c *Conn }

func (w connWriter) WriteDatagram(b []byte) error {
	c := w.c
	err := c.qc.SendDatagram(b) // waits while quic-go's queue of 32 is full
	if err == nil {
		return nil
	}
	err = quicnet.DatagramError(err, len(b))
	var tl *transport.DatagramTooLargeError
	if errors.As(err, &tl) {
		c.maxPayload.Store(int64(tl.Max))
	}
	return err
}

func (w connWriter) WriteMessage(b []byte, deadline time.Time) error {
	return w.c.wbuf.Write(w.c.stream, b, deadline)
}

func (w connWriter) TryWriteMessage(b []byte) (bool, error) {
	c := w.c
	err := c.stream.TryWriteAll(c.tbuf.Frame(b))
	c.tbuf.Release()
	if errors.Is(err, quicgo.ErrWouldBlock) {
		return false, nil
	}
	return err == nil, err
}

// watch carries out the first close request, waiting for quic-go's run loop
// to end the connection here rather than on the goroutine that decided to
// close, and ends the connection.
func (c *Conn) watch() {
	if r, ok := c.core.AwaitClose(); ok {
		c.qc.CloseWithError(quicgo.ApplicationErrorCode(r.Code), r.Reason)
	}
	err := closeErrorOf(context.Cause(c.qc.Context()))
	c.core.Stop()
	if c.onClose != nil {
		c.onClose(c)
	}
	c.core.End(err)
}

// closeErrorOf maps the reason quic-go gives for a closed connection to a CloseError.
func closeErrorOf(err error) *transport.CloseError {
	var app *quicgo.ApplicationError
	var tr *quicgo.TransportError
	switch {
	case errors.As(err, &app):
		return &transport.CloseError{Code: connio.CloseCodeOf(uint64(app.ErrorCode)), Reason: app.ErrorMessage, Remote: app.Remote}
	case errors.As(err, &tr):
		return &transport.CloseError{Code: transport.CodeProtocolError, Reason: "quic: " + tr.Error(), Remote: tr.Remote}
	default:
		return quicnet.CloseError(err, "quic")
	}
}

// closedErr returns the close error if the connection has ended, else nil.
func (c *Conn) closedErr() error {
	ctx := c.qc.Context()
	if ctx.Err() == nil {
		return nil
	}
	return closeErrorOf(context.Cause(ctx))
}

// SendDatagram implements [transport.Conn]. It never blocks: the datagram waits in a
// queue of Config.DatagramSendQueueLen for a writer goroutine that hands it to QUIC,
// and the oldest waiting one is dropped when the queue is full (a stalled path).
func (c *Conn) SendDatagram(b []byte) error {
	if err := c.closedErr(); err != nil {
		return err
	}
	if max := int(c.maxPayload.Load()); len(b) > max {
		// Path MTU discovery may have raised the limit since it was last asked.
		if max = c.MaxDatagramSize(); len(b) > max {
			return &transport.DatagramTooLargeError{Size: len(b), Max: max}
		}
	}
	return c.core.SendDatagram(b)
}

// ReceiveDatagram implements [transport.Conn].
func (c *Conn) ReceiveDatagram(ctx context.Context) ([]byte, error) {
	return c.core.ReceiveDatagram(ctx)
}

// PollDatagram implements [transport.Conn].
func (c *Conn) PollDatagram() ([]byte, bool) { return c.core.PollDatagram() }

// MaxDatagramSize implements [transport.Conn]. It asks quic-go for its current estimate,
// which starts at about 1200 bytes and grows with path MTU discovery.
func (c *Conn) MaxDatagramSize() int {
	c.probeMu.Lock()
	defer c.probeMu.Unlock()
	max := int64(1200)
	var tl *quicgo.DatagramTooLargeError
	if err := c.qc.SendDatagram(probe); errors.As(err, &tl) {
		max = tl.MaxDatagramPayloadSize
	}
	c.maxPayload.Store(max)
	return int(max)
}

// SendMessage implements [transport.Conn]. It never blocks: when QUIC's flow control
// cannot take the message at once (the peer is slow to read), it waits in a backlog for
// a writer goroutine, bounded by Config.MaxSendBacklog and Config.SendBacklogTimeout;
// past either bound the connection closes with transport.CodeSendBacklog.
//
// On a listener's connection, the first transport.Welcome releases the connection from
// the listener's pre-handshake budget: its flow-control windows may grow.
func (c *Conn) SendMessage(b []byte) error { return c.core.SendMessage(b) }

// ReceiveMessage implements [transport.Conn].
func (c *Conn) ReceiveMessage(ctx context.Context) ([]byte, error) {
	return c.core.ReceiveMessage(ctx)
}

// PollMessage implements [transport.Conn].
func (c *Conn) PollMessage() ([]byte, bool) { return c.core.PollMessage() }

// MaxMessageSize implements [transport.Conn].
func (c *Conn) MaxMessageSize() int { return c.core.MaxMessageSize() }

// StartClose implements [transport.CloseStarter]: the connection's own goroutine
// carries the close out (quic-go's close waits for the connection's run loop, which a
// flood of connections can keep busy for a long time), and Done is closed when it is
// complete. Only the first close counts.
func (c *Conn) StartClose(code transport.CloseCode, reason string) {
	c.core.RequestClose(code, reason)
}

// CloseWithReason implements [transport.Conn]. The reason is truncated to
// transport.MaxReasonLen bytes. It returns once the connection's goroutines have exited
// (the replication server calls [Conn.StartClose] instead). Messages not yet transmitted when it is called may be lost (QUIC closes
// immediately), as may datagrams still in the send queue.
func (c *Conn) CloseWithReason(code transport.CloseCode, reason string) error {
	return c.core.CloseWait(code, reason)
}

// Close implements [transport.Conn].
func (c *Conn) Close() error { return c.CloseWithReason(transport.CodeNormal, "") }

// Done implements [transport.Conn].
func (c *Conn) Done() <-chan struct{} { return c.core.Done() }

// Err implements [transport.Conn].
func (c *Conn) Err() error { return c.core.Err() }

// RemoteAddr implements [transport.Conn].
func (c *Conn) RemoteAddr() net.Addr { return c.qc.RemoteAddr() }

// LocalAddr implements [transport.Conn].
func (c *Conn) LocalAddr() net.Addr { return c.qc.LocalAddr() }

// Stats implements [transport.Conn]. RTT is quic-go's smoothed RTT.
func (c *Conn) Stats() transport.Stats {
	return c.core.Stats(c.qc.ConnectionStats().SmoothedRTT)
}

// QUICConn returns the underlying quic-go connection, for diagnostics.
func (c *Conn) QUICConn() *quicgo.Conn { return c.qc }
