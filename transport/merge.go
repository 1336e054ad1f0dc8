package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
)

// MergeListeners returns one Listener that accepts the connections of all of ls: a
// server that replicates one match to native players (transport/quic) and browser
// players (transport/webtransport) serves both through it. Accept and PollAccept
// return connections in the order they were accepted from any of ls; at most 64 wait
// at once (more are closed with [CodeRejected], as a full accept backlog closes them).
// Close closes every listener of ls; Addr is the first one's address.
//
// It runs one goroutine per listener, which exits on Close.
func MergeListeners(ls ...Listener) Listener {
	ctx, cancel := context.WithCancel(context.Background())
	m := &merged{ls: ls, ctx: ctx, cancel: cancel, ready: make(chan Conn, 64)}
	for _, l := range ls {
		m.wg.Add(1)
		go m.pull(l)
	}
	return m
}

type merged struct {
	ls     []Listener
	ctx    context.Context
	cancel context.CancelFunc
	ready  chan Conn
	wg     sync.WaitGroup
	once   sync.Once
	err    error
}

func (m *merged) pull(l Listener) {
	defer m.wg.Done()
	for {
		c, err := l.Accept(m.ctx)
		if err != nil {
			return
		}
		select {
		case m.ready <- c:
		default:
			// (Without waiting, if the connection can: the next one is due.)
			if cs, ok := c.(CloseStarter); ok {
				cs.StartClose(CodeRejected, "server busy: accept backlog full")
			} else {
				_ = c.CloseWithReason(CodeRejected, "server busy: accept backlog full")
			}
		}
	}
}

var errMergedClosed = fmt.Errorf("transport: merged listener: %w", ErrClosed)

func (m *merged) Accept(ctx context.Context) (Conn, error) {
	select {
	case c := <-m.ready:
		return c, nil
	default:
	}
	select {
	case c := <-m.ready:
		return c, nil
	case <-m.ctx.Done():
		return nil, errMergedClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (m *merged) PollAccept() (Conn, bool) {
	select {
	case c := <-m.ready:
		return c, true
	default:
		return nil, false
	}
}

func (m *merged) Close() error {
	m.once.Do(func() {
		m.cancel()
		var errs []error
		for _, l := range m.ls {
			errs = append(errs, l.Close())
		}
		m.wg.Wait()
		for {
			select {
			case c := <-m.ready:
				_ = c.CloseWithReason(CodeNormal, "listener closed")
				continue
			default:
			}
			break
		}
		m.err = errors.Join(errs...)
	})
	return m.err
}

func (m *merged) Addr() net.Addr {
	if len(m.ls) == 0 {
		return nil
	}
	return m.ls[0].Addr()
}
