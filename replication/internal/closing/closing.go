// Package closing closes connections for the replication server and the
// host of matches without ever waiting on them: a transport's close may
// wait for its network stack (quic-go's waits for the connection's run
// loop, which a flood of connections keeps busy for up to a second) or for
// a peer, and the tick never does.
package closing

import (
	"sync"
	"time"

	"github.com/archenet/archenet/transport"
)

// Closer runs closes off the caller's goroutine. A [transport.CloseStarter]
// starts its close at once. Any other connection's close is queued for
// goroutines started when closes are queued, and gone when none are, up to
// Goroutines at once. The queue is bounded: should the transport's closes
// hang and MaxQueued pile up, further ones are not run (Close reports
// false): those connections end by the transport's own idle timeout. The
// zero Closer is ready to use.
type Closer struct {
	mu      sync.Mutex
	queue   []job
	head    int
	running int       // goroutines draining the queue
	idle    sync.Cond // signalled when running drops to 0
}

type job struct {
	conn   transport.Conn
	code   transport.CloseCode
	reason string
}

const (
	// Goroutines bounds the goroutines that run closes at once (a
	// transport whose closes hang holds one each).
	Goroutines = 64
	// MaxQueued bounds the closes waiting for one of them.
	MaxQueued = 4096
)

// Close starts c's close with code and reason; it never blocks. It
// reports false if the queue was full and the close was dropped.
func (k *Closer) Close(c transport.Conn, code transport.CloseCode, reason string) bool {
	if cs, ok := c.(transport.CloseStarter); ok {
		cs.StartClose(code, reason)
		return true
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.queue)-k.head >= MaxQueued {
		return false
	}
	if k.head > 0 && len(k.queue) == cap(k.queue) {
		n := copy(k.queue, k.queue[k.head:])
		clear(k.queue[n:])
		k.queue, k.head = k.queue[:n], 0
	}
	k.queue = append(k.queue, job{conn: c, code: code, reason: reason})
	if k.running < Goroutines {
		k.running++
		go k.run()
	}
	return true
}

func (k *Closer) run() {
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
		k.queue[k.head] = job{}
		k.head++
		k.mu.Unlock()
		_ = j.conn.CloseWithReason(j.code, j.reason)
	}
}

// Wait blocks until every queued close has run (not a CloseStarter's:
// those end on the transport's goroutines). Only for callers that may
// wait, such as a server's Close.
func (k *Closer) Wait() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.idle.L == nil {
		k.idle.L = &k.mu
	}
	for k.running > 0 {
		k.idle.Wait()
	}
}

// Lingering holds refused connections until their close is due, so that
// the Reject sent on each arrives before the close (a QUIC close may
// discard stream data in flight); a client closes first once it has read
// its Reject. At most MaxLingering wait; Add refuses more. Safe for
// concurrent use; the zero value is ready.
type Lingering struct {
	mu    sync.Mutex
	conns []lingering
}

type lingering struct {
	job
	at time.Time
}

// MaxLingering bounds the connections a Lingering holds.
const MaxLingering = 4096

// Add holds c until at. It reports false, holding nothing, when
// MaxLingering connections are held already (close c now instead).
func (l *Lingering) Add(c transport.Conn, at time.Time, code transport.CloseCode, reason string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.conns) >= MaxLingering {
		return false
	}
	l.conns = append(l.conns, lingering{job: job{conn: c, code: code, reason: reason}, at: at})
	return true
}

// Due lets go of the connections whose peer closed, and calls closeFn for
// those whose time has come by now (all of them if now is the zero time).
func (l *Lingering) Due(now time.Time, closeFn func(c transport.Conn, code transport.CloseCode, reason string)) {
	l.mu.Lock()
	var due []job
	keep := l.conns[:0]
	for _, c := range l.conns {
		select {
		case <-c.conn.Done():
			continue
		default:
		}
		if !now.IsZero() && now.Before(c.at) {
			keep = append(keep, c)
			continue
		}
		due = append(due, c.job)
	}
	clear(l.conns[len(keep):])
	l.conns = keep
	l.mu.Unlock()
	for _, j := range due {
		closeFn(j.conn, j.code, j.reason)
	}
}
