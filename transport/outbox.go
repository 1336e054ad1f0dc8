package transport

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// OutboxWriter is the blocking send side of a network connection that an [Outbox]
// drains. Each method is called from one writer goroutine of the Outbox (datagrams and
// messages from two different ones) and may block; both must return once the
// connection is closed.
type OutboxWriter interface {
	// WriteDatagram sends one datagram, waiting while the network's own queue is full.
	// A *[DatagramTooLargeError] drops the datagram (counted); any other error ends
	// the datagram writer.
	WriteDatagram(b []byte) error
	// WriteMessage sends one reliable message, waiting for the peer's flow control at
	// most until deadline. An error that reports Timeout() true means the deadline
	// passed: the Outbox fails the connection with [CodeSendBacklog]. Any other error
	// ends the message writer.
	WriteMessage(b []byte, deadline time.Time) error
}

// OutboxTryWriter is implemented by an [OutboxWriter] that can hand a message to the
// network without waiting. The Outbox then sends on the caller's goroutine when nothing
// is queued ahead, and uses the writer goroutine only once the peer's flow control
// pushes back.
type OutboxTryWriter interface {
	// TryWriteMessage sends b whole if the network takes it at once and reports true, or
	// sends nothing and reports false.
	TryWriteMessage(b []byte) (bool, error)
}

// OutboxConfig bounds an [Outbox]. Every zero value has a documented default.
type OutboxConfig struct {
	// DatagramQueueLen is how many datagrams may wait for the network; when the queue is
	// full, the oldest is dropped to make room. Zero: 64 (two seconds of one datagram
	// per 30 Hz tick).
	DatagramQueueLen int
	// MaxBacklog bounds the bytes of reliable messages waiting for the peer's flow
	// control; a message that would exceed it fails the connection with
	// [CodeSendBacklog] (a single message is always accepted into an empty backlog).
	// Zero: 4 MiB.
	MaxBacklog int
	// BacklogTimeout bounds how long a reliable message may wait for the peer's flow
	// control before the connection fails with [CodeSendBacklog]. Zero: 10 s, longer
	// than an ordinary outage: while the peer's flow-control window has room (QUIC: up
	// to several MiB), messages do not wait at all.
	BacklogTimeout time.Duration
	// Now is the clock of BacklogTimeout. Nil: time.Now.
	Now func() time.Time
}

// Defaults of [OutboxConfig].
const (
	DefaultOutboxDatagrams = 64
	DefaultMaxBacklog      = 4 << 20
	DefaultBacklogTimeout  = 10 * time.Second
)

// resolve returns c with every zero setting replaced by its default, or an
// error for a negative one.
func (c OutboxConfig) resolve() (OutboxConfig, error) {
	if c.DatagramQueueLen < 0 || c.MaxBacklog < 0 || c.BacklogTimeout < 0 {
		return c, fmt.Errorf("transport: OutboxConfig with a negative setting (DatagramQueueLen %d, MaxBacklog %d, BacklogTimeout %v)",
			c.DatagramQueueLen, c.MaxBacklog, c.BacklogTimeout)
	}
	if c.DatagramQueueLen == 0 {
		c.DatagramQueueLen = DefaultOutboxDatagrams
	}
	if c.MaxBacklog == 0 {
		c.MaxBacklog = DefaultMaxBacklog
	}
	if c.BacklogTimeout == 0 {
		c.BacklogTimeout = DefaultBacklogTimeout
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c, nil
}

// errOutboxClosed is what sends return after Close; transports check their own close
// error first, so callers normally see that instead.
var errOutboxClosed = fmt.Errorf("transport: outbox: %w", ErrClosed)

// Outbox is the send side of a connection as a transport implementation builds it:
// bounded queues in front of a network that may block, drained by two writer
// goroutines, so that [Outbox.SendDatagram] and [Outbox.SendMessage] never block their
// caller (a game loop). A peer that cannot keep up loses datagrams, oldest first; a peer
// that does not take reliable messages is failed with [CodeSendBacklog] once the
// backlog passes its bound in bytes or in age. transport/quic sends through one.
//
// All methods are safe for concurrent use.
type Outbox struct {
	w    OutboxWriter
	try  OutboxTryWriter // nil if w has no non-blocking path
	cfg  OutboxConfig
	fail func(code CloseCode, reason string)

	mu       sync.Mutex
	closed   bool
	closeErr *CloseError // why the outbox failed, if it did

	dgs    [][]byte // ring of waiting datagrams
	dgHead int
	dgLen  int
	dgFree [][]byte // reusable datagram buffers

	msgs     []outMessage // FIFO; msgs[msgHead] is being written while inFlight is set
	msgHead  int
	backlog  int
	inFlight bool // the message writer holds msgs[msgHead]

	dgWake, msgWake chan struct{}
	done            chan struct{}
	wg              sync.WaitGroup

	sendDropped atomic.Uint64
}

type outMessage struct {
	b  []byte
	at time.Time
}

// NewOutbox starts an Outbox's writer goroutines over w. fail is called at most once,
// without locks held, when the backlog outgrows its bound; it should close the
// connection with the code and reason it gets (which makes w's blocked calls return).
// A negative setting in cfg is a programming error: NewOutbox panics (the transports
// refuse one in their own configs first).
func NewOutbox(w OutboxWriter, cfg OutboxConfig, fail func(code CloseCode, reason string)) *Outbox {
	cfg, err := cfg.resolve()
	if err != nil {
		panic(err) // (a transport's own config check refuses these first)
	}
	o := &Outbox{
		w: w, cfg: cfg, fail: fail,
		dgs:     make([][]byte, cfg.DatagramQueueLen),
		dgWake:  make(chan struct{}, 1),
		msgWake: make(chan struct{}, 1),
		done:    make(chan struct{}),
	}
	o.try, _ = w.(OutboxTryWriter)
	o.wg.Add(2)
	go o.writeDatagrams()
	go o.writeMessages()
	return o
}

// SendDatagram queues a copy of b for the datagram writer. When DatagramQueueLen
// datagrams are waiting, the oldest is dropped (see [Outbox.SendDropped]). It fails only
// after Close or a backlog failure. Allocation-free once its buffers are warm.
func (o *Outbox) SendDatagram(b []byte) error {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return o.errClosed()
	}
	if err := o.checkAgeLocked(); err != nil {
		return err // unlocked by checkAgeLocked
	}
	if o.dgLen == len(o.dgs) {
		o.dgFree = append(o.dgFree, o.dgs[o.dgHead][:0])
		o.dgs[o.dgHead] = nil
		o.dgHead = (o.dgHead + 1) % len(o.dgs)
		o.dgLen--
		o.sendDropped.Add(1)
	}
	var buf []byte
	if n := len(o.dgFree); n > 0 {
		buf = o.dgFree[n-1]
		o.dgFree[n-1] = nil
		o.dgFree = o.dgFree[:n-1]
	}
	o.dgs[(o.dgHead+o.dgLen)%len(o.dgs)] = append(buf[:0], b...)
	o.dgLen++
	o.mu.Unlock()
	signal(o.dgWake)
	return nil
}

// SendMessage sends b as one reliable message: on the caller's goroutine if nothing is
// waiting and the writer can take it at once (OutboxTryWriter), else by queueing a copy
// for the message writer. If the backlog would pass MaxBacklog, or its oldest message
// has waited longer than BacklogTimeout, the connection fails with [CodeSendBacklog]
// and SendMessage returns that *[CloseError].
func (o *Outbox) SendMessage(b []byte) error {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return o.errClosed()
	}
	if err := o.checkAgeLocked(); err != nil {
		return err
	}
	if o.msgHead == len(o.msgs) && o.try != nil {
		ok, err := o.try.TryWriteMessage(b)
		if ok || err != nil {
			o.mu.Unlock()
			return err
		}
	}
	if o.backlog > 0 && o.backlog+len(b) > o.cfg.MaxBacklog {
		return o.failLocked(fmt.Sprintf("peer not reading: %d bytes of reliable messages waiting, bound %d", o.backlog+len(b), o.cfg.MaxBacklog))
	}
	if o.msgHead > 0 && len(o.msgs) == cap(o.msgs) {
		n := copy(o.msgs, o.msgs[o.msgHead:])
		clear(o.msgs[n:])
		o.msgs = o.msgs[:n]
		o.msgHead = 0
	}
	o.msgs = append(o.msgs, outMessage{b: append([]byte(nil), b...), at: o.cfg.Now()})
	o.backlog += len(b)
	o.mu.Unlock()
	signal(o.msgWake)
	return nil
}

// checkAgeLocked fails the connection if the oldest waiting message is older than
// BacklogTimeout. It returns with o.mu held if nil, released otherwise.
func (o *Outbox) checkAgeLocked() error {
	if o.msgHead == len(o.msgs) {
		return nil
	}
	age := o.cfg.Now().Sub(o.msgs[o.msgHead].at)
	if age <= o.cfg.BacklogTimeout {
		return nil
	}
	return o.failLocked(o.ageReason(age))
}

func (o *Outbox) ageReason(age time.Duration) string {
	return fmt.Sprintf("peer not reading: reliable messages waiting for %v (%d bytes), bound %v",
		age.Round(time.Millisecond), o.backlog, o.cfg.BacklogTimeout)
}

// errClosed is what a send on a closed outbox returns: the failure that closed it, if
// any. Called with o.mu held.
func (o *Outbox) errClosed() error {
	if o.closeErr != nil {
		return o.closeErr
	}
	return errOutboxClosed
}

// failLocked marks the outbox closed, releases o.mu, calls fail once and returns the
// close error.
func (o *Outbox) failLocked(reason string) error {
	if o.closeErr != nil {
		o.mu.Unlock()
		return o.closeErr
	}
	o.closeErr = &CloseError{Code: CodeSendBacklog, Reason: reason}
	err := o.closeErr
	o.closeLocked()
	o.mu.Unlock()
	if o.fail != nil {
		o.fail(CodeSendBacklog, reason)
	}
	return err
}

func (o *Outbox) closeLocked() {
	if !o.closed {
		o.closed = true
		close(o.done)
	}
}

// Close stops the writer goroutines once their current write returns; queued data is
// discarded. It does not wait (see [Outbox.Wait]).
func (o *Outbox) Close() {
	o.mu.Lock()
	o.closeLocked()
	o.mu.Unlock()
}

// Wait blocks until both writer goroutines have exited: after Close, once the writer's
// blocked calls (if any) have returned.
func (o *Outbox) Wait() { o.wg.Wait() }

// SendDropped returns how many datagrams were dropped before reaching the network.
func (o *Outbox) SendDropped() uint64 { return o.sendDropped.Load() }

// Backlog returns the bytes of reliable messages waiting, including the one being
// written.
func (o *Outbox) Backlog() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.backlog
}

func (o *Outbox) popLocked() {
	o.backlog -= len(o.msgs[o.msgHead].b)
	o.msgs[o.msgHead] = outMessage{}
	o.msgHead++
	if o.msgHead == len(o.msgs) {
		o.msgs = o.msgs[:0]
		o.msgHead = 0
	}
}

func (o *Outbox) writeDatagrams() {
	defer o.wg.Done()
	for {
		o.mu.Lock()
		for o.dgLen == 0 && !o.closed {
			o.mu.Unlock()
			select {
			case <-o.dgWake:
			case <-o.done:
			}
			o.mu.Lock()
		}
		if o.closed {
			o.mu.Unlock()
			return
		}
		b := o.dgs[o.dgHead]
		o.dgs[o.dgHead] = nil
		o.dgHead = (o.dgHead + 1) % len(o.dgs)
		o.dgLen--
		o.mu.Unlock()

		err := o.w.WriteDatagram(b)

		o.mu.Lock()
		o.dgFree = append(o.dgFree, b[:0])
		o.mu.Unlock()
		if err != nil {
			var tl *DatagramTooLargeError
			if !errors.As(err, &tl) {
				return
			}
			o.sendDropped.Add(1)
		}
	}
}

func (o *Outbox) writeMessages() {
	defer o.wg.Done()
	for {
		o.mu.Lock()
		for o.msgHead == len(o.msgs) && !o.closed {
			o.mu.Unlock()
			select {
			case <-o.msgWake:
			case <-o.done:
			}
			o.mu.Lock()
		}
		if o.closed {
			o.mu.Unlock()
			return
		}
		m := o.msgs[o.msgHead]
		o.inFlight = true
		o.mu.Unlock()

		err := o.w.WriteMessage(m.b, m.at.Add(o.cfg.BacklogTimeout))

		o.mu.Lock()
		o.inFlight = false
		if err == nil {
			o.popLocked()
			o.mu.Unlock()
			continue
		}
		var te interface{ Timeout() bool }
		if errors.As(err, &te) && te.Timeout() && !o.closed {
			_ = o.failLocked(o.ageReason(o.cfg.Now().Sub(m.at)))
			return
		}
		o.closeLocked()
		o.mu.Unlock()
		return
	}
}

// signal leaves a wake-up token in ch unless one is waiting already.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
