// Package connio is what the transports' connections (transport/quic,
// transport/webtransport natively and in the browser) share: the bounded
// receive queues their reader goroutines fill, the [transport.Outbox] their
// sends go through, the traffic counters behind Stats, and the error the
// connection ended with. Each transport keeps what differs: how bytes reach
// the wire, how a close is carried out and how its cause is mapped.
package connio

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/internal/queue"
)

// Core is the shared part of a connection. Set it up with Init and
// SetOutbox before any goroutine uses it; End it exactly once.
type Core struct {
	datagrams *queue.Queue[[]byte]
	messages  *queue.Queue[[]byte]
	out       *transport.Outbox
	done      chan struct{}

	errMu sync.Mutex
	err   error

	datagramsSent, datagramBytesSent         atomic.Uint64
	datagramsReceived, datagramBytesReceived atomic.Uint64
	messagesSent, messageBytesSent           atomic.Uint64
	messagesReceived, messageBytesReceived   atomic.Uint64
	datagramsDropped                         atomic.Uint64
}

// Init makes the receive queues: at most datagramQueueLen datagrams, and
// at most messageQueueLen messages of messageQueueBytes bytes in all.
func (c *Core) Init(datagramQueueLen, messageQueueLen, messageQueueBytes int) {
	c.datagrams = queue.New[[]byte](datagramQueueLen, 0, nil)
	c.messages = queue.New(messageQueueLen, messageQueueBytes, func(b []byte) int { return len(b) })
	c.done = make(chan struct{})
}

// SetOutbox sets the outbox the sends go through.
func (c *Core) SetOutbox(out *transport.Outbox) { c.out = out }

// Outbox returns the outbox the sends go through.
func (c *Core) Outbox() *transport.Outbox { return c.out }

// QueuedDatagrams is the number of received datagrams not yet taken.
func (c *Core) QueuedDatagrams() int { return c.datagrams.Len() }

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

// DropDatagram counts a received datagram dropped without queueing it.
func (c *Core) DropDatagram() { c.datagramsDropped.Add(1) }

// PushMessage queues a received message, waiting for room while ctx
// lives; it reports whether the message was queued.
func (c *Core) PushMessage(ctx context.Context, b []byte) bool {
	if !c.messages.PushWait(ctx, nil, b) {
		return false
	}
	c.messagesReceived.Add(1)
	c.messageBytesReceived.Add(uint64(len(b)))
	return true
}

// WaitMessagesTaken waits while ctx lives for the application to take
// every queued message (the reader does not read past the handshake
// before it was answered); it reports whether they were taken.
func (c *Core) WaitMessagesTaken(ctx context.Context) bool { return c.messages.WaitEmpty(ctx, nil) }

// SendDatagram hands b to the outbox and counts it.
func (c *Core) SendDatagram(b []byte) error {
	if err := c.out.SendDatagram(b); err != nil {
		return err
	}
	c.datagramsSent.Add(1)
	c.datagramBytesSent.Add(uint64(len(b)))
	return nil
}

// SendMessage hands b to the outbox and counts it.
func (c *Core) SendMessage(b []byte) error {
	if err := c.out.SendMessage(b); err != nil {
		return err
	}
	c.messagesSent.Add(1)
	c.messageBytesSent.Add(uint64(len(b)))
	return nil
}

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

// End records why the connection ended and closes Done. Call it once,
// after the connection's goroutines have exited.
func (c *Core) End(ce *transport.CloseError) {
	c.errMu.Lock()
	if ce != nil {
		c.err = ce
	}
	c.errMu.Unlock()
	close(c.done)
}

// Done is closed by End.
func (c *Core) Done() <-chan struct{} { return c.done }

// Err is what End recorded (nil before).
func (c *Core) Err() error {
	c.errMu.Lock()
	defer c.errMu.Unlock()
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

// SendErr is the error a send reports: a close error as it is, else the
// connection's close error (closed returns it, or nil while the
// connection lives) over the outbox's own.
func SendErr(err error, closed func() error) error {
	var ce *transport.CloseError
	if errors.As(err, &ce) {
		return err
	}
	if cerr := closed(); cerr != nil {
		return cerr
	}
	return err
}
