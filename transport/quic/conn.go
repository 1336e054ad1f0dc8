package quic

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	quicgo "github.com/quic-go/quic-go"

	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/internal/admission"
	"github.com/archenet/archenet/transport/internal/connio"
	"github.com/archenet/archenet/transport/internal/frame"
	"github.com/archenet/archenet/transport/internal/ratelimit"
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
	cfg    Config
	// adm is the connection's place in its listener's pre-handshake budget
	// (nil for a dialed connection), released when it sends a Welcome or
	// closes.
	adm *admission.Entry

	core connio.Core // receive queues, outbox, counters, the end

	tbuf []byte // framing buffer of TryWriteMessage (called under the outbox's lock)
	wbuf []byte // framing buffer of WriteMessage (the message writer goroutine)

	probeMu    sync.Mutex
	maxPayload atomic.Int64 // the newest known maximum datagram payload

	readers sync.WaitGroup
	// closeReq hands a close to the watch goroutine (the first one wins), so
	// that whoever decides to close never waits for quic-go's run loop.
	closeReq chan closeRequest
	onClose  func(*Conn) // called once the connection has ended, before Done is closed
}

var (
	_ transport.Conn         = (*Conn)(nil)
	_ transport.CloseStarter = (*Conn)(nil)
)

// probe exceeds any QUIC datagram payload (quic-go packets are at most 1452 bytes), so
// SendDatagram(probe) never sends and always reports the current maximum. It is never
// written (quic-go checks the size before it copies anything), so connections share it.
var probe = make([]byte, 4096)

func newConn(qc *quicgo.Conn, stream *quicgo.Stream, br *bufio.Reader, cfg Config, onClose func(*Conn)) *Conn {
	c := &Conn{
		qc:       qc,
		stream:   stream,
		cfg:      cfg,
		closeReq: make(chan closeRequest, 1),
		adm:      admission.Of(qc),
		onClose:  onClose,
	}
	c.core.Init(cfg.DatagramQueueLen, cfg.MessageQueueLen, cfg.MessageQueueBytes)
	c.core.SetOutbox(transport.NewOutbox(connWriter{c}, transport.OutboxConfig{
		DatagramQueueLen: cfg.DatagramSendQueueLen, MaxBacklog: cfg.MaxSendBacklog, BacklogTimeout: cfg.SendBacklogTimeout,
	}, func(code transport.CloseCode, reason string) {
		c.logClose(code, reason)
		c.closeNoWait(code, reason)
	}))
	c.MaxDatagramSize()
	if br == nil {
		br = bufio.NewReaderSize(stream, 4<<10) // larger reads bypass it
	}
	c.readers.Add(2)
	go c.readDatagrams()
	go c.readMessages(br)
	go c.watch()
	return c
}

// logClose reports a close this end decided on because of the peer.
func (c *Conn) logClose(code transport.CloseCode, reason string) {
	c.cfg.Logger.Warn("archenet/quic: closing connection", "remote", c.qc.RemoteAddr(), "code", code, "reason", reason)
}

// connWriter is the blocking send side the Outbox drains.
type connWriter struct{ c *Conn }

func (w connWriter) WriteDatagram(b []byte) error {
	c := w.c
	err := c.qc.SendDatagram(b) // waits while quic-go's queue of 32 is full
	if err == nil {
		return nil
	}
	var tl *quicgo.DatagramTooLargeError
	if errors.As(err, &tl) {
		c.maxPayload.Store(tl.MaxDatagramPayloadSize)
		return &transport.DatagramTooLargeError{Size: len(b), Max: int(tl.MaxDatagramPayloadSize)}
	}
	return err
}

func (w connWriter) WriteMessage(b []byte, deadline time.Time) error {
	c := w.c
	c.wbuf = frame.Append(c.wbuf[:0], b)
	_ = c.stream.SetWriteDeadline(deadline)
	_, err := c.stream.Write(c.wbuf)
	if cap(c.wbuf) > 64<<10 {
		c.wbuf = nil // don't pin a large buffer
	}
	return err
}

func (w connWriter) TryWriteMessage(b []byte) (bool, error) {
	c := w.c
	c.tbuf = frame.Append(c.tbuf[:0], b)
	err := c.stream.TryWriteAll(c.tbuf)
	if cap(c.tbuf) > 64<<10 {
		c.tbuf = nil
	}
	if errors.Is(err, quicgo.ErrWouldBlock) {
		return false, nil
	}
	return err == nil, err
}

func (c *Conn) readDatagrams() {
	defer c.readers.Done()
	ctx := c.qc.Context()
	limit := ratelimit.New(c.cfg.DatagramRateLimit, c.cfg.DatagramBurst, time.Now())
	for {
		b, err := c.qc.ReceiveDatagram(ctx)
		if err != nil {
			return
		}
		if !limit.Allow(time.Now()) {
			reason := fmt.Sprintf("datagram flood: more than %d datagrams/s (burst %d)", c.cfg.DatagramRateLimit, c.cfg.DatagramBurst)
			c.logClose(transport.CodeFlood, reason)
			c.closeNoWait(transport.CodeFlood, reason)
			return
		}
		if c.adm != nil && !c.adm.Released() && c.core.QueuedDatagrams() >= admission.PendingDatagrams {
			c.core.DropDatagram() // not read before the Welcome: keep a few
			continue
		}
		c.core.PushDatagram(b)
	}
}

// readMessages reads the stream into the message queue. The first message is the
// handshake: it is bounded by transport.MaxHandshakeMessageSize, and the next one is
// not read before the application has taken it, so a peer that has not been welcomed
// yet holds at most one small message of our memory (plus QUIC's receive window).
func (c *Conn) readMessages(br *bufio.Reader) {
	defer c.readers.Done()
	ctx := c.qc.Context()
	for first := true; ; first = false {
		limit := c.cfg.MaxMessageSize
		if first {
			limit = min(limit, transport.MaxHandshakeMessageSize)
		}
		b, err := frame.Read(br, limit)
		if err != nil {
			var fe *frame.Error
			switch {
			case errors.As(err, &fe):
				reason := fe.Reason
				if first && fe.Code == transport.CodeMessageTooLarge {
					reason = "handshake " + reason
				}
				c.logClose(fe.Code, reason)
				c.closeNoWait(fe.Code, reason)
			case ctx.Err() == nil:
				// The stream ended or was reset while the connection lives on.
				c.closeNoWait(transport.CodeProtocolError, "message stream closed: "+err.Error())
			}
			return
		}
		if !c.core.PushMessage(ctx, b) {
			return
		}
		if first && !c.core.WaitMessagesTaken(ctx) {
			return
		}
	}
}

// closeRequest is a close the watch goroutine is to carry out.
type closeRequest struct {
	code   transport.CloseCode
	reason string
}

func (c *Conn) watch() {
	ctx := c.qc.Context()
	select {
	case <-ctx.Done():
	case r := <-c.closeReq:
		// Waits for quic-go's run loop to end the connection: here, not on
		// the goroutine that decided to close.
		c.qc.CloseWithError(quicgo.ApplicationErrorCode(r.code), transport.TruncateReason(r.reason, transport.MaxReasonLen))
	}
	err := closeErrorOf(context.Cause(ctx))
	c.core.Outbox().Close()
	c.readers.Wait()
	c.core.Outbox().Wait()
	if c.onClose != nil {
		c.onClose(c)
	}
	c.core.End(err)
}

// closeErrorOf maps the reason quic-go gives for a closed connection to a CloseError.
func closeErrorOf(err error) *transport.CloseError {
	var app *quicgo.ApplicationError
	var idle *quicgo.IdleTimeoutError
	var hs *quicgo.HandshakeTimeoutError
	var tr *quicgo.TransportError
	switch {
	case errors.As(err, &app):
		code := transport.CloseCode(app.ErrorCode)
		if app.ErrorCode > 0xffff {
			code = transport.CodeProtocolError
		}
		return &transport.CloseError{Code: code, Reason: app.ErrorMessage, Remote: app.Remote}
	case errors.As(err, &idle), errors.As(err, &hs):
		return &transport.CloseError{Code: transport.CodeTimeout, Reason: err.Error()}
	case errors.As(err, &tr):
		return &transport.CloseError{Code: transport.CodeProtocolError, Reason: "quic: " + tr.Error(), Remote: tr.Remote}
	case err == nil:
		return &transport.CloseError{Code: transport.CodeNormal}
	default:
		return &transport.CloseError{Code: transport.CodeInternal, Reason: "quic: " + err.Error()}
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
	if err := c.core.SendDatagram(b); err != nil {
		return connio.SendErr(err, c.closedErr)
	}
	return nil
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
func (c *Conn) SendMessage(b []byte) error {
	if len(b) > c.cfg.MaxMessageSize {
		return &transport.MessageTooLargeError{Size: len(b), Max: c.cfg.MaxMessageSize}
	}
	if err := c.closedErr(); err != nil {
		return err
	}
	if err := c.core.SendMessage(b); err != nil {
		return connio.SendErr(err, c.closedErr)
	}
	if c.adm != nil && transport.TypeOf(b) == transport.MessageWelcome {
		c.adm.Release() // welcomed: the windows may grow (a Reject's connection closes)
	}
	return nil
}

// ReceiveMessage implements [transport.Conn].
func (c *Conn) ReceiveMessage(ctx context.Context) ([]byte, error) {
	return c.core.ReceiveMessage(ctx)
}

// PollMessage implements [transport.Conn].
func (c *Conn) PollMessage() ([]byte, bool) { return c.core.PollMessage() }

// MaxMessageSize implements [transport.Conn].
func (c *Conn) MaxMessageSize() int { return c.cfg.MaxMessageSize }

// closeNoWait starts closing the connection and returns at once: the watch goroutine
// closes it (quic-go's close waits for the connection's run loop, which a flood of
// connections can keep busy for a long time). Only the first close counts.
func (c *Conn) closeNoWait(code transport.CloseCode, reason string) {
	select {
	case c.closeReq <- closeRequest{code: code, reason: reason}:
	default: // a close is under way
	}
}

// StartClose implements [transport.CloseStarter]: the connection's own goroutine
// carries the close out, and Done is closed when it is complete.
func (c *Conn) StartClose(code transport.CloseCode, reason string) { c.closeNoWait(code, reason) }

// CloseWithReason implements [transport.Conn]. The reason is truncated to
// transport.MaxReasonLen bytes. It returns once the connection's goroutines have exited
// (the replication server calls [Conn.StartClose] instead). Messages not yet transmitted when it is called may be lost (QUIC closes
// immediately), as may datagrams still in the send queue.
func (c *Conn) CloseWithReason(code transport.CloseCode, reason string) error {
	c.closeNoWait(code, reason)
	<-c.core.Done()
	return nil
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
