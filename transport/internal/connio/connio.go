// Package connio is what the transports' connections (transport/quic,
// transport/webtransport natively and in the browser) and their configs share:
// the settings and their defaults, the bounded receive queues the reader
// goroutines fill and the readers themselves, the [transport.Outbox] the sends
// go through, the traffic counters behind Stats, the close this end asks for
// and the error the connection ended with, and a listener's accepted
// connections. Each transport keeps what differs: how bytes reach the wire,
// how a close is carried out and how its cause is mapped.
package connio

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/internal/frame"
	"github.com/archenet/archenet/transport/internal/queue"
	"github.com/archenet/archenet/transport/internal/ratelimit"
)

// PendingDatagrams bounds the datagrams a server's connection queues before it
// sent its transport.Welcome (the server reads none before); later ones are
// dropped.
const PendingDatagrams = 16

// Setup describes a connection to [Core.Init].
type Setup struct {
	// Ctx is the connection's context: it ends when the connection has ended.
	Ctx context.Context
	// Settings bound the queues, the outbox, the messages and the datagram
	// flood.
	Settings *Settings
	// Writer is the blocking send side the outbox drains.
	Writer transport.OutboxWriter
	// Closed returns the connection's close error while it is closing or
	// closed, else nil: what a send reports then.
	Closed func() error
	// Log logs a close this end decides on because of the peer
	// ([Core.Violation]; see Settings.CloseLog). Nil: none is logged.
	Log func(code transport.CloseCode, reason string)
	// Server is set for a server's end: until it sends a transport.Welcome
	// it queues at most PendingDatagrams datagrams and reads no message past
	// the first (Core.ReadMessages), and then it calls Welcomed (nil:
	// nothing).
	Server   bool
	Welcomed func()
}

// CloseRequest is a close a connection's own goroutine is to carry out.
type CloseRequest struct {
	Code   transport.CloseCode
	Reason string // at most transport.MaxReasonLen bytes
}

// Core is the shared part of a connection. Set it up with Init before any
// goroutine uses it; End it exactly once.
type Core struct {
	ctx       context.Context
	set       Settings
	closed    func() error
	log       func(code transport.CloseCode, reason string)
	server    bool
	welcomed  atomic.Bool
	welcome   chan struct{} // a server's: closed once it sent its Welcome
	onWelcome func()

	datagrams *queue.Queue[[]byte]
	messages  *queue.Queue[[]byte]
	out       *transport.Outbox
	closeReq  chan CloseRequest // holds the first close request
	running   sync.WaitGroup    // Go's goroutines
	done      chan struct{}

	mu    sync.Mutex
	local *transport.CloseError // the close this end asked for first, if it did
	err   error

	datagramsSent, datagramBytesSent         atomic.Uint64
	datagramsReceived, datagramBytesReceived atomic.Uint64
	messagesSent, messageBytesSent           atomic.Uint64
	messagesReceived, messageBytesReceived   atomic.Uint64
	datagramsDropped                         atomic.Uint64
}

// Init sets the connection up as s describes it: the receive queues and the
// outbox, which starts its writer goroutines.
func (c *Core) Init(s Setup) {
	c.ctx, c.set, c.closed = s.Ctx, *s.Settings, s.Closed
	c.log, c.server, c.onWelcome = s.Log, s.Server, s.Welcomed
	c.datagrams = queue.New[[]byte](c.set.DatagramQueueLen, 0, nil)
	c.messages = queue.New(c.set.MessageQueueLen, c.set.MessageQueueBytes, func(b []byte) int { return len(b) })
	c.closeReq = make(chan CloseRequest, 1)
	c.done = make(chan struct{})
	c.welcome = make(chan struct{})
	c.out = transport.NewOutbox(s.Writer, transport.OutboxConfig{
		DatagramQueueLen: c.set.DatagramSendQueueLen, MaxBacklog: c.set.MaxSendBacklog, BacklogTimeout: c.set.SendBacklogTimeout,
	}, c.Violation)
}

// Go runs f on a goroutine of the connection's, which [Core.Stop] waits for.
func (c *Core) Go(f func()) {
	c.running.Add(1)
	go func() {
		defer c.running.Done()
		f()
	}()
}

// Stop closes the outbox and waits for the goroutines of Go and the outbox's
// writers to exit: the connection's wire must be closed (or closing) first.
func (c *Core) Stop() {
	c.out.Close()
	c.running.Wait()
	c.out.Wait()
}

// RequestClose asks for the connection to close with code and reason
// (truncated to transport.MaxReasonLen bytes) and returns at once: the first
// request while the connection lives is recorded ([Core.Local]) and handed to
// [Core.AwaitClose]; later ones are dropped.
func (c *Core) RequestClose(code transport.CloseCode, reason string) {
	reason = transport.TruncateReason(reason, transport.MaxReasonLen)
	c.mu.Lock()
	first := c.local == nil && c.ctx.Err() == nil
	if first {
		c.local = &transport.CloseError{Code: code, Reason: reason}
	}
	c.mu.Unlock()
	if first {
		c.closeReq <- CloseRequest{Code: code, Reason: reason} // (room for one)
	}
}

// AwaitClose waits for the connection to end (ok false) or for the first
// close request (ok true), which the caller carries out.
func (c *Core) AwaitClose() (r CloseRequest, ok bool) {
	select {
	case <-c.ctx.Done():
		return r, false
	case r = <-c.closeReq:
		return r, true
	}
}

// Local is the close this end asked for first, or nil.
func (c *Core) Local() *transport.CloseError {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.local
}

// Violation closes the connection because of the peer (a flood, an oversize
// or malformed frame, a send backlog): it logs the close (Setup.Log) and
// requests it.
func (c *Core) Violation(code transport.CloseCode, reason string) {
	if c.log != nil {
		c.log(code, reason)
	}
	c.RequestClose(code, reason)
}

// ReadDatagrams receives datagrams with recv into the datagram queue until
// recv fails. A peer sending faster than Settings.DatagramRateLimit (beyond
// DatagramBurst), or a datagram above maxSize bytes (0: no bound), is a
// violation that ends the reading.
func (c *Core) ReadDatagrams(recv func(context.Context) ([]byte, error), maxSize int) {
	limit := ratelimit.New(c.set.DatagramRateLimit, c.set.DatagramBurst, time.Now())
	for {
		b, err := recv(c.ctx)
		if err != nil {
			return
		}
		if !limit.Allow(time.Now()) {
			c.Violation(transport.CodeFlood, fmt.Sprintf("datagram flood: more than %d datagrams/s (burst %d)", c.set.DatagramRateLimit, c.set.DatagramBurst))
			return
		}
		if maxSize > 0 && len(b) > maxSize {
			c.Violation(transport.CodeProtocolError, fmt.Sprintf("datagram of %d bytes exceeds the maximum of %d", len(b), maxSize))
			return
		}
		if c.server && !c.welcomed.Load() && c.datagrams.Len() >= PendingDatagrams {
			c.datagramsDropped.Add(1) // not read before the Welcome: keep a few
			continue
		}
		c.PushDatagram(b)
	}
}

// ReadMessages reads the message stream br into the message queue until the
// stream or the connection ends. A frame the peer breaks the format with
// (package frame) is a violation. Another error of the stream ends the
// connection with transport.CodeProtocolError unless ended reports that it
// comes from the connection's end (nil: every such error does).
//
// With handshake set, the first message is the handshake: it is bounded by
// transport.MaxHandshakeMessageSize, and the next one is not read before the
// application has taken it and, on a server's connection, has sent its
// Welcome. A peer that has not been welcomed holds at most its Hello of this
// end's memory, plus what the stream's flow-control window lets it send
// (the listener's handshake window), however many messages it sends after
// the Hello, for as long as its Authenticator runs or its Reject lingers.
func (c *Core) ReadMessages(br *bufio.Reader, handshake bool, ended func(error) bool) {
	for first := handshake; ; first = false {
		limit := c.set.MaxMessageSize
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
				c.Violation(fe.Code, reason)
			case ended == nil || ended(err):
			default:
				c.RequestClose(transport.CodeProtocolError, "message stream closed: "+err.Error())
			}
			return
		}
		if !c.messages.PushWait(c.ctx, nil, b) {
			return
		}
		c.messagesReceived.Add(1)
		c.messageBytesReceived.Add(uint64(len(b)))
		if first && !c.messages.WaitEmpty(c.ctx, nil) {
			return
		}
		if first && c.server {
			select {
			case <-c.welcome:
			case <-c.ctx.Done():
				return
			}
		}
	}
}

// DatagramLimit returns a new flood limit for a reader of the connection's
// datagrams ([Core.TakeDatagram]).
func (c *Core) DatagramLimit() ratelimit.TokenBucket {
	return ratelimit.New(c.set.DatagramRateLimit, c.set.DatagramBurst, time.Now())
}

// TakeDatagram is one step of [Core.ReadDatagrams] for a reader that gets
// datagrams mixed with messages (transport/websocket): it checks b against
// the flood limit lim and maxSize and queues it. false: a violation, which
// it requested the close for; stop reading.
func (c *Core) TakeDatagram(lim *ratelimit.TokenBucket, b []byte, maxSize int) bool {
	if !lim.Allow(time.Now()) {
		c.Violation(transport.CodeFlood, fmt.Sprintf("datagram flood: more than %d datagrams/s (burst %d)", c.set.DatagramRateLimit, c.set.DatagramBurst))
		return false
	}
	if maxSize > 0 && len(b) > maxSize {
		c.Violation(transport.CodeProtocolError, fmt.Sprintf("datagram of %d bytes exceeds the maximum of %d", len(b), maxSize))
		return false
	}
	if c.server && !c.welcomed.Load() && c.datagrams.Len() >= PendingDatagrams {
		c.datagramsDropped.Add(1)
		return true
	}
	c.PushDatagram(b)
	return true
}

// MessageLimit is the largest message the reader may take next: the
// handshake's bound for the first.
func (c *Core) MessageLimit(first bool) int {
	if first {
		return min(c.set.MaxMessageSize, transport.MaxHandshakeMessageSize)
	}
	return c.set.MaxMessageSize
}

// TakeMessage is one step of [Core.ReadMessages] for a reader that gets
// messages mixed with datagrams: it queues b (waiting for room) and, for
// the first (the handshake), waits until the application has taken it and,
// on a server, sent its Welcome. false: the connection ended; stop reading.
func (c *Core) TakeMessage(b []byte, first bool) bool {
	if !c.messages.PushWait(c.ctx, nil, b) {
		return false
	}
	c.messagesReceived.Add(1)
	c.messageBytesReceived.Add(uint64(len(b)))
	if first && !c.messages.WaitEmpty(c.ctx, nil) {
		return false
	}
	if first && c.server {
		select {
		case <-c.welcome:
		case <-c.ctx.Done():
			return false
		}
	}
	return true
}

// PushDatagram queues a received datagram, or drops it (counted) when the
// queue is full.
func (c *Core) PushDatagram(b []byte) {
	if c.datagrams.TryPush(b) {
		c.datagramsReceived.Add(1)
		c.datagramBytesReceived.Add(uint64(len(b)))
	} else {
		c.datagramsDropped.Add(1)
	}
}

// SendDatagram hands b to the outbox and counts it.
func (c *Core) SendDatagram(b []byte) error {
	if err := c.out.SendDatagram(b); err != nil {
		return c.sendErr(err)
	}
	c.datagramsSent.Add(1)
	c.datagramBytesSent.Add(uint64(len(b)))
	return nil
}

// SendMessage hands b to the outbox and counts it, unless it exceeds
// Settings.MaxMessageSize or the connection is closing (Setup.Closed). A
// server's first transport.Welcome calls Setup.Welcomed.
func (c *Core) SendMessage(b []byte) error {
	if len(b) > c.set.MaxMessageSize {
		return &transport.MessageTooLargeError{Size: len(b), Max: c.set.MaxMessageSize}
	}
	if err := c.closed(); err != nil {
		return err
	}
	if err := c.out.SendMessage(b); err != nil {
		return c.sendErr(err)
	}
	c.messagesSent.Add(1)
	c.messageBytesSent.Add(uint64(len(b)))
	if c.server && !c.welcomed.Load() && transport.TypeOf(b) == transport.MessageWelcome && c.welcomed.CompareAndSwap(false, true) {
		close(c.welcome)
		if c.onWelcome != nil {
			c.onWelcome()
		}
	}
	return nil
}

// sendErr is the error a send reports for the outbox's err: a close error
// as it is, else the connection's close error over the outbox's own.
func (c *Core) sendErr(err error) error {
	var ce *transport.CloseError
	if errors.As(err, &ce) {
		return err
	}
	if cerr := c.closed(); cerr != nil {
		return cerr
	}
	return err
}

// MaxMessageSize is Settings.MaxMessageSize.
func (c *Core) MaxMessageSize() int { return c.set.MaxMessageSize }

// ReceiveDatagram waits for a datagram, ctx's end or the connection's.
func (c *Core) ReceiveDatagram(ctx context.Context) ([]byte, error) { return c.wait(ctx, c.datagrams) }

// PollDatagram takes a queued datagram, if there is one.
func (c *Core) PollDatagram() ([]byte, bool) { return c.datagrams.Pop() }

// ReceiveMessage waits for a message, ctx's end or the connection's.
func (c *Core) ReceiveMessage(ctx context.Context) ([]byte, error) { return c.wait(ctx, c.messages) }

// PollMessage takes a queued message, if there is one.
func (c *Core) PollMessage() ([]byte, bool) { return c.messages.Pop() }

func (c *Core) wait(ctx context.Context, q *queue.Queue[[]byte]) ([]byte, error) {
	b, ok, err := q.Wait(ctx, c.done)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, c.Err()
	}
	return b, nil
}

// CloseWait requests a close (see RequestClose) and waits for the connection
// to end.
func (c *Core) CloseWait(code transport.CloseCode, reason string) error {
	c.RequestClose(code, reason)
	<-c.done
	return nil
}

// End records why the connection ended and closes Done. Call it once,
// after Stop.
func (c *Core) End(ce *transport.CloseError) {
	c.mu.Lock()
	if ce != nil {
		c.err = ce
	}
	c.mu.Unlock()
	close(c.done)
}

// Done is closed by End.
func (c *Core) Done() <-chan struct{} { return c.done }

// Err is what End recorded (nil before).
func (c *Core) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Stats returns the counters, the outbox's figures and rtt.
func (c *Core) Stats(rtt time.Duration) transport.Stats {
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
		DatagramsSendDropped:  c.out.SendDropped(),
		MessageBacklog:        c.out.Backlog(),
		RTT:                   rtt,
	}
}

// CloseCodeOf is the close code a peer's 62-bit application error code n
// stands for: itself, or transport.CodeProtocolError above 0xffff.
func CloseCodeOf(n uint64) transport.CloseCode {
	if n > 0xffff {
		return transport.CodeProtocolError
	}
	return transport.CloseCode(n)
}
