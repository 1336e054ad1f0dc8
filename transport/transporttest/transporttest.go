// Package transporttest is the conformance suite every [transport.Conn] implementation passes.
//
// A transport's test calls [Run] with a function that makes a connected [Pair]:
//
//	func TestConformance(t *testing.T) {
//		transporttest.Run(t, func(t *testing.T) transporttest.Pair { ... })
//	}
//
// The suite only polls (PollDatagram, PollMessage) between calls to [Pair.Step], or
// blocks with a deadline, so it runs unchanged over a simulated clock and over real sockets.
package transporttest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/archenet/archenet/transport"
	"github.com/stretchr/testify/require"
)

// Pair is a connected client and server end and a way to let time pass.
type Pair struct {
	Client, Server transport.Conn
	// Step lets the transport make progress: a simulated network advances its clock, a real
	// one waits a little. It is called from the test goroutine only.
	Step func()
	// MaxSteps bounds how many Steps a test waits for something before it fails.
	// Zero: 10000.
	MaxSteps int
	// CloseFlushes is set if reliable messages sent before Close are guaranteed to reach
	// the peer before it sees the close.
	CloseFlushes bool
}

// MakePair makes a fresh connected pair; it registers its own cleanup with t.
type MakePair func(t *testing.T) Pair

// Run runs every conformance test as a subtest of t.
func Run(t *testing.T, mk MakePair) {
	tests := []struct {
		name string
		fn   func(t *testing.T, p Pair)
	}{
		{"DatagramRoundTrip", testDatagramRoundTrip},
		{"DatagramTooLarge", testDatagramTooLarge},
		{"SendCopiesBuffer", testSendCopiesBuffer},
		{"MessagesInOrder", testMessagesInOrder},
		{"MessageTooLarge", testMessageTooLarge},
		{"PollEmpty", testPollEmpty},
		{"ReceiveHonoursContext", testReceiveHonoursContext},
		{"BlockingReceiveWakes", testBlockingReceiveWakes},
		{"ClientCloses", func(t *testing.T, p Pair) { testClose(t, p, p.Client, p.Server) }},
		{"ServerCloses", func(t *testing.T, p Pair) { testClose(t, p, p.Server, p.Client) }},
		{"MessagesBeforeClose", testMessagesBeforeClose},
		{"Stats", testStats},
		{"Addrs", testAddrs},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := mk(t)
			if p.MaxSteps <= 0 {
				p.MaxSteps = 10000
			}
			Handshake(t, p)
			tc.fn(t, p)
		})
	}
	t.Run("HandshakeMessageBound", func(t *testing.T) {
		p := mk(t)
		if p.MaxSteps <= 0 {
			p.MaxSteps = 10000
		}
		testHandshakeMessageBound(t, p)
	})
}

// Handshake exchanges a first message each way, as the archenet handshake does, the
// server's a [transport.Welcome]: a connection reads nothing after its first message
// until that has been taken (a server's end: and it has sent its Welcome), and bounds it
// by transport.MaxHandshakeMessageSize.
func Handshake(t testing.TB, p Pair) {
	require.NoError(t, p.Client.SendMessage([]byte("hello")))
	require.Equal(t, []byte("hello"), PollMessage(t, p, p.Server))
	welcome := transport.Welcome{ClientID: 1}.Append(nil)
	require.NoError(t, p.Server.SendMessage(welcome))
	require.Equal(t, welcome, PollMessage(t, p, p.Client))
}

func testHandshakeMessageBound(t *testing.T, p Pair) {
	// At the bound: delivered.
	require.NoError(t, p.Server.SendMessage(make([]byte, transport.MaxHandshakeMessageSize)))
	require.Len(t, PollMessage(t, p, p.Client), transport.MaxHandshakeMessageSize)
	// One byte over, as the first message: the receiver closes the connection.
	require.NoError(t, p.Client.SendMessage(make([]byte, transport.MaxHandshakeMessageSize+1)))
	Eventually(t, p, closed(p.Server), "the server to refuse an oversize handshake message")
	var ce *transport.CloseError
	require.ErrorAs(t, p.Server.Err(), &ce)
	require.Equal(t, transport.CodeMessageTooLarge, ce.Code)
	require.False(t, ce.Remote)
	_, ok := p.Server.PollMessage()
	require.False(t, ok, "nothing of the oversize message is delivered")
}

// closed returns a condition that holds once c is closed.
func closed(c transport.Conn) func() bool {
	return func() bool {
		select {
		case <-c.Done():
			return true
		default:
			return false
		}
	}
}

// Eventually calls p.Step until cond holds, failing t after p.MaxSteps steps.
func Eventually(t testing.TB, p Pair, cond func() bool, format string, args ...any) {
	t.Helper()
	for range p.MaxSteps {
		if cond() {
			return
		}
		p.Step()
	}
	if !cond() {
		t.Fatalf("gave up after %d steps waiting for: %s", p.MaxSteps, fmt.Sprintf(format, args...))
	}
}

// PollDatagram steps p until c has a datagram and returns it.
func PollDatagram(t testing.TB, p Pair, c transport.Conn) []byte {
	t.Helper()
	var b []byte
	Eventually(t, p, func() bool {
		var ok bool
		b, ok = c.PollDatagram()
		return ok
	}, "a datagram")
	return b
}

// PollMessage steps p until c has a message and returns it.
func PollMessage(t testing.TB, p Pair, c transport.Conn) []byte {
	t.Helper()
	var b []byte
	Eventually(t, p, func() bool {
		var ok bool
		b, ok = c.PollMessage()
		return ok
	}, "a message")
	return b
}

func payload(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

func testDatagramRoundTrip(t *testing.T, p Pair) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, dir := range []struct {
		name     string
		from, to transport.Conn
	}{{"up", p.Client, p.Server}, {"down", p.Server, p.Client}} {
		max := dir.from.MaxDatagramSize()
		require.GreaterOrEqual(t, max, 1000, dir.name)
		for _, size := range []int{1, 17, 512, max} {
			want := payload(rng, size)
			require.NoError(t, dir.from.SendDatagram(want), "%s size %d", dir.name, size)
			got := PollDatagram(t, p, dir.to)
			require.Equal(t, want, got, "%s size %d", dir.name, size)
		}
	}
}

func testDatagramTooLarge(t *testing.T, p Pair) {
	max := p.Client.MaxDatagramSize()
	err := p.Client.SendDatagram(make([]byte, max+1))
	var tooLarge *transport.DatagramTooLargeError
	require.ErrorAs(t, err, &tooLarge)
	require.Equal(t, max+1, tooLarge.Size)
	require.GreaterOrEqual(t, tooLarge.Max, 1000)
	require.Less(t, tooLarge.Max, max+1)
	// The connection is still usable.
	require.NoError(t, p.Client.SendDatagram([]byte("still alive")))
	require.Equal(t, []byte("still alive"), PollDatagram(t, p, p.Server))
}

func testSendCopiesBuffer(t *testing.T, p Pair) {
	buf := []byte("datagram-1")
	require.NoError(t, p.Client.SendDatagram(buf))
	copy(buf, "XXXXXXXXXX")
	require.Equal(t, []byte("datagram-1"), PollDatagram(t, p, p.Server))

	buf = []byte("message-1")
	require.NoError(t, p.Client.SendMessage(buf))
	copy(buf, "XXXXXXXXX")
	require.Equal(t, []byte("message-1"), PollMessage(t, p, p.Server))
}

func testMessagesInOrder(t *testing.T, p Pair) {
	rng := rand.New(rand.NewPCG(3, 4))
	sizes := []int{0, 1, 127, 128, 16383, 16384, 64 << 10}
	for range 100 {
		sizes = append(sizes, rng.IntN(3000))
	}
	for _, dir := range []struct {
		name     string
		from, to transport.Conn
	}{{"up", p.Client, p.Server}, {"down", p.Server, p.Client}} {
		var want [][]byte
		for i, size := range sizes {
			m := payload(rng, size)
			want = append(want, m)
			require.NoError(t, dir.from.SendMessage(m), "%s message %d", dir.name, i)
		}
		for i := range want {
			got := PollMessage(t, p, dir.to)
			if !bytes.Equal(want[i], got) {
				t.Fatalf("%s message %d: got %d bytes, want %d bytes (out of order or corrupted)", dir.name, i, len(got), len(want[i]))
			}
		}
	}
}

func testMessageTooLarge(t *testing.T, p Pair) {
	max := p.Client.MaxMessageSize()
	require.Greater(t, max, 0)
	err := p.Client.SendMessage(make([]byte, max+1))
	var tooLarge *transport.MessageTooLargeError
	require.ErrorAs(t, err, &tooLarge)
	require.Equal(t, max, tooLarge.Max)
	require.NoError(t, p.Client.SendMessage(make([]byte, max)))
	require.Len(t, PollMessage(t, p, p.Server), max)
	select {
	case <-p.Client.Done():
		t.Fatalf("connection closed after an oversize SendMessage: %v", p.Client.Err())
	default:
	}
}

func testPollEmpty(t *testing.T, p Pair) {
	for _, c := range []transport.Conn{p.Client, p.Server} {
		_, ok := c.PollDatagram()
		require.False(t, ok)
		_, ok = c.PollMessage()
		require.False(t, ok)
		require.NoError(t, c.Err())
	}
}

func testReceiveHonoursContext(t *testing.T, p Pair) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := p.Server.ReceiveDatagram(ctx)
	require.ErrorIs(t, err, context.Canceled)
	_, err = p.Server.ReceiveMessage(ctx)
	require.ErrorIs(t, err, context.Canceled)
}

func testBlockingReceiveWakes(t *testing.T, p Pair) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type result struct {
		b   []byte
		err error
	}
	msgs := make(chan result, 1)
	dgrams := make(chan result, 1)
	go func() {
		b, err := p.Server.ReceiveMessage(ctx)
		msgs <- result{b, err}
	}()
	go func() {
		b, err := p.Server.ReceiveDatagram(ctx)
		dgrams <- result{b, err}
	}()
	require.NoError(t, p.Client.SendMessage([]byte("wake")))
	require.NoError(t, p.Client.SendDatagram([]byte("wake")))
	var gotMsg, gotDgram *result
	// The receivers are real goroutines: give them a moment of wall-clock time per step.
	Eventually(t, p, func() bool {
		select {
		case r := <-msgs:
			gotMsg = &r
		case r := <-dgrams:
			gotDgram = &r
		case <-time.After(time.Millisecond):
		}
		return gotMsg != nil && gotDgram != nil
	}, "blocked receivers to wake")
	require.NoError(t, gotMsg.err)
	require.Equal(t, []byte("wake"), gotMsg.b)
	require.NoError(t, gotDgram.err)
	require.Equal(t, []byte("wake"), gotDgram.b)
}

func testClose(t *testing.T, p Pair, closer, peer transport.Conn) {
	code := transport.CodeApplication + 7
	require.NoError(t, closer.CloseWithReason(code, "game over"))
	select {
	case <-closer.Done():
	default:
		t.Fatal("Done not closed after CloseWithReason returned")
	}
	var local *transport.CloseError
	require.ErrorAs(t, closer.Err(), &local)
	require.Equal(t, transport.CloseError{Code: code, Reason: "game over", Remote: false}, *local)
	require.ErrorIs(t, closer.Err(), transport.ErrClosed)
	require.NotErrorIs(t, closer.Err(), transport.ErrTimeout)

	Eventually(t, p, closed(peer), "the peer to see the close")
	var remote *transport.CloseError
	require.ErrorAs(t, peer.Err(), &remote)
	require.Equal(t, transport.CloseError{Code: code, Reason: "game over", Remote: true}, *remote)

	for _, c := range []transport.Conn{closer, peer} {
		require.ErrorIs(t, c.SendDatagram([]byte("x")), transport.ErrClosed)
		require.ErrorIs(t, c.SendMessage([]byte("x")), transport.ErrClosed)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := c.ReceiveMessage(ctx)
		require.ErrorIs(t, err, transport.ErrClosed)
		_, err = c.ReceiveDatagram(ctx)
		require.ErrorIs(t, err, transport.ErrClosed)
		cancel()
	}
	require.NoError(t, closer.Close(), "closing twice is a no-op")
}

func testMessagesBeforeClose(t *testing.T, p Pair) {
	if !p.CloseFlushes {
		t.Skip("transport does not flush reliable messages on close")
	}
	for i := range 10 {
		require.NoError(t, p.Client.SendMessage([]byte{byte(i)}))
	}
	require.NoError(t, p.Client.Close())
	Eventually(t, p, closed(p.Server), "the server to see the close")
	for i := range 10 {
		b, ok := p.Server.PollMessage()
		require.True(t, ok, "message %d still readable after close", i)
		require.Equal(t, []byte{byte(i)}, b)
	}
	_, ok := p.Server.PollMessage()
	require.False(t, ok)
	var ce *transport.CloseError
	require.ErrorAs(t, p.Server.Err(), &ce)
	require.Equal(t, transport.CodeNormal, ce.Code)
}

func testStats(t *testing.T, p Pair) {
	c0, s0 := p.Client.Stats(), p.Server.Stats()
	for i := range 5 {
		require.NoError(t, p.Client.SendDatagram(make([]byte, 10+i)))
		require.NoError(t, p.Client.SendMessage(make([]byte, 100+i)))
	}
	for range 5 {
		PollMessage(t, p, p.Server)
	}
	// Datagrams may be lost on a real network; wait for what arrives, at most 5.
	got := 0
	Eventually(t, p, func() bool {
		for {
			if _, ok := p.Server.PollDatagram(); !ok {
				break
			}
			got++
		}
		return got == 5
	}, "5 datagrams")
	cs, ss := p.Client.Stats(), p.Server.Stats()
	require.Equal(t, uint64(5), cs.DatagramsSent-c0.DatagramsSent)
	require.Equal(t, uint64(10+11+12+13+14), cs.DatagramBytesSent-c0.DatagramBytesSent)
	require.Equal(t, uint64(5), cs.MessagesSent-c0.MessagesSent)
	require.Equal(t, uint64(100+101+102+103+104), cs.MessageBytesSent-c0.MessageBytesSent)
	require.Equal(t, uint64(5), ss.DatagramsReceived-s0.DatagramsReceived)
	require.Equal(t, cs.DatagramBytesSent-c0.DatagramBytesSent, ss.DatagramBytesReceived-s0.DatagramBytesReceived)
	require.Equal(t, uint64(5), ss.MessagesReceived-s0.MessagesReceived)
	require.Equal(t, cs.MessageBytesSent-c0.MessageBytesSent, ss.MessageBytesReceived-s0.MessageBytesReceived)
	require.Zero(t, ss.DatagramsDropped)
	require.Zero(t, ss.DatagramsSent)
	require.Zero(t, cs.DatagramsSendDropped)
	require.Zero(t, cs.MessageBacklog)
	require.GreaterOrEqual(t, cs.RTT, time.Duration(0))
}

func testAddrs(t *testing.T, p Pair) {
	require.NotNil(t, p.Client.LocalAddr())
	require.NotNil(t, p.Client.RemoteAddr())
	require.Equal(t, p.Client.LocalAddr().String(), p.Server.RemoteAddr().String())
	require.Equal(t, p.Server.LocalAddr().String(), p.Client.RemoteAddr().String())
	if errors.Is(p.Client.Err(), transport.ErrClosed) {
		t.Fatal("fresh connection reports closed")
	}
}
