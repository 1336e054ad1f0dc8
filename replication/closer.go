package replication

import (
	"sync"

	"github.com/archenet/archenet/transport"
)

// closer closes connections off the simulation goroutine. A transport's
// close may wait for its network stack (quic-go's waits for the connection's
// run loop, which a flood of connections keeps busy for up to a second) or
// for a peer; the tick never does: it queues the close and moves on.
// Goroutines started when closes are queued, and gone when none are, run
// them in order, up to closeGoroutines at once. The queue is bounded: should the transport's closes hang
// and maxQueuedCloses pile up, further ones are not run (counted in
// [ServerStats.ClosesDropped]): those connections end by the transport's
// own idle timeout instead.
type closer struct {
	mu      sync.Mutex
	queue   []closeJob
	head    int
	running int       // goroutines draining the queue
	idle    sync.Cond // signalled when running drops to 0
}

type closeJob struct {
	conn   transport.Conn
	code   transport.CloseCode
	reason string
}

const (
	// closeGoroutines bounds the goroutines that run closes at once (a
	// transport whose closes hang holds one each).
	closeGoroutines = 64
	// maxQueuedCloses bounds the closes waiting for one of them.
	maxQueuedCloses = 4096
)

// close queues c's close with code and reason; it never blocks. It reports
// false if the queue was full and the close was dropped.
func (k *closer) close(c transport.Conn, code transport.CloseCode, reason string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.queue)-k.head >= maxQueuedCloses {
		return false
	}
	if k.head > 0 && len(k.queue) == cap(k.queue) {
		n := copy(k.queue, k.queue[k.head:])
		clear(k.queue[n:])
		k.queue, k.head = k.queue[:n], 0
	}
	k.queue = append(k.queue, closeJob{conn: c, code: code, reason: reason})
	if k.running < closeGoroutines {
		k.running++
		go k.run()
	}
	return true
}

func (k *closer) run() {
	for {
		k.mu.Lock()
		if k.head == len(k.queue) {
			k.queue, k.head = k.queue[:0], 0
			k.running--
			if k.running == 0 && k.idle.L != nil {
				k.idle.Broadcast()
			}
			k.mu.Unlock()
			return
		}
		j := k.queue[k.head]
		k.queue[k.head] = closeJob{}
		k.head++
		k.mu.Unlock()
		_ = j.conn.CloseWithReason(j.code, j.reason)
	}
}

// wait blocks until every queued close has run (for Server.Close, which
// may wait: it is not on a tick).
func (k *closer) wait() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.idle.L == nil {
		k.idle.L = &k.mu
	}
	for k.running > 0 {
		k.idle.Wait()
	}
}
