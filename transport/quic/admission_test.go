package quic_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	quicgo "github.com/quic-go/quic-go"
	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/quic"
)

// rawDialFrom is rawDial from a chosen loopback address, with the stream
// opened and the preamble written.
func rawDialFrom(t *testing.T, e *env, ip net.IP) (*quicgo.Conn, *quicgo.Stream, error) {
	t.Helper()
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: ip})
	require.NoError(t, err)
	tr := &quicgo.Transport{Conn: udp}
	t.Cleanup(func() { tr.Close(); udp.Close() })
	tlsConf := e.cert.ClientTLS()
	tlsConf.NextProtos = []string{quic.ALPN}
	tlsConf.ServerName = "127.0.0.1"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	qc, err := tr.Dial(ctx, e.l.Addr(), tlsConf, &quicgo.Config{EnableDatagrams: true})
	if err != nil {
		return nil, nil, err
	}
	t.Cleanup(func() { qc.CloseWithError(0, "") })
	st, err := qc.OpenStreamSync(ctx)
	require.NoError(t, err)
	_, err = st.Write([]byte{0xA1})
	require.NoError(t, err)
	return qc, st, nil
}

// writeFor writes b to st until the peer's flow control stops it for d,
// and returns how much went out.
func writeFor(st *quicgo.Stream, b []byte, d time.Duration) int {
	_ = st.SetWriteDeadline(time.Now().Add(d))
	n, _ := st.Write(b)
	_ = st.SetWriteDeadline(time.Time{})
	return n
}

// Before the server's Welcome a peer can make it buffer no more than
// HandshakeWindow, however much it sends; after it, the windows grow.
func TestHandshakeWindow(t *testing.T) {
	const window = 32 << 10
	e := newEnv(t, quic.Config{HandshakeWindow: window})
	qc, st, err := rawDialFrom(t, e, net.IPv4(127, 0, 0, 1))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := e.l.Accept(ctx)
	require.NoError(t, err)

	// A Hello of 100 bytes, then a message of almost 1 MiB: nothing reads
	// past the Hello until the application takes it.
	hello := append(binary.AppendUvarint(nil, 100), make([]byte, 100)...)
	junk := append(binary.AppendUvarint(hello, 1<<20-16), make([]byte, 1<<20-16)...)
	sent := writeFor(st, junk, 500*time.Millisecond)
	t.Logf("before the server's first message: %d bytes taken (window %d)", sent, window)
	require.LessOrEqual(t, sent, window+1, "the stream's flow control held it to the handshake window")
	require.Greater(t, sent, len(hello))

	// The server takes the Hello and answers: the handshake is over.
	m, err := s.ReceiveMessage(ctx)
	require.NoError(t, err)
	require.Len(t, m, 100)
	require.NoError(t, s.SendMessage(transport.Welcome{ClientID: 1}.Append(nil)))
	// Its reader now takes what follows, and the windows grow.
	more := writeFor(st, junk[sent:], 5*time.Second)
	t.Logf("after it: %d bytes more", more)
	require.Equal(t, len(junk)-sent, more)
	m, err = s.ReceiveMessage(ctx)
	require.NoError(t, err)
	require.Len(t, m, 1<<20-16)
	_ = qc
}

// A peer that streams small messages after its Hello makes the server buffer
// no more than the handshake window until its Welcome, however long it waits
// (an Authenticator at work, a Reject's linger): once the Hello is taken,
// nothing more is read. After the Welcome every message arrives.
func TestUnwelcomedPeerStreamingMessages(t *testing.T) {
	const window = 32 << 10
	e := newEnv(t, quic.Config{HandshakeWindow: window})
	qc, st, err := rawDialFrom(t, e, net.IPv4(127, 0, 0, 1))
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
	require.LessOrEqual(t, sent, window+1, "the flow control held the stream to the handshake window")
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
	_ = qc
}

// New connections beyond a source's rate are refused at their first packet (two
// seconds' worth may come at once), and beyond the listener's rate from any source
// (a second's worth) but for a source that proved its address and connected to
// none lately; while half of that is spent, new connections are asked for a Retry
// first. Dial says why a refusal may be.
func TestNewConnectionRates(t *testing.T) {
	e := newEnv(t, quic.Config{NewConnectionRatePerAddress: 1, NewConnectionRate: 4, Logger: quietLogger()})
	for range 2 {
		_, _, err := rawDialFrom(t, e, net.IPv4(127, 0, 0, 1))
		require.NoError(t, err)
	}
	_, _, err := rawDialFrom(t, e, net.IPv4(127, 0, 0, 1))
	var te *quicgo.TransportError
	require.ErrorAs(t, err, &te, "a third connection within the second from the same address is refused")
	require.Equal(t, quicgo.ConnectionRefused, te.ErrorCode)
	require.GreaterOrEqual(t, e.l.Admission().RefusedRatePerAddress, uint64(1))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = quic.Dial(ctx, e.l.Addr().String(), &quic.Config{TLS: e.cert.ClientTLS()})
	require.ErrorContains(t, err, "new connections come too fast, from this address or from all, see NewConnectionRatePerAddress and NewConnectionRate")

	// Another address gets in, through a Retry once half the listener's rate is spent,
	// and then the listener's rate is spent for every address.
	for range 2 {
		_, _, err := rawDialFrom(t, e, net.IPv4(127, 0, 0, 2))
		require.NoError(t, err)
	}
	require.GreaterOrEqual(t, e.l.Admission().Retries, uint64(1))
	// A fresh source, its address verified by the Retry, still gets in once; then
	// it is not fresh, and the spent rate refuses it.
	_, _, err = rawDialFrom(t, e, net.IPv4(127, 0, 0, 3))
	require.NoError(t, err, "a fresh verified source")
	_, _, err = rawDialFrom(t, e, net.IPv4(127, 0, 0, 3))
	require.ErrorAs(t, err, &te, "a sixth connection within the second is refused")
	require.Equal(t, quicgo.ConnectionRefused, te.ErrorCode)
	st := e.l.Admission()
	t.Logf("%+v", st)
	require.GreaterOrEqual(t, st.RefusedRate, uint64(1))
}

// One source address may hold MaxPendingPerAddress connections in the
// handshake; more are refused at their first packet, while other sources
// still get in, and a welcomed connection frees its place.
func TestMaxPendingPerAddress(t *testing.T) {
	e := newEnv(t, quic.Config{MaxPendingPerAddress: 3, Logger: quietLogger()})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var first *quic.Conn
	for i := range 3 {
		_, _, err := rawDialFrom(t, e, net.IPv4(127, 0, 0, 1))
		require.NoError(t, err)
		s, err := e.l.Accept(ctx)
		require.NoError(t, err)
		if i == 0 {
			first = s.(*quic.Conn)
		}
	}
	require.Equal(t, 3, e.l.Admission().Pending)
	_, _, err := rawDialFrom(t, e, net.IPv4(127, 0, 0, 1))
	var te *quicgo.TransportError
	require.ErrorAs(t, err, &te, "a fourth connection from the same address is refused")
	require.Equal(t, quicgo.ConnectionRefused, te.ErrorCode)
	// Our Dial says why it may be.
	_, err = quic.Dial(ctx, e.l.Addr().String(), &quic.Config{TLS: e.cert.ClientTLS()})
	require.ErrorContains(t, err, "QUIC handshake refused by the server (too many connections from this address are in the handshake there, see quic.Config.MaxPendingPerAddress")
	require.GreaterOrEqual(t, e.l.Admission().RefusedPerAddress, uint64(1)) // (each Initial packet of the refused dial)

	// Another address is not affected.
	_, _, err = rawDialFrom(t, e, net.IPv4(127, 0, 0, 2))
	require.NoError(t, err)
	_, err = e.l.Accept(ctx)
	require.NoError(t, err)

	// The server's Welcome ends one handshake: its place is free.
	require.NoError(t, first.SendMessage(transport.Welcome{ClientID: 1}.Append(nil)))
	require.Equal(t, 3, e.l.Admission().Pending)
	_, _, err = rawDialFrom(t, e, net.IPv4(127, 0, 0, 1))
	require.NoError(t, err)
	// A connection that ends before its handshake does frees its place too.
	first.Close()
	require.NoError(t, err)
}

// Above RetryAbove pending connections, new ones go through a QUIC Retry
// (address validation) and still connect.
func TestRetryAbove(t *testing.T) {
	e := newEnv(t, quic.Config{RetryAbove: 1, Logger: quietLogger()})
	for range 3 {
		c, s := e.dial(t, quic.Config{})
		require.NoError(t, s.SendMessage(transport.Welcome{ClientID: 1}.Append(nil))) // (ends its handshake)
		_, err := c.ReceiveMessage(context.Background())
		require.NoError(t, err)
	}
	require.Zero(t, e.l.Admission().Retries)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 3 {
		_, _, err := rawDialFrom(t, e, net.IPv4(127, 0, 0, 1))
		require.NoError(t, err)
		_, err = e.l.Accept(ctx)
		require.NoError(t, err)
	}
	require.Equal(t, 3, e.l.Admission().Pending)
	// The first two found at most one pending connection; the third had to
	// prove its address (each Initial packet it sent before the Retry counts).
	require.GreaterOrEqual(t, e.l.Admission().Retries, uint64(1))
}

// A connection queues only a few datagrams before the server's Welcome (it
// reads none before it).
func TestDatagramsBeforeHandshake(t *testing.T) {
	e := newEnv(t, quic.Config{DatagramRateLimit: -1})
	c, s := e.dial(t, quic.Config{})
	for range 40 { // (fewer than the sender's queue holds)
		require.NoError(t, c.SendDatagram([]byte("early")))
	}
	require.Eventually(t, func() bool {
		st := s.Stats()
		return st.DatagramsReceived+st.DatagramsDropped == 40
	}, 10*time.Second, time.Millisecond)
	require.Equal(t, uint64(16), s.Stats().DatagramsReceived)
	require.Len(t, drain(s), 16)
	require.NoError(t, s.SendMessage(transport.Welcome{ClientID: 1}.Append(nil)))
	for range 40 {
		require.NoError(t, c.SendDatagram([]byte("late")))
	}
	require.Eventually(t, func() bool { return s.Stats().DatagramsReceived == 56 }, 10*time.Second, time.Millisecond)
}

func TestHandshakeWindowTooSmall(t *testing.T) {
	cert, err := quic.GenerateDevCert(time.Hour)
	require.NoError(t, err)
	_, err = quic.Listen("127.0.0.1:0", &quic.Config{TLS: cert.ServerTLS(), HandshakeWindow: 1000})
	require.ErrorContains(t, err, "HandshakeWindow 1000 cannot hold a handshake message")
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
