package closing

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/transport"
)

// hangingConn's close waits until release is closed.
type hangingConn struct {
	transport.Conn
	release <-chan struct{}
	closes  *atomic.Int32
	done    chan struct{}
}

func (c *hangingConn) CloseWithReason(transport.CloseCode, string) error {
	<-c.release
	c.closes.Add(1)
	return nil
}

func (c *hangingConn) Done() <-chan struct{} { return c.done }

type starter struct {
	hangingConn
	started int
}

func (s *starter) StartClose(transport.CloseCode, string) { s.started++ }

func TestCloserNeverWaits(t *testing.T) {
	var k Closer
	release := make(chan struct{})
	var closes atomic.Int32
	n := Goroutines + MaxQueued
	queued := func() int {
		k.mu.Lock()
		defer k.mu.Unlock()
		return len(k.queue) - k.head
	}
	for i := 0; i < n; i++ {
		// Returns at once although every close hangs.
		require.True(t, k.Close(&hangingConn{release: release, closes: &closes}, transport.CodeNormal, ""), i)
		if i == Goroutines-1 {
			// (until its goroutines took their closes, they count as queued)
			require.Eventually(t, func() bool { return queued() == 0 }, 10*time.Second, time.Millisecond)
		}
	}
	// Goroutines closes run (hanging); MaxQueued wait; the next is dropped.
	require.Equal(t, MaxQueued, queued())
	require.False(t, k.Close(&hangingConn{release: release, closes: &closes}, transport.CodeNormal, ""))
	k.mu.Lock()
	require.Equal(t, Goroutines, k.running)
	k.mu.Unlock()

	s := &starter{}
	require.True(t, k.Close(s, transport.CodeNormal, ""))
	require.Equal(t, 1, s.started, "a CloseStarter starts its own close")

	close(release)
	k.Wait()
	require.EqualValues(t, n, closes.Load())
}

func TestLingering(t *testing.T) {
	var l Lingering
	t0 := time.Unix(1000, 0)
	var closed []transport.Conn
	record := func(c transport.Conn, _ transport.CloseCode, _ string) { closed = append(closed, c) }
	early := &hangingConn{done: make(chan struct{})}
	late := &hangingConn{done: make(chan struct{})}
	gone := &hangingConn{done: make(chan struct{})}
	require.True(t, l.Add(early, t0.Add(time.Second), transport.CodeRejected, "a"))
	require.True(t, l.Add(late, t0.Add(3*time.Second), transport.CodeRejected, "b"))
	require.True(t, l.Add(gone, t0.Add(time.Second), transport.CodeRejected, "c"))
	close(gone.done) // the peer closed first: nothing to do

	l.Due(t0, record)
	require.Empty(t, closed)
	l.Due(t0.Add(time.Second), record)
	require.Equal(t, []transport.Conn{early}, closed)
	l.Due(time.Time{}, record) // all that are left
	require.Equal(t, []transport.Conn{early, late}, closed)
	require.Empty(t, l.conns)

	for i := 0; i < MaxLingering; i++ {
		require.True(t, l.Add(late, t0, transport.CodeRejected, ""))
	}
	require.False(t, l.Add(late, t0, transport.CodeRejected, ""), "full: the caller closes at once")
}
