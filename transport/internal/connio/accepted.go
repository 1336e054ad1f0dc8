package connio

import (
	"context"
	"fmt"
	"sync"

	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/internal/queue"
)

// Closing is what a listener needs of its connections.
type Closing interface {
	comparable
	transport.Conn
	transport.CloseStarter
}

// Accepted is a listener's side of its connections: the ones it made and
// that have not ended, and the queue of those Accept has not returned yet.
type Accepted[C Closing] struct {
	pkg     string
	reject  func(c C, code transport.CloseCode, reason string)
	pending *queue.Queue[C]
	closed  chan struct{}

	mu       sync.Mutex
	conns    map[C]struct{}
	isClosed bool
}

// NewAccepted returns a set whose accept queue holds at most backlog
// connections; a connection beyond them is closed with reject (which logs
// it). pkg names the transport in Accept's error.
func NewAccepted[C Closing](backlog int, pkg string, reject func(c C, code transport.CloseCode, reason string)) *Accepted[C] {
	return &Accepted[C]{
		pkg:     pkg,
		reject:  reject,
		pending: queue.New[C](backlog, 0, nil),
		closed:  make(chan struct{}),
		conns:   make(map[C]struct{}),
	}
}

// Add makes a connection with mk, keeps it and queues it for Accept (when
// the backlog is full, it rejects it with transport.CodeRejected), unless
// Close has begun: then mk is not called and Add reports false. mk runs
// under the set's lock, so Close never misses a connection made while it
// runs.
func (a *Accepted[C]) Add(mk func() C) bool {
	a.mu.Lock()
	if a.isClosed {
		a.mu.Unlock()
		return false
	}
	c := mk()
	a.conns[c] = struct{}{}
	a.mu.Unlock()
	if !a.pending.TryPush(c) {
		a.reject(c, transport.CodeRejected, "server busy: accept backlog full")
	}
	return true
}

// Forget drops c (a connection that ended) from the set.
func (a *Accepted[C]) Forget(c C) {
	a.mu.Lock()
	delete(a.conns, c)
	a.mu.Unlock()
}

// Accept waits for a queued connection: a listener's Accept.
func (a *Accepted[C]) Accept(ctx context.Context) (transport.Conn, error) {
	c, ok, err := a.pending.Wait(ctx, a.closed)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%s: listener: %w", a.pkg, transport.ErrClosed)
	}
	return c, nil
}

// PollAccept takes a queued connection, if there is one: a listener's
// PollAccept.
func (a *Accepted[C]) PollAccept() (transport.Conn, bool) {
	c, ok := a.pending.Pop()
	if !ok {
		return nil, false
	}
	return c, true
}

// Closed is closed when Close begins.
func (a *Accepted[C]) Closed() <-chan struct{} { return a.closed }

// Close stops accepting; it reports false if it had already been called.
func (a *Accepted[C]) Close() bool {
	a.mu.Lock()
	if a.isClosed {
		a.mu.Unlock()
		return false
	}
	a.isClosed = true
	a.mu.Unlock()
	close(a.closed)
	return true
}

// CloseAll starts closing every connection the set holds with
// CodeNormal and reason, all at once, waits for them to end, and empties
// the accept queue.
func (a *Accepted[C]) CloseAll(reason string) {
	a.mu.Lock()
	conns := make([]C, 0, len(a.conns))
	for c := range a.conns {
		conns = append(conns, c)
	}
	a.mu.Unlock()
	for _, c := range conns {
		c.StartClose(transport.CodeNormal, reason)
	}
	for _, c := range conns {
		<-c.Done()
	}
	a.pending.Drain()
}
