//go:build !js

package webtransport

import (
	"bufio"
	"context"
	"errors"
	"net"
	"sync"
	"time"

	quicgo "github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	wt "github.com/quic-go/webtransport-go"

	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/internal/admission"
	"github.com/archenet/archenet/transport/internal/connio"
	"github.com/archenet/archenet/transport/internal/frame"
	"github.com/archenet/archenet/transport/internal/quicnet"
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

	core connio.Core  // queues, outbox, counters, close requests, the end
	wbuf frame.Buffer // WriteMessage's (the message writer goroutine)

	causeMu sync.Mutex
	cause   error // why the session ended, as webtransport-go reported it

	onClose func(*Conn)
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

func newConn(s session, set *connio.Settings, onClose func(*Conn)) *Conn {
	c := &Conn{sess: s.sess, stream: s.stream, connect: s.connect, qc: s.qc, ownsQC: s.ownsQC, onClose: onClose}
	// A server's connection holds little until it sent its Welcome: then it leaves
	// its listener's pre-handshake budget (none for one of NewListener), and the QUIC
	// windows may grow (a Reject's connection closes).
	c.core.Init(connio.Setup{
		Ctx: s.sess.Context(), Settings: set, Writer: connWriter{c}, Closed: c.closedErr,
		Log:    set.CloseLog("archenet/webtransport: closing session", s.sess.RemoteAddr()),
		Server: s.server, Welcomed: admission.Of(s.qc).Release,
	})
	// Neither a browser nor Dial sends a datagram above MaxDatagramPayload.
	c.core.Go(func() { c.core.ReadDatagrams(s.sess.ReceiveDatagram, MaxDatagramPayload) })
	c.core.Go(func() { c.core.ReadMessages(bufio.NewReaderSize(s.stream, 4<<10), true, c.sessionEnding) })
	c.core.Go(c.refuseStreams)
	c.core.Go(c.refuseUniStreams)
	go c.watch()
	return c
}

// connWriter is the blocking send side the Outbox drains.
type connWriter struct{ c *Conn }

func (w connWriter) WriteDatagram(b []byte) error {
	return quicnet.DatagramError(w.c.sess.SendDatagram(b), len(b)) // waits while the queue of 32 is full
}

func (w connWriter) WriteMessage(b []byte, deadline time.Time) error {
	return w.c.wbuf.Write(w.c.stream, b, deadline)
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
	_, err := c.sess.AcceptStream(context.Background())
	if err == nil {
		c.core.Violation(transport.CodeProtocolError, "unexpected second stream")
		<-c.sess.Context().Done()
		_, err = c.sess.AcceptStream(context.Background())
	}
	c.causeMu.Lock()
	c.cause = err
	c.causeMu.Unlock()
}

// refuseUniStreams closes the session if the peer opens a unidirectional stream.
func (c *Conn) refuseUniStreams() {
	if _, err := c.sess.AcceptUniStream(c.sess.Context()); err == nil {
		c.core.Violation(transport.CodeProtocolError, "unexpected unidirectional stream")
	}
}

// watch carries out the first close request (closeSession) and ends the connection.
func (c *Conn) watch() {
	if r, ok := c.core.AwaitClose(); ok {
		closeSession(c.sess, c.connect, r.Code, r.Reason)
	}
	c.core.Stop()
	err := c.closeError()
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

// closeError maps why the session ended to a CloseError: the close this end asked
// for, if it did first.
func (c *Conn) closeError() *transport.CloseError {
	if local := c.core.Local(); local != nil {
		return local
	}
	c.causeMu.Lock()
	cause := c.cause
	c.causeMu.Unlock()
	if qerr := context.Cause(c.qc.Context()); qerr != nil && cause == nil {
		return closeErrorOf(qerr)
	}
	return closeErrorOf(cause)
}

// closeErrorOf maps the reason webtransport-go or quic-go gives for an ended session.
func closeErrorOf(err error) *transport.CloseError {
	var se *wt.SessionError
	var app *quicgo.ApplicationError
	var h3 *http3.Error
	switch {
	case errors.As(err, &se):
		return &transport.CloseError{Code: connio.CloseCodeOf(uint64(se.ErrorCode)), Reason: se.Message, Remote: se.Remote}
	case errors.As(err, &app) && app.ErrorCode == quicgo.ApplicationErrorCode(http3.ErrCodeNoError):
		return &transport.CloseError{Code: transport.CodeNormal, Reason: app.ErrorMessage, Remote: app.Remote}
	case errors.As(err, &app):
		return &transport.CloseError{Code: transport.CodeProtocolError, Reason: "quic: " + app.Error(), Remote: app.Remote}
	case errors.As(err, &h3):
		return &transport.CloseError{Code: transport.CodeProtocolError, Reason: "http3: " + h3.Error(), Remote: h3.Remote}
	default:
		return quicnet.CloseError(err, "webtransport")
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
	if c.core.Local() == nil && c.sess.Context().Err() == nil {
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
	return c.core.SendDatagram(b)
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
// carries the close out (the peer sees code and reason), and Done is
// closed when it is complete, within about half a second even if the peer does not
// answer. Only the first close counts.
func (c *Conn) StartClose(code transport.CloseCode, reason string) {
	c.core.RequestClose(code, reason)
}

// CloseWithReason implements [transport.Conn]. The reason is truncated to
// transport.MaxReasonLen bytes. It returns once the connection's goroutines have
// exited: after the peer answered the close, or about half a second (the replication
// server calls [Conn.StartClose] instead).
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
