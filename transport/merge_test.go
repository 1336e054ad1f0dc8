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
