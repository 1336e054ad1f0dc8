package host

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/archenet/archenet/transport"
)

// closer closes the connections the host refuses without waiting on them:
// a transport.CloseStarter starts its close at once; any other connection
// closes on a goroutine of its own, at most maxCloseGoroutines at once
// (past that the close is dropped and counted: the transport's idle
// timeout ends the connection). A refused connection lingers first, so that
// its Reject arrives before the close (bounded: past maxLinger the close is
// at once).
type closer struct {
	running atomic.Int32
	wg      sync.WaitGroup

	mu        sync.Mutex
	lingering []lingerConn
}

type lingerConn struct {
	conn   transport.Conn
	at     time.Time
	code   transport.CloseCode
	reason string
}

const (
	maxCloseGoroutines = 256
	maxLinger          = 4096
)

func (k *closer) close(c transport.Conn, code transport.CloseCode, reason string, st *counters) {
	if cs, ok := c.(transport.CloseStarter); ok {
		cs.StartClose(code, reason)
		return
	}
	if k.running.Add(1) > maxCloseGoroutines {
		k.running.Add(-1)
		st.closesDropped.Add(1)
		return
	}
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		defer k.running.Add(-1)
		_ = c.CloseWithReason(code, reason)
	}()
}

// linger closes c at at (or when lingerDue runs past it), unless the peer
// closes first.
func (k *closer) linger(c transport.Conn, at time.Time, code transport.CloseCode, reason string, st *counters) {
	k.mu.Lock()
	if len(k.lingering) >= maxLinger {
		k.mu.Unlock()
		k.close(c, code, reason, st)
		return
	}
	k.lingering = append(k.lingering, lingerConn{conn: c, at: at, code: code, reason: reason})
	k.mu.Unlock()
}

// lingerDue closes the lingering connections whose time came by now.
func (k *closer) lingerDue(now time.Time, st *counters) {
	k.mu.Lock()
	var due []lingerConn
	keep := k.lingering[:0]
	for _, l := range k.lingering {
		select {
		case <-l.conn.Done():
			continue
		default:
		}
		if now.Before(l.at) {
			keep = append(keep, l)
			continue
		}
		due = append(due, l)
	}
	clear(k.lingering[len(keep):])
	k.lingering = keep
	k.mu.Unlock()
	for _, l := range due {
		k.close(l.conn, l.code, l.reason, st)
	}
}

// wait waits for the closes running on goroutines.
func (k *closer) wait() { k.wg.Wait() }
