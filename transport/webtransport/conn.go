//go:build !js

package webtransport

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
	"github.com/quic-go/quic-go/http3"
	wt "github.com/quic-go/webtransport-go"

	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/internal/admission"
	"github.com/archenet/archenet/transport/internal/connio"
	"github.com/archenet/archenet/transport/internal/frame"
	"github.com/archenet/archenet/transport/internal/ratelimit"
)

// Conn is an archenet connection over a WebTransport session: datagrams are the
// session's HTTP datagrams, messages are length-prefixed frames on the one
// bidirectional stream the client opens. It implements [transport.Conn] and
// [transport.CloseStarter].
//
// Each Conn runs seven goroutines: one drains the session's datagrams into a bounded
// queue (enforcing the flood limit), one reads the stream into a bounded message queue,
// two write (through a [transport.Outbox], so sends never block the caller), two refuse
// any further stream the peer opens (one also learns why the session ended), and one
// carries out the close and waits for the end. All have exited when [Conn.Done] is
// closed.
type Conn struct {
	sess    *wt.Session
	stream  *wt.Stream
	connect *http3.Stream // the session's CONNECT stream, for the close capsule (nil: see closeSession)
	qc      *quicgo.Conn  // the session's QUIC connection, for RTT and the final close
	ownsQC  bool          // the QUIC connection carries only this session: close it at the end
	cfg     Config
	// adm is the connection's place in its listener's pre-handshake budget (nil for
	// a dialed connection or one of NewListener), released when it sends a Welcome.
	adm *admission.Entry
	// server: datagrams beyond admission.PendingDatagrams wait for no one until
	// this end sent its Welcome (welcomed), and are dropped.
	server   bool
	welcomed atomic.Bool

	core connio.Core // receive queues, outbox, counters, the end
	wbuf []byte      // framing buffer of WriteMessage (the message writer goroutine)

	causeMu sync.Mutex
	cause   error                 // why the session ended, as webtransport-go reported it
	local   *transport.CloseError // the close this end decided on, if it closed first

	readers sync.WaitGroup
	// closeReq hands a close to the watch goroutine (the first one wins), so
	// that whoever decides to close never waits for the peer or quic-go.
	closeReq chan closeRequest
	onClose  func(*Conn)
}

var (
	_ transport.Conn         = (*Conn)(nil)
	_ transport.CloseStarter = (*Conn)(nil)
)

// session is what newConn needs of an established session.
type session struct {
	sess    *wt.Session
	stream  *wt.Stream
	connect *http3.Stream
	qc      *quicgo.Conn
	ownsQC  bool
	server  bool
}

func newConn(s session, cfg Config, onClose func(*Conn)) *Conn {
	c := &Conn{
		sess: s.sess, stream: s.stream, connect: s.connect, qc: s.qc, ownsQC: s.ownsQC, cfg: cfg,
		adm: admission.Of(s.qc), server: s.server,
		closeReq: make(chan closeRequest, 1),
		onClose:  onClose,
	}
	c.core.Init(cfg.DatagramQueueLen, cfg.MessageQueueLen, cfg.MessageQueueBytes)
	c.core.SetOutbox(transport.NewOutbox(connWriter{c}, transport.OutboxConfig{
		DatagramQueueLen: cfg.DatagramSendQueueLen, MaxBacklog: cfg.MaxSendBacklog, BacklogTimeout: cfg.SendBacklogTimeout,
	}, func(code transport.CloseCode, reason string) {
		c.logClose(code, reason)
		c.closeNoWait(code, reason)
	}))
	c.readers.Add(4)
	go c.readDatagrams()
	go c.readMessages(bufio.NewReaderSize(s.stream, 4<<10))
	go c.refuseStreams()
	go c.refuseUniStreams()
	go c.watch()
	return c
}

func (c *Conn) logClose(code transport.CloseCode, reason string) {
	c.cfg.Logger.Warn("archenet/webtransport: closing session", "remote", c.sess.RemoteAddr(), "code", code, "reason", reason)
}

// connWriter is the blocking send side the Outbox drains.
type connWriter struct{ c *Conn }

func (w connWriter) WriteDatagram(b []byte) error {
	err := w.c.sess.SendDatagram(b) // waits while the queue of 32 is full
	var tl *quicgo.DatagramTooLargeError
	if errors.As(err, &tl) {
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

func (c *Conn) readDatagrams() {
	defer c.readers.Done()
	ctx := c.sess.Context()
	limit := ratelimit.New(c.cfg.DatagramRateLimit, c.cfg.DatagramBurst, time.Now())
	for {
		b, err := c.sess.ReceiveDatagram(ctx)
		if err != nil {
			return
		}
		if !limit.Allow(time.Now()) {
			reason := fmt.Sprintf("datagram flood: more than %d datagrams/s (burst %d)", c.cfg.DatagramRateLimit, c.cfg.DatagramBurst)
			c.logClose(transport.CodeFlood, reason)
			c.closeNoWait(transport.CodeFlood, reason)
			return
		}
		if len(b) > MaxDatagramPayload {
			// Neither a browser nor Dial sends one.
			reason := fmt.Sprintf("datagram of %d bytes exceeds the maximum of %d", len(b), MaxDatagramPayload)
			c.logClose(transport.CodeProtocolError, reason)
			c.closeNoWait(transport.CodeProtocolError, reason)
			return
		}
		if c.server && !c.welcomed.Load() && c.core.QueuedDatagrams() >= admission.PendingDatagrams {
			c.core.DropDatagram() // not read before the Welcome: keep a few
			continue
		}
		c.core.PushDatagram(b)
	}
}

// readMessages reads the stream into the message queue. The first message is the
// handshake: at most transport.MaxHandshakeMessageSize, and the next one is not read
// before the application has taken it (as in transport/quic).
func (c *Conn) readMessages(br *bufio.Reader) {
	defer c.readers.Done()
	ctx := c.sess.Context()
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
			case c.sessionEnding(err):
			default:
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

// sessionEnding reports whether a stream error err comes from the session's end
// (its close capsule may arrive just after the peer reset the stream): it waits a
// moment for the session to end before it concludes that the stream alone died.
func (c *Conn) sessionEnding(err error) bool {
	var se *wt.SessionError
	if errors.As(err, &se) {
		return true
	}
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case <-c.sess.Context().Done():
		return true
	case <-t.C:
		return false
	}
}

// refuseStreams closes the session if the peer opens a second bidirectional stream
// (archenet uses exactly one); when the session ends, it records why.
func (c *Conn) refuseStreams() {
	defer c.readers.Done()
	_, err := c.sess.AcceptStream(context.Background())
	if err == nil {
		c.logClose(transport.CodeProtocolError, "unexpected second stream")
		c.closeNoWait(transport.CodeProtocolError, "unexpected second stream")
		<-c.sess.Context().Done()
		_, err = c.sess.AcceptStream(context.Background())
	}
	c.causeMu.Lock()
	c.cause = err
	c.causeMu.Unlock()
}

// refuseUniStreams closes the session if the peer opens a unidirectional stream.
func (c *Conn) refuseUniStreams() {
	defer c.readers.Done()
	if _, err := c.sess.AcceptUniStream(c.sess.Context()); err == nil {
		c.logClose(transport.CodeProtocolError, "unexpected unidirectional stream")
		c.closeNoWait(transport.CodeProtocolError, "unexpected unidirectional stream")
	}
}

func (c *Conn) watch() {
	select {
	case <-c.sess.Context().Done():
	case r := <-c.closeReq:
		closeSession(c.sess, c.connect, r.code, r.reason)
	}
	c.core.Outbox().Close()
	c.readers.Wait()
	c.core.Outbox().Wait()
	c.causeMu.Lock()
	err := c.closeError()
	c.causeMu.Unlock()
	if c.ownsQC {
		// A moment for the close capsule (or its answer) to be acknowledged.
		qc := c.qc
		time.AfterFunc(closeLinger, func() { _ = qc.CloseWithError(0, "") })
	}
	if c.onClose != nil {
		c.onClose(c)
	}
	c.core.End(err)
}

// closeError maps why the session ended to a CloseError. Called with causeMu held.
func (c *Conn) closeError() *transport.CloseError {
	if c.local != nil {
		return c.local
	}
	if qerr := context.Cause(c.qc.Context()); qerr != nil && c.cause == nil {
		return closeErrorOf(qerr)
	}
	return closeErrorOf(c.cause)
}

// closeErrorOf maps the reason webtransport-go or quic-go gives for an ended session.
func closeErrorOf(err error) *transport.CloseError {
	var se *wt.SessionError
	var app *quicgo.ApplicationError
	var idle *quicgo.IdleTimeoutError
	var hs *quicgo.HandshakeTimeoutError
	var h3 *http3.Error
	switch {
	case errors.As(err, &se):
		code := transport.CloseCode(se.ErrorCode)
		if se.ErrorCode > 0xffff {
			code = transport.CodeProtocolError
		}
		return &transport.CloseError{Code: code, Reason: se.Message, Remote: se.Remote}
	case errors.As(err, &idle), errors.As(err, &hs):
		return &transport.CloseError{Code: transport.CodeTimeout, Reason: err.Error()}
	case errors.As(err, &app) && app.ErrorCode == quicgo.ApplicationErrorCode(http3.ErrCodeNoError):
		return &transport.CloseError{Code: transport.CodeNormal, Reason: app.ErrorMessage, Remote: app.Remote}
	case errors.As(err, &app):
		return &transport.CloseError{Code: transport.CodeProtocolError, Reason: "quic: " + app.Error(), Remote: app.Remote}
	case errors.As(err, &h3):
		return &transport.CloseError{Code: transport.CodeProtocolError, Reason: "http3: " + h3.Error(), Remote: h3.Remote}
	case err == nil:
		return &transport.CloseError{Code: transport.CodeNormal}
	default:
		return &transport.CloseError{Code: transport.CodeInternal, Reason: "webtransport: " + err.Error()}
	}
}

// closedErr returns the close error (a *transport.CloseError) if the connection is
// closing or closed, else nil.
func (c *Conn) closedErr() error {
	select {
	case <-c.core.Done():
		return c.Err()
	default:
	}
	c.causeMu.Lock()
	defer c.causeMu.Unlock()
	if c.local == nil && c.sess.Context().Err() == nil {
		return nil
	}
	return c.closeError()
}

// SendDatagram implements [transport.Conn]. It never blocks: the datagram waits in a
// queue of Config.DatagramSendQueueLen, the oldest dropped when it is full.
func (c *Conn) SendDatagram(b []byte) error {
	if err := c.closedErr(); err != nil {
		return err
	}
	if len(b) > MaxDatagramPayload {
		return &transport.DatagramTooLargeError{Size: len(b), Max: MaxDatagramPayload}
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

// MaxDatagramSize implements [transport.Conn]: [MaxDatagramPayload], what a browser
// accepts, whatever the path would carry.
func (c *Conn) MaxDatagramSize() int { return MaxDatagramPayload }

// SendMessage implements [transport.Conn]. It never blocks: messages wait in a backlog
// bounded by Config.MaxSendBacklog and Config.SendBacklogTimeout, past either of which
// the session closes with transport.CodeSendBacklog.
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
	if c.server && transport.TypeOf(b) == transport.MessageWelcome {
		c.welcomed.Store(true)
		if c.adm != nil {
			c.adm.Release() // the QUIC windows may grow (a Reject's connection closes)
		}
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
// carries the close out (closeSession). Only the first close counts.
func (c *Conn) closeNoWait(code transport.CloseCode, reason string) {
	reason = transport.TruncateReason(reason, transport.MaxReasonLen)
	c.causeMu.Lock()
	if c.local == nil && c.sess.Context().Err() == nil {
		c.local = &transport.CloseError{Code: code, Reason: reason}
	}
	c.causeMu.Unlock()
	select {
	case c.closeReq <- closeRequest{code: code, reason: reason}:
	default: // a close is under way
	}
}

// StartClose implements [transport.CloseStarter]: the connection's own goroutine
// carries the close out (the peer sees code and reason), and Done is closed when it is
// complete, within about half a second even if the peer does not answer.
func (c *Conn) StartClose(code transport.CloseCode, reason string) { c.closeNoWait(code, reason) }

// CloseWithReason implements [transport.Conn]. The reason is truncated to
// transport.MaxReasonLen bytes. It returns once the connection's goroutines have
// exited: after the peer answered the close, or about half a second (the replication
// server calls [Conn.StartClose] instead).
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
func (c *Conn) RemoteAddr() net.Addr { return c.sess.RemoteAddr() }

// LocalAddr implements [transport.Conn].
func (c *Conn) LocalAddr() net.Addr { return c.sess.LocalAddr() }

// Stats implements [transport.Conn]. RTT is quic-go's smoothed RTT of the session's
// QUIC connection.
func (c *Conn) Stats() transport.Stats {
	return c.core.Stats(c.qc.ConnectionStats().SmoothedRTT)
}

// Session returns the underlying WebTransport session, for diagnostics.
func (c *Conn) Session() *wt.Session { return c.sess }
