//go:build !js

package webtransport_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"testing"
	"time"

	wt "github.com/quic-go/webtransport-go"
	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/webtransport"
)

// writeFor writes b to st until the peer's flow control stops it for d, and returns
// how much went out.
func writeFor(st *wt.Stream, b []byte, d time.Duration) int {
	_ = st.SetWriteDeadline(time.Now().Add(d))
	n, _ := st.Write(b)
	_ = st.SetWriteDeadline(time.Time{})
	return n
}

// Before the server's Welcome a session can make it buffer no more than
// HandshakeWindow on its stream, however much it sends; after it, the windows grow.
func TestHandshakeWindow(t *testing.T) {
	const window = 32 << 10
	e := newEnv(t, webtransport.Config{HandshakeWindow: window})
	_, st, err := rawSession(t, e, net.IPv4(127, 0, 0, 1), true)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := e.l.Accept(ctx)
	require.NoError(t, err)

	hello := append(binary.AppendUvarint(nil, 100), make([]byte, 100)...)
	junk := append(binary.AppendUvarint(hello, 1<<20-16), make([]byte, 1<<20-16)...)
	sent := writeFor(st, junk, 500*time.Millisecond)
	t.Logf("before the server's first message: %d bytes taken (window %d)", sent, window)
	require.LessOrEqual(t, sent, window, "the flow control held it to the handshake window")
	require.Greater(t, sent, len(hello))

	m, err := s.ReceiveMessage(ctx)
	require.NoError(t, err)
	require.Len(t, m, 100)
	require.NoError(t, s.SendMessage(transport.Welcome{ClientID: 1}.Append(nil)))
	more := writeFor(st, junk[sent:], 5*time.Second)
	t.Logf("after it: %d bytes more", more)
	require.Equal(t, len(junk)-sent, more)
	m, err = s.ReceiveMessage(ctx)
	require.NoError(t, err)
	require.Len(t, m, 1<<20-16)
}

// A peer that streams small messages after its Hello makes the server buffer
// no more than the handshake window until its Welcome, however long it waits
// (an Authenticator at work, a Reject's linger): once the Hello is taken,
// nothing more is read. After the Welcome every message arrives.
func TestUnwelcomedPeerStreamingMessages(t *testing.T) {
	const window = 32 << 10
	e := newEnv(t, webtransport.Config{HandshakeWindow: window})
	_, st, err := rawSession(t, e, net.IPv4(127, 0, 0, 1), true)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := e.l.Accept(ctx)
	require.NoError(t, err)
	hello := append(binary.AppendUvarint(nil, 100), make([]byte, 100)...)
	_, err = st.Write(hello)
	require.NoError(t, err)
	m, err := s.ReceiveMessage(ctx)
	require.NoError(t, err)
	require.Len(t, m, 100)

	// 100,000 messages of 8 bytes (900 KB framed).
	const n = 100_000
	var stream []byte
	for i := range n {
		stream = append(binary.AppendUvarint(stream, 8), binary.LittleEndian.AppendUint64(nil, uint64(i))...)
	}
	sent := writeFor(st, stream, 500*time.Millisecond)
	t.Logf("before the Welcome: %d bytes of %d taken (window %d); %d messages received", sent, len(stream), window, s.Stats().MessagesReceived)
	require.LessOrEqual(t, sent, window, "the flow control held the stream to the handshake window")
	require.EqualValues(t, 1, s.Stats().MessagesReceived, "nothing read past the Hello")

	require.NoError(t, s.SendMessage(transport.Welcome{ClientID: 1}.Append(nil)))
	got := make(chan error, 1)
	go func() {
		for i := range n {
			m, err := s.ReceiveMessage(ctx)
			if err == nil && binary.LittleEndian.Uint64(m) != uint64(i) {
				err = fmt.Errorf("message %d is %x", i, m)
			}
			if err != nil {
				got <- err
				return
			}
		}
		got <- nil
	}()
	more := writeFor(st, stream[sent:], 10*time.Second)
	require.Equal(t, len(stream)-sent, more)
	require.NoError(t, <-got)
}

// New sessions beyond a source's rate, and beyond the listener's, are refused at
// their first packet, as over QUIC (transport/quic's TestNewConnectionRates).
func TestNewConnectionRates(t *testing.T) {
	e := newEnv(t, webtransport.Config{NewConnectionRatePerAddress: 1, NewConnectionRate: 4, Logger: quietLogger()})
	start := time.Now()
	for range 2 {
		_, _, err := rawSession(t, e, net.IPv4(127, 0, 0, 1), true)
		require.NoError(t, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := webtransport.Dial(ctx, e.url(), &webtransport.Config{CertHashes: e.certs.Hashes()})
	require.ErrorContains(t, err, "new connections come too fast, from this address or from all, see NewConnectionRatePerAddress and NewConnectionRate")
	require.GreaterOrEqual(t, e.l.Admission().RefusedRatePerAddress, uint64(1))
	for range 2 {
		_, _, err := rawSession(t, e, net.IPv4(127, 0, 0, 2), true)
		require.NoError(t, err)
	}
	_, _, err = rawSession(t, e, net.IPv4(127, 0, 0, 3), true)
	require.NoError(t, err, "a fresh source, verified by the Retry")
	// (The listener's bucket refills at 4 a second: on a machine so busy
	// that the sessions above took a quarter of a second, one more is due.)
	took := time.Since(start)
	_, _, err = rawSession(t, e, net.IPv4(127, 0, 0, 3), true)
	if took < 200*time.Millisecond {
		require.Error(t, err, "the listener's rate is spent")
	} else {
		t.Logf("the sessions took %v: the listener's bucket may have refilled, its refusal is not judged", took)
	}
	st := e.l.Admission()
	t.Logf("%+v", st)
	require.GreaterOrEqual(t, st.RefusedRate, uint64(1))
	require.GreaterOrEqual(t, st.Retries, uint64(1))
}

// One source address may hold MaxPendingPerAddress connections before their Welcome;
// more are refused at their first packet (Dial says why it may be), other sources
// still get in, and a welcomed connection frees its place.
func TestMaxPendingPerAddress(t *testing.T) {
	e := newEnv(t, webtransport.Config{MaxPendingPerAddress: 3, Logger: quietLogger()})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var first transport.Conn
	for i := range 3 {
		_, _, err := rawSession(t, e, net.IPv4(127, 0, 0, 1), true)
		require.NoError(t, err)
		s, err := e.l.Accept(ctx)
		require.NoError(t, err)
		if i == 0 {
			first = s
		}
	}
	require.Equal(t, 3, e.l.Admission().Pending)
	_, err := webtransport.Dial(ctx, e.url(), &webtransport.Config{CertHashes: e.certs.Hashes()})
	require.ErrorContains(t, err, "QUIC handshake refused by the server (too many connections from this address are in the handshake there, see webtransport.Config.MaxPendingPerAddress")
	require.GreaterOrEqual(t, e.l.Admission().RefusedPerAddress, uint64(1))

	_, _, err = rawSession(t, e, net.IPv4(127, 0, 0, 2), true)
	require.NoError(t, err, "another address is not affected")
	_, err = e.l.Accept(ctx)
	require.NoError(t, err)

	require.NoError(t, first.SendMessage(transport.Welcome{ClientID: 1}.Append(nil)))
	require.Equal(t, 3, e.l.Admission().Pending)
	_, _, err = rawSession(t, e, net.IPv4(127, 0, 0, 1), true)
	require.NoError(t, err, "the welcomed connection's place is free")
}

// Above RetryAbove pending connections, new ones go through a QUIC Retry and still
// connect.
func TestRetryAbove(t *testing.T) {
	e := newEnv(t, webtransport.Config{RetryAbove: 1, Logger: quietLogger()})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 3 {
		_, _, err := rawSession(t, e, net.IPv4(127, 0, 0, 1), true)
		require.NoError(t, err)
		_, err = e.l.Accept(ctx)
		require.NoError(t, err)
	}
	require.Equal(t, 3, e.l.Admission().Pending)
	require.GreaterOrEqual(t, e.l.Admission().Retries, uint64(1))
	c, _ := e.dial(t, webtransport.Config{})
	require.NoError(t, c.Err(), "Dial passes the Retry")
}

// A connection queues only a few datagrams before the server's Welcome (it reads none
// before it).
func TestDatagramsBeforeWelcome(t *testing.T) {
	e := newEnv(t, webtransport.Config{DatagramRateLimit: -1})
	c, s := e.dial(t, webtransport.Config{})
	// (30: fewer than the 32 that HTTP/3's per-session datagram queue holds.)
	for range 30 {
		require.NoError(t, c.SendDatagram([]byte("early")))
	}
	require.Eventually(t, func() bool {
		st := s.Stats()
		return st.DatagramsReceived+st.DatagramsDropped == 30
	}, 10*time.Second, time.Millisecond)
	require.Equal(t, uint64(16), s.Stats().DatagramsReceived)
	require.NoError(t, s.SendMessage(transport.Welcome{ClientID: 1}.Append(nil)))
	for range 30 {
		require.NoError(t, c.SendDatagram([]byte("late")))
	}
	require.Eventually(t, func() bool { return s.Stats().DatagramsReceived == 46 }, 10*time.Second, time.Millisecond)
}

func TestHandshakeWindowTooSmall(t *testing.T) {
	certs, err := webtransport.NewSelfSigned(webtransport.SelfSignedConfig{})
	require.NoError(t, err)
	_, err = webtransport.Listen("127.0.0.1:0", &webtransport.Config{TLS: certs.TLSConfig(), HandshakeWindow: 1000})
	require.ErrorContains(t, err, "HandshakeWindow 1000 cannot hold a handshake message")
}
