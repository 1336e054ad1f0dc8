package transport_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/sim"
)

// Connections from two listeners come out of one, and closing it closes both.
func TestMergeListeners(t *testing.T) {
	net := sim.NewNetwork(1, time.Unix(0, 0))
	a, b := net.Listen("a"), net.Listen("b")
	m := transport.MergeListeners(a, b)
	require.Equal(t, a.Addr(), m.Addr())
	_, ok := m.PollAccept()
	require.False(t, ok)
	for _, addr := range []string{"a", "b", "b"} {
		_, err := net.Dial(addr, sim.Link{})
		require.NoError(t, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	seen := map[string]int{}
	for range 3 {
		var c transport.Conn
		for c == nil && ctx.Err() == nil {
			net.Advance(time.Millisecond)
			c, _ = m.PollAccept()
		}
		require.NotNil(t, c)
		seen[c.LocalAddr().String()]++
	}
	require.Equal(t, map[string]int{"a": 1, "b": 2}, seen)
	require.NoError(t, m.Close())
	_, err := m.Accept(ctx)
	require.ErrorIs(t, err, transport.ErrClosed)
	_, err = a.Accept(ctx)
	require.ErrorIs(t, err, transport.ErrClosed)
}

// At most 64 connections wait in the merged listener; the ones beyond are closed
// with CodeRejected, and their peers learn why.
func TestMergeListenersBacklog(t *testing.T) {
	net := sim.NewNetwork(1, time.Unix(0, 0))
	m := transport.MergeListeners(net.Listen("a"))
	defer m.Close()
	var clients []transport.Conn
	for range 70 {
		c, err := net.Dial("a", sim.Link{})
		require.NoError(t, err)
		clients = append(clients, c)
	}
	rejected := func() int {
		n := 0
		for _, c := range clients {
			select {
			case <-c.Done():
				var ce *transport.CloseError
				require.ErrorAs(t, c.Err(), &ce)
				require.Equal(t, transport.CodeRejected, ce.Code)
				require.Equal(t, "server busy: accept backlog full", ce.Reason)
				n++
			default:
			}
		}
		return n
	}
	deadline := time.Now().Add(10 * time.Second)
	for rejected() < 6 {
		require.True(t, time.Now().Before(deadline), "%d rejected", rejected())
		net.Advance(time.Millisecond)
	}
	accepted := 0
	for {
		if _, ok := m.PollAccept(); !ok {
			break
		}
		accepted++
	}
	require.Equal(t, 64, accepted)
	require.Equal(t, 6, rejected())
}
