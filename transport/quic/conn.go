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
	"github.com/archenet/archenet/transport/internal/frame"
	"github.com/archenet/archenet/transport/internal/queue"
)

// Conn is an archenet connection over QUIC: datagrams are QUIC DATAGRAM frames
// (RFC 9221), messages are length-prefixed frames on one bidirectional stream.
// It implements [transport.Conn].
//
// Each Conn runs three goroutines: one drains quic-go's small datagram queue into a
// bounded queue of our own (enforcing the flood limit), one reads the stream into a
// bounded message queue, and one waits for the connection to end. All three have exited
// when [Conn.Done] is closed.
type Conn struct {
	qc     *quicgo.Conn
	stream *quicgo.Stream
	cfg    Config

	datagrams *queue.Queue[[]byte]
	messages  *queue.Queue[[]byte]

	writeMu sync.Mutex
	wbuf    []byte

	probeMu sync.Mutex
	probe   []byte

	datagramsSent, datagramBytesSent         atomic.Uint64
	datagramsReceived, datagramBytesReceived atomic.Uint64
	messagesSent, messageBytesSent           atomic.Uint64
	messagesReceived, messageBytesReceived   atomic.Uint64
	datagramsDropped                         atomic.Uint64

	readers sync.WaitGroup
	done    chan struct{}
	errMu   sync.Mutex
	err     error
	onClose func(*Conn) // called once the connection has ended, before Done is closed
}

var _ transport.Conn = (*Conn)(nil)

// probeSize exceeds any QUIC datagram payload (quic-go packets are at most 1452 bytes),
// so SendDatagram(probe) never sends and always reports the current maximum.
const probeSize = 4096

func newConn(qc *quicgo.Conn, stream *quicgo.Stream, br *bufio.Reader, cfg Config, onClose func(*Conn)) *Conn {
	c := &Conn{
		qc:        qc,
		stream:    stream,
		cfg:       cfg,
		datagrams: queue.New[[]byte](cfg.DatagramQueueLen, 0, nil),
		messages:  queue.New(cfg.MessageQueueLen, cfg.MessageQueueBytes, func(b []byte) int { return len(b) }),
		probe:     make([]byte, probeSize),
		done:      make(chan struct{}),
		onClose:   onClose,
	}
	if br == nil {
		br = bufio.NewReaderSize(stream, 16<<10)
	}
	c.readers.Add(2)
	go c.readDatagrams()
	go c.readMessages(br)
	go c.watch()
	return c
}

func (c *Conn) readDatagrams() {
	defer c.readers.Done()
	ctx := c.qc.Context()
	limit := newTokenBucket(c.cfg.DatagramRateLimit, c.cfg.DatagramBurst, time.Now())
	for {
		b, err := c.qc.ReceiveDatagram(ctx)
		if err != nil {
			return
		}
		if !limit.allow(time.Now()) {
			c.closeNoWait(transport.CodeFlood, fmt.Sprintf("datagram flood: more than %d datagrams/s (burst %d)", c.cfg.DatagramRateLimit, c.cfg.DatagramBurst))
			return
		}
		if c.datagrams.TryPush(b) {
			c.datagramsReceived.Add(1)
			c.datagramBytesReceived.Add(uint64(len(b)))
		} else {
			c.datagramsDropped.Add(1)
		}
	}
}

func (c *Conn) readMessages(br *bufio.Reader) {
	defer c.readers.Done()
	ctx := c.qc.Context()
	for {
		b, err := frame.Read(br, c.cfg.MaxMessageSize)
		if err != nil {
			var fe *frame.Error
			switch {
			case errors.As(err, &fe):
				c.closeNoWait(fe.Code, fe.Reason)
			case ctx.Err() == nil:
				// The stream ended or was reset while the connection lives on.
				c.closeNoWait(transport.CodeProtocolError, "message stream closed: "+err.Error())
			}
			return
		}
		if !c.messages.PushWait(ctx, nil, b) {
			return
		}
		c.messagesReceived.Add(1)
		c.messageBytesReceived.Add(uint64(len(b)))
	}
}

func (c *Conn) watch() {
	ctx := c.qc.Context()
	<-ctx.Done()
	err := closeErrorOf(context.Cause(ctx))
	c.readers.Wait()
	if c.onClose != nil {
		c.onClose(c)
	}
	c.errMu.Lock()
	c.err = err
	c.errMu.Unlock()
	close(c.done)
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

// SendDatagram implements [transport.Conn]. It blocks while quic-go's send queue
// (32 datagrams) is full.
func (c *Conn) SendDatagram(b []byte) error {
	if err := c.closedErr(); err != nil {
		return err
	}
	if err := c.qc.SendDatagram(b); err != nil {
		var tl *quicgo.DatagramTooLargeError
		if errors.As(err, &tl) {
			return &transport.DatagramTooLargeError{Size: len(b), Max: int(tl.MaxDatagramPayloadSize)}
		}
		if cerr := c.closedErr(); cerr != nil {
			return cerr
		}
		return fmt.Errorf("quic: sending datagram: %w", err)
	}
	c.datagramsSent.Add(1)
	c.datagramBytesSent.Add(uint64(len(b)))
	return nil
}

// ReceiveDatagram implements [transport.Conn].
func (c *Conn) ReceiveDatagram(ctx context.Context) ([]byte, error) {
	return c.wait(ctx, c.datagrams)
}

// PollDatagram implements [transport.Conn].
func (c *Conn) PollDatagram() ([]byte, bool) { return c.datagrams.Pop() }

// MaxDatagramSize implements [transport.Conn]. It asks quic-go for its current estimate,
// which starts at about 1200 bytes and grows with path MTU discovery.
func (c *Conn) MaxDatagramSize() int {
	c.probeMu.Lock()
	defer c.probeMu.Unlock()
	var tl *quicgo.DatagramTooLargeError
	if err := c.qc.SendDatagram(c.probe); errors.As(err, &tl) {
		return int(tl.MaxDatagramPayloadSize)
	}
	return 1200
}

// SendMessage implements [transport.Conn]. It blocks while QUIC flow control holds the
// stream (the peer is not reading).
func (c *Conn) SendMessage(b []byte) error {
	if len(b) > c.cfg.MaxMessageSize {
		return &transport.MessageTooLargeError{Size: len(b), Max: c.cfg.MaxMessageSize}
	}
	if err := c.closedErr(); err != nil {
		return err
	}
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	c.wbuf = frame.Append(c.wbuf[:0], b)
	_, err := c.stream.Write(c.wbuf)
	if cap(c.wbuf) > 64<<10 {
		c.wbuf = nil // don't pin a large buffer
	}
	if err != nil {
		if cerr := c.closedErr(); cerr != nil {
			return cerr
		}
		return fmt.Errorf("quic: sending message: %w", err)
	}
	c.messagesSent.Add(1)
	c.messageBytesSent.Add(uint64(len(b)))
	return nil
}

// ReceiveMessage implements [transport.Conn].
func (c *Conn) ReceiveMessage(ctx context.Context) ([]byte, error) {
	return c.wait(ctx, c.messages)
}

// PollMessage implements [transport.Conn].
func (c *Conn) PollMessage() ([]byte, bool) { return c.messages.Pop() }

// MaxMessageSize implements [transport.Conn].
func (c *Conn) MaxMessageSize() int { return c.cfg.MaxMessageSize }

func (c *Conn) wait(ctx context.Context, q *queue.Queue[[]byte]) ([]byte, error) {
	b, ok, err := q.Wait(ctx, c.done)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, c.Err()
	}
	return b, nil
}

// closeNoWait closes the QUIC connection without waiting for the goroutines (it is
// called from them).
func (c *Conn) closeNoWait(code transport.CloseCode, reason string) {
	c.qc.CloseWithError(quicgo.ApplicationErrorCode(code), transport.TruncateReason(reason, transport.MaxReasonLen))
}

// CloseWithReason implements [transport.Conn]. The reason is truncated to
// transport.MaxReasonLen bytes. It returns once the connection's goroutines have exited.
// Messages not yet transmitted when it is called may be lost (QUIC closes immediately).
func (c *Conn) CloseWithReason(code transport.CloseCode, reason string) error {
	c.closeNoWait(code, reason)
	<-c.done
	return nil
}

// Close implements [transport.Conn].
func (c *Conn) Close() error { return c.CloseWithReason(transport.CodeNormal, "") }

// Done implements [transport.Conn].
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err implements [transport.Conn].
func (c *Conn) Err() error {
	c.errMu.Lock()
	defer c.errMu.Unlock()
	if c.err == nil {
		return nil
	}
	return c.err
}

// RemoteAddr implements [transport.Conn].
func (c *Conn) RemoteAddr() net.Addr { return c.qc.RemoteAddr() }

// LocalAddr implements [transport.Conn].
func (c *Conn) LocalAddr() net.Addr { return c.qc.LocalAddr() }

// Stats implements [transport.Conn]. RTT is quic-go's smoothed RTT.
func (c *Conn) Stats() transport.Stats {
	return transport.Stats{
		DatagramsSent:         c.datagramsSent.Load(),
		DatagramsReceived:     c.datagramsReceived.Load(),
		DatagramBytesSent:     c.datagramBytesSent.Load(),
		DatagramBytesReceived: c.datagramBytesReceived.Load(),
		MessagesSent:          c.messagesSent.Load(),
		MessagesReceived:      c.messagesReceived.Load(),
		MessageBytesSent:      c.messageBytesSent.Load(),
		MessageBytesReceived:  c.messageBytesReceived.Load(),
		DatagramsDropped:      c.datagramsDropped.Load(),
		RTT:                   c.qc.ConnectionStats().SmoothedRTT,
	}
}

// QUICConn returns the underlying quic-go connection, for diagnostics.
func (c *Conn) QUICConn() *quicgo.Conn { return c.qc }
