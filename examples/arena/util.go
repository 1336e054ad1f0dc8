package main

import (
	"reflect"
	"sync"
	"time"

	"github.com/mlange-42/arche/ecs"

	"github.com/archenet/archenet/transport"
)

// sysFunc adapts a function to archenet's ecs.System.
type sysFunc func(w *ecs.World)

func (f sysFunc) Initialize(*ecs.World) {}
func (f sysFunc) Update(w *ecs.World)   { f(w) }
func (f sysFunc) Finalize(*ecs.World)   {}
func typeOf[T any]() reflect.Type       { return reflect.TypeFor[T]() }

// trackingListener remembers the connections it hands out, so the game can
// read their transport statistics (RTT): replication.Server does not expose
// its connections.
type trackingListener struct {
	transport.Listener
	mu    sync.Mutex
	conns []transport.Conn
}

func (l *trackingListener) PollAccept() (transport.Conn, bool) {
	c, ok := l.Listener.PollAccept()
	if ok {
		l.mu.Lock()
		l.conns = append(l.conns, c)
		l.mu.Unlock()
	}
	return c, ok
}

// meanRTT returns the mean smoothed RTT of the open connections that have
// one, forgetting closed connections.
func (l *trackingListener) meanRTT() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	keep := l.conns[:0]
	var sum time.Duration
	n := 0
	for _, c := range l.conns {
		select {
		case <-c.Done():
			continue
		default:
		}
		keep = append(keep, c)
		if rtt := c.Stats().RTT; rtt > 0 {
			sum += rtt
			n++
		}
	}
	clear(l.conns[len(keep):])
	l.conns = keep
	if n == 0 {
		return 0
	}
	return sum / time.Duration(n)
}
