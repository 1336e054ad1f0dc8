package sim

import (
	"context"
	"fmt"
	"net"

	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/internal/queue"
)

// Conn is one end of a simulated connection. It implements [transport.Conn].
type Conn struct {
	n             *Network
	lk            *pair
	local, remote Addr
	out, in       *direction
	maxMessage    int
	datagrams     *queue.Queue[[]byte]
	messages      *queue.Queue[[]byte]
	done          chan struct{}

	// guarded by n.mu
	gotFirst bool // the first (handshake) message has arrived
	listened bool // accepted by a listener: the server's end
	welcomed bool // the server's end sent a transport.Welcome (its in.unread arrives)
	closed   bool
	err      error
	stats    transport.Stats
}

var _ transport.Conn = (*Conn)(nil)

func newConn(n *Network, lk *pair, local, remote Addr, link Link) *Conn {
	qlen := link.DatagramQueueLen
	if qlen <= 0 {
		qlen = defaultDatagramQueue
	}
	maxMsg := link.MaxMessageSize
	if maxMsg <= 0 {
		maxMsg = defaultMaxMessageSize
	}
	return &Conn{
		n:          n,
		lk:         lk,
		local:      local,
		remote:     remote,
		maxMessage: maxMsg,
		datagrams:  queue.New[[]byte](qlen, 0, nil),
		messages:   queue.New[[]byte](0, 0, nil), // reliable: never dropped
		done:       make(chan struct{}),
	}
}

// SendDatagram implements [transport.Conn]. The datagram leaves at the current
// simulated time.
func (c *Conn) SendDatagram(b []byte) error {
	c.n.mu.Lock()
	defer c.n.mu.Unlock()
	if c.closed {
		return c.err
	}
	if mtu := c.out.cond.mtu(); len(b) > mtu {
		return &transport.DatagramTooLargeError{Size: len(b), Max: mtu}
	}
	c.stats.DatagramsSent++
	c.stats.DatagramBytesSent += uint64(len(b))
	c.n.sendDatagram(c.out, append([]byte(nil), b...))
	return nil
}

// ReceiveDatagram implements [transport.Conn].
func (c *Conn) ReceiveDatagram(ctx context.Context) ([]byte, error) {
	return c.wait(ctx, c.datagrams)
}

// PollDatagram implements [transport.Conn].
func (c *Conn) PollDatagram() ([]byte, bool) { return c.datagrams.Pop() }

// MaxDatagramSize implements [transport.Conn]: the MTU of the sending direction.
func (c *Conn) MaxDatagramSize() int {
	c.n.mu.Lock()
	defer c.n.mu.Unlock()
	return c.out.cond.mtu()
}

// SendMessage implements [transport.Conn].
func (c *Conn) SendMessage(b []byte) error {
	if len(b) > c.maxMessage {
		return &transport.MessageTooLargeError{Size: len(b), Max: c.maxMessage}
	}
	c.n.mu.Lock()
	defer c.n.mu.Unlock()
	if c.closed {
		return c.err
	}
	c.stats.MessagesSent++
	c.stats.MessageBytesSent += uint64(len(b))
	c.n.sendReliable(c.out, &event{kind: evMessage, data: append([]byte(nil), b...)})
	if c.listened && !c.welcomed && transport.TypeOf(b) == transport.MessageWelcome {
		c.welcomed = true
		for _, m := range c.in.unread {
			c.deliver(m)
			c.n.emit(TraceDeliver, c.in, true, m)
		}
		c.in.unread = nil
	}
	return nil
}

// deliver queues the message m, arrived, for the reader. The caller holds
// n.mu.
func (c *Conn) deliver(m []byte) {
	c.stats.MessagesReceived++
	c.stats.MessageBytesReceived += uint64(len(m))
	c.messages.TryPush(m)
}

// ReceiveMessage implements [transport.Conn].
func (c *Conn) ReceiveMessage(ctx context.Context) ([]byte, error) {
	return c.wait(ctx, c.messages)
}

// PollMessage implements [transport.Conn].
func (c *Conn) PollMessage() ([]byte, bool) { return c.messages.Pop() }

// MaxMessageSize implements [transport.Conn].
func (c *Conn) MaxMessageSize() int { return c.maxMessage }

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

// CloseWithReason implements [transport.Conn]. This end closes at once; the peer closes
// after the one-way latency, once every reliable message sent before has reached it.
func (c *Conn) CloseWithReason(code transport.CloseCode, reason string) error {
	c.n.mu.Lock()
	defer c.n.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closeLocked(&transport.CloseError{Code: code, Reason: reason})
	c.n.sendReliable(c.out, &event{kind: evClose, code: code, reason: reason})
	return nil
}

// StartClose implements [transport.CloseStarter]: CloseWithReason never waits.
func (c *Conn) StartClose(code transport.CloseCode, reason string) {
	_ = c.CloseWithReason(code, reason)
}

// Close implements [transport.Conn].
func (c *Conn) Close() error { return c.CloseWithReason(transport.CodeNormal, "") }

func (c *Conn) closeLocked(err *transport.CloseError) {
	if c.closed {
		return
	}
	c.closed = true
	c.err = err
	close(c.done)
}

// Done implements [transport.Conn].
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err implements [transport.Conn].
func (c *Conn) Err() error {
	c.n.mu.Lock()
	defer c.n.mu.Unlock()
	return c.err
}

// RemoteAddr implements [transport.Conn].
func (c *Conn) RemoteAddr() net.Addr { return c.remote }

// LocalAddr implements [transport.Conn].
func (c *Conn) LocalAddr() net.Addr { return c.local }

// Stats implements [transport.Conn]. RTT is the configured base RTT
// (latency of both directions, without jitter).
func (c *Conn) Stats() transport.Stats {
	c.n.mu.Lock()
	defer c.n.mu.Unlock()
	s := c.stats
	s.RTT = c.out.cond.Latency + c.in.cond.Latency
	return s
}

// LinkStats returns the counters of the direction this end sends on.
func (c *Conn) LinkStats() LinkStats {
	c.n.mu.Lock()
	defer c.n.mu.Unlock()
	return c.out.stats
}

// Conditions returns the conditions of the direction this end sends on and of the one it
// receives on.
func (c *Conn) Conditions() (send, receive Conditions) {
	c.n.mu.Lock()
	defer c.n.mu.Unlock()
	return c.out.cond, c.in.cond
}

// SetConditions changes both directions of the link from this end's point of view,
// effective for packets sent from now on (packets in flight keep their schedule).
// Invalid settings are an error ([ErrInvalidConditions]) and change nothing.
func (c *Conn) SetConditions(send, receive Conditions) error {
	if err := send.check(); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	if err := receive.check(); err != nil {
		return fmt.Errorf("receive: %w", err)
	}
	c.n.mu.Lock()
	defer c.n.mu.Unlock()
	c.out.cond, c.in.cond = send, receive
	return nil
}

// SetLinkDown takes the link down or brings it back up, in both directions.
//
// While the link is down, datagrams are dropped (also those in flight when they would
// arrive) and reliable messages and closes are held; when it comes back up, held ones
// are delivered in order after the one-way latency. If the link stays down for the
// link's IdleTimeout, both ends close with transport.CodeTimeout (errors.Is(err,
// transport.ErrTimeout)), as QUIC's idle timeout would.
func (c *Conn) SetLinkDown(down bool) {
	n := c.n
	n.mu.Lock()
	defer n.mu.Unlock()
	lk := c.lk
	if lk.isDown == down {
		return
	}
	lk.isDown = down
	lk.downGen++
	if down {
		if lk.idleTimeout > 0 {
			n.schedule(&event{at: n.now.Add(lk.idleTimeout), kind: evIdle, lk: lk, gen: lk.downGen})
		}
		return
	}
	for _, d := range []*direction{&lk.up, &lk.down} {
		held := d.held
		d.held = nil
		for _, ev := range held {
			n.scheduleReliable(d, ev, n.now.Add(d.cond.Latency))
		}
	}
}

// LinkDown reports whether the link is down.
func (c *Conn) LinkDown() bool {
	c.n.mu.Lock()
	defer c.n.mu.Unlock()
	return c.lk.isDown
}

// Listener accepts simulated connections. It implements [transport.Listener].
type Listener struct {
	n       *Network
	addr    Addr
	pending *queue.Queue[*Conn]
	closed  chan struct{}
	conns   []*Conn // guarded by n.mu
}

var _ transport.Listener = (*Listener)(nil)

// Accept implements [transport.Listener].
func (l *Listener) Accept(ctx context.Context) (transport.Conn, error) {
	c, ok, err := l.pending.Wait(ctx, l.closed)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, transport.ErrClosed
	}
	return c, nil
}

// PollAccept implements [transport.Listener].
func (l *Listener) PollAccept() (transport.Conn, bool) {
	c, ok := l.pending.Pop()
	if !ok {
		return nil, false
	}
	return c, true
}

// Close implements [transport.Listener]: it frees the address and closes every
// connection accepted through it.
func (l *Listener) Close() error {
	l.n.mu.Lock()
	select {
	case <-l.closed:
		l.n.mu.Unlock()
		return nil
	default:
	}
	close(l.closed)
	delete(l.n.listeners, l.addr)
	conns := l.conns
	l.conns = nil
	l.n.mu.Unlock()
	l.pending.Drain()
	for _, c := range conns {
		c.CloseWithReason(transport.CodeNormal, "listener closed")
	}
	return nil
}

// Addr implements [transport.Listener].
func (l *Listener) Addr() net.Addr { return l.addr }
