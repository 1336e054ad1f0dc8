package connio

import (
	"context"
	"sync"

	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/internal/queue"
)

// Closing is what a listener needs of its connections to close them.
type Closing interface {
	comparable
	StartClose(code transport.CloseCode, reason string)
	Done() <-chan struct{}
}

// Accepted is a listener's side of its connections: the ones it made and
// that have not ended, and the queue of those Accept has not returned yet.
type Accepted[C Closing] struct {
	pending *queue.Queue[C]
	closed  chan struct{}

	mu       sync.Mutex
	conns    map[C]struct{}
	isClosed bool
}

// NewAccepted returns a set whose accept queue holds at most backlog
// connections.
func NewAccepted[C Closing](backlog int) *Accepted[C] {
	return &Accepted[C]{
		pending: queue.New[C](backlog, 0, nil),
		closed:  make(chan struct{}),
		conns:   make(map[C]struct{}),
	}
}

// Add makes a connection with mk and keeps it, unless Close has begun
// (then mk is not called and ok is false). mk runs under the set's lock,
// so Close never misses a connection made while it runs.
func (a *Accepted[C]) Add(mk func() C) (c C, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.isClosed {
		return c, false
	}
	c = mk()
	a.conns[c] = struct{}{}
	return c, true
}

// Offer queues c for Accept; it reports false when the backlog is full.
func (a *Accepted[C]) Offer(c C) bool { return a.pending.TryPush(c) }

// Forget drops c (a connection that ended) from the set.
func (a *Accepted[C]) Forget(c C) {
	a.mu.Lock()
	delete(a.conns, c)
	a.mu.Unlock()
}

// Accept waits for a queued connection; ok is false once Close has begun.
func (a *Accepted[C]) Accept(ctx context.Context) (c C, ok bool, err error) {
	return a.pending.Wait(ctx, a.closed)
}

// Poll takes a queued connection, if there is one.
func (a *Accepted[C]) Poll() (C, bool) { return a.pending.Pop() }

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
