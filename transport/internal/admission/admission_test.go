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
	b := New(Limits{PerAddress: 2, RetryAbove: 3})
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

	unbounded := New(Limits{})
	for range 100 {
		_, err := unbounded.ConnContext(context.Background(), a)
		require.NoError(t, err)
	}
	require.False(t, unbounded.VerifySource(nil))
}

// New connections beyond a source's rate are refused (two seconds' worth may
// come at once; the source's refusals do not spend the global rate), others'
// still pass; beyond the global rate every new one is refused (a second's
// worth at once), and while half of that is spent new ones are asked for a
// Retry. Both refill with time.
func TestBudgetRates(t *testing.T) {
	now := time.Unix(1000, 0)
	b := New(Limits{Rate: 10, RatePerAddress: 2, Now: func() time.Time { return now }})
	from := func(i int) *quicgo.ClientInfo {
		return &quicgo.ClientInfo{RemoteAddr: &net.UDPAddr{IP: net.IPv4(10, 0, 1, byte(i)), Port: 1}}
	}
	for range 4 {
		_, err := b.ConnContext(context.Background(), from(1))
		require.NoError(t, err)
	}
	for range 3 {
		_, err := b.ConnContext(context.Background(), from(1))
		require.ErrorContains(t, err, "connections from 10.0.1.1 come faster than 2 a second (NewConnectionRatePerAddress)")
	}
	require.EqualValues(t, 3, b.Stats().RefusedRatePerAddress)
	require.False(t, b.VerifySource(nil), "4 of the 10 global tokens spent")
	_, err := b.ConnContext(context.Background(), from(2))
	require.NoError(t, err)
	require.True(t, b.VerifySource(nil), "5 left: pressure")
	for i := range 5 {
		_, err := b.ConnContext(context.Background(), from(3+i))
		require.NoError(t, err)
	}
	_, err = b.ConnContext(context.Background(), from(20))
	require.ErrorContains(t, err, "new connections come faster than 10 a second (NewConnectionRate)")
	require.EqualValues(t, 1, b.Stats().RefusedRate)

	now = now.Add(500 * time.Millisecond) // 5 global tokens, 1 for source 1
	_, err = b.ConnContext(context.Background(), from(1))
	require.NoError(t, err)
	_, err = b.ConnContext(context.Background(), from(1))
	require.Error(t, err)
	now = now.Add(time.Second)
	require.False(t, b.VerifySource(nil), "refilled")
	st := b.Stats()
	require.EqualValues(t, 1, st.Retries)
	require.Equal(t, 11, st.Pending)
}

// While the global rate is spent, a source whose address is verified and that
// made no connection lately still gets in (once: then it is not fresh), an
// unverified one does not, and a refusal takes no token from the source.
func TestBudgetRateLetsFreshVerifiedSourcesIn(t *testing.T) {
	now := time.Unix(1000, 0)
	b := New(Limits{Rate: 2, RatePerAddress: 1, Now: func() time.Time { return now }})
	info := func(i int, verified bool) *quicgo.ClientInfo {
		return &quicgo.ClientInfo{RemoteAddr: &net.UDPAddr{IP: net.IPv4(10, 0, 2, byte(i)), Port: 1}, AddrVerified: verified}
	}
	for i := range 2 {
		_, err := b.ConnContext(context.Background(), info(i, false))
		require.NoError(t, err)
	}
	_, err := b.ConnContext(context.Background(), info(9, false))
	require.ErrorContains(t, err, "NewConnectionRate")
	_, err = b.ConnContext(context.Background(), info(9, true))
	require.NoError(t, err, "verified and fresh")
	_, err = b.ConnContext(context.Background(), info(9, true))
	require.ErrorContains(t, err, "NewConnectionRate", "no longer fresh")
	_, err = b.ConnContext(context.Background(), info(0, true))
	require.ErrorContains(t, err, "NewConnectionRate", "source 0 connected a moment ago")
	now = now.Add(2 * time.Second) // both refill
	_, err = b.ConnContext(context.Background(), info(9, false))
	require.NoError(t, err, "the refused attempts took none of source 9's tokens")
}

// The sources' rates are forgotten once refilled, when there are many.
func TestBudgetForgetsIdleSources(t *testing.T) {
	now := time.Unix(1000, 0)
	b := New(Limits{RatePerAddress: 1, Now: func() time.Time { return now }})
	for i := range maxSources + 10 {
		_, err := b.ConnContext(context.Background(), &quicgo.ClientInfo{RemoteAddr: &net.UDPAddr{IP: net.IPv4(10, 1, byte(i>>8), byte(i)), Port: 1}})
		require.NoError(t, err)
	}
	require.Len(t, b.rates, maxSources+10)
	now = now.Add(3 * time.Second)
	_, err := b.ConnContext(context.Background(), &quicgo.ClientInfo{RemoteAddr: &net.UDPAddr{IP: net.IPv4(10, 2, 0, 1), Port: 1}})
	require.NoError(t, err)
	require.Len(t, b.rates, 1, "the refilled ones forgotten")
}
