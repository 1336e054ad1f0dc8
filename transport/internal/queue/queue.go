// Package queue provides the bounded FIFO queues behind the transports' Poll and Receive methods.
package queue

import (
	"context"
	"sync"
)

// Queue is a FIFO queue safe for concurrent use, bounded in entries and optionally in
// bytes (for byte-slice entries, via the size function). Consumers either poll or block
// on a notification channel; producers either drop (TryPush) or wait (PushWait).
type Queue[T any] struct {
	mu       sync.Mutex
	items    []T
	head     int
	maxLen   int
	maxBytes int
	bytes    int
	size     func(T) int

	readable chan struct{} // capacity 1: a token means "maybe non-empty"
	writable chan struct{} // capacity 1: a token means "maybe room"
}

// New returns a queue holding at most maxLen entries (maxLen <= 0: unbounded) and, if size
// is non-nil, at most maxBytes bytes (maxBytes <= 0: unbounded). An entry larger than
// maxBytes is still accepted into an empty queue, so it cannot block forever.
func New[T any](maxLen, maxBytes int, size func(T) int) *Queue[T] {
	return &Queue[T]{
		maxLen:   maxLen,
		maxBytes: maxBytes,
		size:     size,
		readable: make(chan struct{}, 1),
		writable: make(chan struct{}, 1),
	}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (q *Queue[T]) lenLocked() int { return len(q.items) - q.head }

func (q *Queue[T]) fitsLocked(v T) bool {
	n := q.lenLocked()
	if n == 0 {
		return true
	}
	if q.maxLen > 0 && n >= q.maxLen {
		return false
	}
	if q.size != nil && q.maxBytes > 0 && q.bytes+q.size(v) > q.maxBytes {
		return false
	}
	return true
}

func (q *Queue[T]) pushLocked(v T) {
	if q.head > 0 && len(q.items) == cap(q.items) {
		// Compact instead of growing: the backing array stays bounded by the peak length.
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items = q.items[:n]
		q.head = 0
	}
	q.items = append(q.items, v)
	if q.size != nil {
		q.bytes += q.size(v)
	}
	signal(q.readable)
}

// TryPush appends v and reports true, or reports false without blocking if the queue is full.
func (q *Queue[T]) TryPush(v T) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.fitsLocked(v) {
		return false
	}
	q.pushLocked(v)
	return true
}

// PushWait appends v, waiting for room until stop is closed or ctx is done; it reports
// whether v was queued.
func (q *Queue[T]) PushWait(ctx context.Context, stop <-chan struct{}, v T) bool {
	for {
		q.mu.Lock()
		if q.fitsLocked(v) {
			q.pushLocked(v)
			q.mu.Unlock()
			return true
		}
		q.mu.Unlock()
		select {
		case <-q.writable:
		case <-stop:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// Pop removes and returns the oldest entry, or ok=false if the queue is empty.
func (q *Queue[T]) Pop() (v T, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.lenLocked() == 0 {
		return v, false
	}
	v = q.items[q.head]
	var zero T
	q.items[q.head] = zero
	q.head++
	if q.head == len(q.items) {
		q.items = q.items[:0]
		q.head = 0
	}
	if q.size != nil {
		q.bytes -= q.size(v)
	}
	if q.lenLocked() > 0 {
		signal(q.readable) // pass the wake-up on to another waiting consumer
	}
	signal(q.writable)
	return v, true
}

// Wait pops the oldest entry, blocking until one is queued. If stop is closed while the
// queue is empty it returns ok=false and nil; if ctx is done it returns ctx.Err().
func (q *Queue[T]) Wait(ctx context.Context, stop <-chan struct{}) (v T, ok bool, err error) {
	for {
		if v, ok := q.Pop(); ok {
			return v, true, nil
		}
		select {
		case <-q.readable:
		case <-stop:
			v, ok := q.Pop()
			return v, ok, nil
		case <-ctx.Done():
			return v, false, ctx.Err()
		}
	}
}

// WaitEmpty blocks until the queue is empty; it reports false if stop is closed or ctx
// is done first.
func (q *Queue[T]) WaitEmpty(ctx context.Context, stop <-chan struct{}) bool {
	for {
		q.mu.Lock()
		empty := q.lenLocked() == 0
		q.mu.Unlock()
		if empty {
			return true
		}
		select {
		case <-q.writable:
		case <-stop:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// Len returns the number of queued entries.
func (q *Queue[T]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.lenLocked()
}

// Drain removes every entry and returns them in order.
func (q *Queue[T]) Drain() []T {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := append([]T(nil), q.items[q.head:]...)
	clear(q.items)
	q.items = q.items[:0]
	q.head = 0
	q.bytes = 0
	signal(q.writable)
	return out
}
