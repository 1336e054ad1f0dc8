package connio

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/transport"
)

// fakeConn is a connection that ends when it is told to close.
type fakeConn struct {
	transport.Conn // (the methods Accepted does not use)
	done           chan struct{}
	code           transport.CloseCode
}

func newFakeConn() *fakeConn { return &fakeConn{done: make(chan struct{})} }

func (c *fakeConn) StartClose(code transport.CloseCode, _ string) {
	c.code = code
	close(c.done)
}

func (c *fakeConn) Done() <-chan struct{} { return c.done }

// A connection past the backlog is rejected; Close refuses new ones, makes
// Accept fail with an error naming the transport, and CloseAll closes those
// left.
func TestAccepted(t *testing.T) {
	var rejected []*fakeConn
	a := NewAccepted(1, "quic", func(c *fakeConn, code transport.CloseCode, reason string) {
		require.Equal(t, transport.CodeRejected, code)
		require.Equal(t, "server busy: accept backlog full", reason)
		rejected = append(rejected, c)
		c.StartClose(code, reason)
	})
	c1, c2 := newFakeConn(), newFakeConn()
	require.True(t, a.Add(func() *fakeConn { return c1 }))
	require.True(t, a.Add(func() *fakeConn { return c2 }))
	require.Equal(t, []*fakeConn{c2}, rejected)
	a.Forget(c2)

	got, err := a.Accept(context.Background())
	require.NoError(t, err)
	require.Same(t, c1, got)
	got, ok := a.PollAccept()
	require.False(t, ok)
	require.True(t, got == nil, "an untyped nil, not a nil *fakeConn")

	require.True(t, a.Close())
	require.False(t, a.Close())
	<-a.Closed()
	require.False(t, a.Add(func() *fakeConn { panic("made after Close") }))
	_, err = a.Accept(context.Background())
	require.ErrorIs(t, err, transport.ErrClosed)
	require.ErrorContains(t, err, "quic: listener: ")
	a.CloseAll("listener closed")
	require.Equal(t, transport.CodeNormal, c1.code)
}
