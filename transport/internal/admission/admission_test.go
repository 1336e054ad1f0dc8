package admission

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	quicgo "github.com/quic-go/quic-go"
	"github.com/stretchr/testify/require"
)

func TestSourceOf(t *testing.T) {
	require.Equal(t, netip.MustParseAddr("10.0.0.1"), SourceOf(&net.UDPAddr{IP: net.ParseIP("10.0.0.1"), Port: 4}))
	require.Equal(t, netip.MustParseAddr("10.0.0.1"), SourceOf(&net.UDPAddr{IP: net.ParseIP("::ffff:10.0.0.1")}), "IPv4-mapped")
	require.Equal(t, netip.MustParseAddr("2001:db8:1:2::"), SourceOf(&net.UDPAddr{IP: net.ParseIP("2001:db8:1:2:3:4:5:6")}), "an IPv6 /64")
	require.Equal(t, netip.Addr{}, SourceOf(&net.TCPAddr{}))
}

// The per-source bound refuses the next connection from a full source only, an
// ended connection (its context) leaves the budget once, and Retries start above
// retryAbove pending.
func TestBudget(t *testing.T) {
	b := New(2, 3)
	a := &quicgo.ClientInfo{RemoteAddr: &net.UDPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 1}}
	other := &quicgo.ClientInfo{RemoteAddr: &net.UDPAddr{IP: net.IPv4(10, 0, 0, 2), Port: 1}}
	ctx1, end1 := context.WithCancel(context.Background())
	c1, err := b.ConnContext(ctx1, a)
	require.NoError(t, err)
	_, err = b.ConnContext(context.Background(), a)
	require.NoError(t, err)
	_, err = b.ConnContext(context.Background(), a)
	require.ErrorContains(t, err, "2 connections from 10.0.0.1 are in the handshake")
	require.EqualValues(t, 1, b.Refused())
	require.False(t, b.VerifySource(nil), "3 pending is not above 3")
	c3, err := b.ConnContext(context.Background(), other)
	require.NoError(t, err)
	require.Equal(t, 3, b.Pending())
	_, err = b.ConnContext(context.Background(), other)
	require.NoError(t, err)
	require.True(t, b.VerifySource(nil), "4 pending")
	require.EqualValues(t, 1, b.Retries())

	e1 := c1.Value(entryKey{}).(*Entry)
	end1()
	require.Eventually(t, e1.Released, time.Second, time.Millisecond) // context.AfterFunc runs on its own goroutine
	e1.Release()
	require.Equal(t, 3, b.Pending(), "released once")
	_, err = b.ConnContext(context.Background(), a)
	require.NoError(t, err, "the source has room again")
	e3 := c3.Value(entryKey{}).(*Entry)
	require.False(t, e3.Released())
	e3.Release()
	require.True(t, e3.Released())

	unbounded := New(0, 0)
	for range 100 {
		_, err := unbounded.ConnContext(context.Background(), a)
		require.NoError(t, err)
	}
	require.False(t, unbounded.VerifySource(nil))
}
