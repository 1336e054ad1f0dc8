package transport_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/archenet/archenet/transport"
	"github.com/stretchr/testify/require"
)

// stuckWriter is a network that takes nothing: every write blocks until release is
// closed (the connection closing). entered receives a token each time a write starts.
type stuckWriter struct {
	release chan struct{}
	entered chan string
}

func newStuckWriter() *stuckWriter {
	return &stuckWriter{release: make(chan struct{}), entered: make(chan string, 16)}
}

func (w *stuckWriter) WriteDatagram([]byte) error {
	w.entered <- "datagram"
	<-w.release
	return transport.ErrClosed
}

func (w *stuckWriter) WriteMessage([]byte, time.Time) error {
	w.entered <- "message"
	<-w.release
	return transport.ErrClosed
}

type failure struct {
	code   transport.CloseCode
	reason string
}

func recordFailures() (func(transport.CloseCode, string), *[]failure) {
	var mu sync.Mutex
	var got []failure
	return func(code transport.CloseCode, reason string) {
		mu.Lock()
		got = append(got, failure{code, reason})
		mu.Unlock()
	}, &got
}

func TestOutboxNeverBlocksOnAStuckNetwork(t *testing.T) {
	w := newStuckWriter()
	fail, failures := recordFailures()
	o := transport.NewOutbox(w, transport.OutboxConfig{DatagramQueueLen: 8, MaxBacklog: 10_000}, fail)
	defer func() { close(w.release); o.Wait() }()

	// The datagram writer takes the first datagram and blocks in the network; of the
	// next 100, the newest 8 wait and the rest are dropped oldest first.
	require.NoError(t, o.SendDatagram([]byte{0}))
	require.Equal(t, "datagram", <-w.entered)
	for i := range 100 {
		require.NoError(t, o.SendDatagram([]byte{byte(i)}))
	}
	require.Equal(t, uint64(92), o.SendDropped())

	// Reliable messages wait up to MaxBacklog bytes; the one past it fails the
	// connection once, with a reason naming the backlog.
	msg := make([]byte, 1000)
	for range 10 {
		require.NoError(t, o.SendMessage(msg))
	}
	require.Equal(t, "message", <-w.entered)
	require.Equal(t, 10_000, o.Backlog())
	err := o.SendMessage(msg)
	var ce *transport.CloseError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, transport.CodeSendBacklog, ce.Code)
	require.Equal(t, "peer not reading: 11000 bytes of reliable messages waiting, bound 10000", ce.Reason)
	require.Equal(t, []failure{{transport.CodeSendBacklog, ce.Reason}}, *failures)

	// Closed: every send fails at once, and fail is not called again.
	require.ErrorIs(t, o.SendMessage(msg), transport.ErrClosed)
	require.ErrorIs(t, o.SendDatagram(msg), transport.ErrClosed)
	require.Len(t, *failures, 1)
}

func TestOutboxBacklogAge(t *testing.T) {
	w := newStuckWriter()
	fail, failures := recordFailures()
	now := time.Unix(100, 0)
	o := transport.NewOutbox(w, transport.OutboxConfig{BacklogTimeout: 5 * time.Second, Now: func() time.Time { return now }}, fail)
	defer func() { close(w.release); o.Wait() }()

	require.NoError(t, o.SendMessage([]byte("spawns")))
	now = now.Add(5 * time.Second)
	require.NoError(t, o.SendDatagram([]byte("snapshot")), "at the bound: still fine")
	now = now.Add(time.Millisecond)
	// Any send notices the stale backlog, a datagram as well as a message.
	err := o.SendDatagram([]byte("snapshot"))
	var ce *transport.CloseError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, transport.CodeSendBacklog, ce.Code)
	require.Equal(t, "peer not reading: reliable messages waiting for 5.001s (6 bytes), bound 5s", ce.Reason)
	require.Len(t, *failures, 1)
}

// deadlineWriter fails every message write with a timeout, as a QUIC stream does when
// its write deadline passes while flow control holds it.
type deadlineWriter struct{ deadlines chan time.Time }

func (deadlineWriter) WriteDatagram([]byte) error { return nil }
func (w deadlineWriter) WriteMessage(_ []byte, deadline time.Time) error {
	w.deadlines <- deadline
	return fmt.Errorf("stream write: %w", os.ErrDeadlineExceeded)
}

func TestOutboxWriteDeadline(t *testing.T) {
	w := deadlineWriter{deadlines: make(chan time.Time, 1)}
	failed := make(chan failure, 1)
	now := time.Unix(100, 0)
	o := transport.NewOutbox(w, transport.OutboxConfig{BacklogTimeout: 3 * time.Second, Now: func() time.Time { return now }},
		func(code transport.CloseCode, reason string) { failed <- failure{code, reason} })
	require.NoError(t, o.SendMessage([]byte("x")))
	require.Equal(t, now.Add(3*time.Second), <-w.deadlines, "the deadline is the message's enqueue time + BacklogTimeout")
	f := <-failed
	require.Equal(t, transport.CodeSendBacklog, f.code)
	require.Contains(t, f.reason, "peer not reading: reliable messages waiting for")
	o.Wait()
	require.ErrorIs(t, o.SendMessage([]byte("y")), transport.ErrClosed)
}

// flakyWriter takes a message at once only when its coin says so; the blocking path
// always succeeds. It records the order messages reach the network in.
type flakyWriter struct {
	mu   sync.Mutex
	rng  *rand.Rand
	open bool // TryWriteMessage accepts (else it flips a coin)
	got  [][]byte
	dgs  int
}

func (w *flakyWriter) WriteDatagram([]byte) error {
	w.mu.Lock()
	w.dgs++
	w.mu.Unlock()
	return nil
}

func (w *flakyWriter) WriteMessage(b []byte, _ time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.got = append(w.got, append([]byte(nil), b...))
	return nil
}

func (w *flakyWriter) TryWriteMessage(b []byte) (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.open && w.rng.IntN(2) == 0 {
		return false, nil
	}
	w.got = append(w.got, append([]byte(nil), b...))
	return true, nil
}

func (w *flakyWriter) messages() [][]byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([][]byte(nil), w.got...)
}

// Messages keep their order whichever path each takes: the caller's (TryWriteMessage)
// only when nothing waits ahead of it, else the writer goroutine's.
func TestOutboxKeepsMessageOrder(t *testing.T) {
	w := &flakyWriter{rng: rand.New(rand.NewPCG(1, 2))}
	o := transport.NewOutbox(w, transport.OutboxConfig{}, nil)
	var want [][]byte
	for i := range 2000 {
		b := []byte(fmt.Sprint(i))
		want = append(want, b)
		require.NoError(t, o.SendMessage(b))
	}
	require.Eventually(t, func() bool { return len(w.messages()) == len(want) }, 10*time.Second, time.Millisecond)
	require.Equal(t, want, w.messages())
	require.Zero(t, o.Backlog())
	o.Close()
	o.Wait()
}

func TestOutboxDatagramTooLargeIsDropped(t *testing.T) {
	w := &tooLargeWriter{n: make(chan int, 4)}
	o := transport.NewOutbox(w, transport.OutboxConfig{}, nil)
	defer func() { o.Close(); o.Wait() }()
	require.NoError(t, o.SendDatagram(make([]byte, 1300)))
	require.NoError(t, o.SendDatagram(make([]byte, 100)))
	require.Equal(t, 1300, <-w.n)
	require.Equal(t, 100, <-w.n)
	require.Equal(t, uint64(1), o.SendDropped())
}

type tooLargeWriter struct{ n chan int }

func (w *tooLargeWriter) WriteDatagram(b []byte) error {
	if len(b) > 1200 {
		defer func() { w.n <- len(b) }()
		return &transport.DatagramTooLargeError{Size: len(b), Max: 1200}
	}
	w.n <- len(b)
	return nil
}
func (w *tooLargeWriter) WriteMessage([]byte, time.Time) error { return errors.New("unused") }

func BenchmarkOutboxSendDatagram(b *testing.B) {
	w := &flakyWriter{rng: rand.New(rand.NewPCG(1, 1))}
	o := transport.NewOutbox(w, transport.OutboxConfig{}, nil)
	defer func() { o.Close(); o.Wait() }()
	p := make([]byte, 1200)
	b.ReportAllocs()
	for b.Loop() {
		_ = o.SendDatagram(p)
	}
}
