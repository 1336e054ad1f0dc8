package sim_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/sim"
	"github.com/archenet/archenet/transport/transporttest"
	"github.com/stretchr/testify/require"
)

var start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func dial(t *testing.T, seed int64, link sim.Link) (*sim.Network, *sim.Conn, *sim.Conn) {
	t.Helper()
	n := sim.NewNetwork(seed, start)
	l := n.Listen("server")
	t.Cleanup(func() { l.Close() })
	c, err := n.Dial("server", link)
	require.NoError(t, err)
	s, ok := l.PollAccept()
	require.True(t, ok, "the server end is ready at once")
	return n, c, s.(*sim.Conn)
}

// welcome sends the client a transport.Welcome from the server's end s,
// as a server does once it took the client's first message: before it, s
// reads nothing past that message.
func welcome(t *testing.T, s *sim.Conn) {
	t.Helper()
	require.NoError(t, s.SendMessage(transport.Welcome{ClientID: 1}.Append(nil)))
}

// As a real transport's: the server's end of a connection reads nothing
// past the client's first message (its Hello) until it sent a Welcome; then
// the messages held arrive in order, and the ones after them as they come.
func TestNothingReadPastTheHelloBeforeTheWelcome(t *testing.T) {
	n, c, s := dial(t, 1, sim.Link{})
	for _, m := range []string{"hello", "a", "b"} {
		require.NoError(t, c.SendMessage([]byte(m)))
	}
	n.Advance(time.Millisecond)
	b, ok := s.PollMessage()
	require.True(t, ok)
	require.Equal(t, "hello", string(b))
	_, ok = s.PollMessage()
	require.False(t, ok, "a message past the Hello was read before the Welcome")
	require.Equal(t, uint64(1), s.Stats().MessagesReceived)
	require.NoError(t, s.SendMessage([]byte{0xFF, 1}), "a message that is not a Welcome")
	n.Advance(time.Millisecond)
	_, ok = s.PollMessage()
	require.False(t, ok)

	welcome(t, s)
	require.NoError(t, c.SendMessage([]byte("c")))
	n.Advance(time.Millisecond)
	var got []string
	for b, ok := s.PollMessage(); ok; b, ok = s.PollMessage() {
		got = append(got, string(b))
	}
	require.Equal(t, []string{"a", "b", "c"}, got)
	require.Equal(t, uint64(4), s.Stats().MessagesReceived)
}

func TestConformance(t *testing.T) {
	t.Run("perfect", func(t *testing.T) {
		transporttest.Run(t, func(t *testing.T) transporttest.Pair {
			n, c, s := dial(t, 1, sim.Link{})
			return transporttest.Pair{Client: c, Server: s, Step: func() { n.Advance(time.Millisecond) }, CloseFlushes: true}
		})
	})
	t.Run("lossy", func(t *testing.T) {
		// Datagram tests wait for specific datagrams, so only the reliable channel is lossy.
		transporttest.Run(t, func(t *testing.T) transporttest.Pair {
			cond := sim.Conditions{Latency: 30 * time.Millisecond, Jitter: 5 * time.Millisecond, Bandwidth: 1 << 20, QueueBytes: 1 << 20}
			n, c, s := dial(t, 2, sim.Link{Up: cond, Down: cond})
			return transporttest.Pair{Client: c, Server: s, Step: func() { n.Advance(5 * time.Millisecond) }, CloseFlushes: true}
		})
	})
}

func TestDialUnknownAddress(t *testing.T) {
	n := sim.NewNetwork(1, start)
	_, err := n.Dial("nowhere", sim.Link{})
	require.ErrorIs(t, err, sim.ErrNoListener)
}

// trace runs a fixed scenario over a lossy, jittery, duplicating, reordering link and
// returns a textual delivery trace.
func trace(seed int64) string {
	n := sim.NewNetwork(seed, start)
	var sb strings.Builder
	n.SetTrace(func(ev sim.TraceEvent) {
		fmt.Fprintf(&sb, "%v %s %s->%s r=%v %x\n", ev.At.Sub(start), ev.Kind, ev.From, ev.To, ev.Reliable, ev.Data)
	})
	l := n.Listen("server")
	cond := sim.Conditions{
		Latency: 40 * time.Millisecond, Jitter: 20 * time.Millisecond, Loss: 0.1,
		Duplicate: 0.05, Reorder: 0.1, Bandwidth: 100_000,
		Burst: sim.GilbertElliott{PGoodToBad: 0.02, PBadToGood: 0.3},
	}
	c, err := n.Dial("server", sim.Link{Up: cond, Down: cond})
	if err != nil {
		panic(err)
	}
	sc, _ := l.PollAccept()
	for tick := range 200 {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(tick))
		c.SendDatagram(b[:])
		sc.SendDatagram(b[:])
		if tick%10 == 0 {
			c.SendMessage(b[:])
		}
		n.Advance(16 * time.Millisecond)
		for {
			if _, ok := sc.PollDatagram(); !ok {
				break
			}
		}
	}
	n.Advance(10 * time.Second)
	return sb.String()
}

func TestDeterminism(t *testing.T) {
	a, b := trace(42), trace(42)
	require.NotEmpty(t, a)
	require.Equal(t, a, b, "same seed and calls give the same trace")
	require.NotEqual(t, a, trace(43), "another seed gives another trace")
}

func TestIndependentLoss(t *testing.T) {
	n, c, s := dial(t, 7, sim.Link{Up: sim.Conditions{Loss: 0.2}})
	const total = 10000
	for range total {
		require.NoError(t, c.SendDatagram([]byte("x")))
		n.Advance(time.Millisecond)
		s.PollDatagram()
	}
	st := c.LinkStats()
	require.Equal(t, uint64(total), st.Datagrams)
	require.Equal(t, st.Datagrams, st.Lost+st.Delivered)
	// 20% of 10000: binomial standard deviation 40, allow 5 sigma.
	require.InDelta(t, 2000, float64(st.Lost), 200, "lost %d", st.Lost)
	require.Equal(t, s.Stats().DatagramsReceived, st.Delivered)
	// Exact count for this seed, so a change to the loss model is noticed.
	require.Equal(t, uint64(1978), st.Lost)
}

func TestBurstLoss(t *testing.T) {
	// Mean burst 1/0.25 = 4 packets; stationary bad share 0.05/(0.05+0.25) = 1/6.
	ge := sim.GilbertElliott{PGoodToBad: 0.05, PBadToGood: 0.25}
	n, c, s := dial(t, 9, sim.Link{Up: sim.Conditions{Burst: ge}, DatagramQueueLen: 1 << 20})
	var arrived []bool
	const total = 20000
	for i := range total {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(i))
		require.NoError(t, c.SendDatagram(b[:]))
	}
	n.Advance(time.Second)
	arrived = make([]bool, total)
	for {
		b, ok := s.PollDatagram()
		if !ok {
			break
		}
		arrived[binary.BigEndian.Uint32(b)] = true
	}
	lost, bursts := 0, 0
	for i, ok := range arrived {
		if !ok {
			lost++
			if i == 0 || arrived[i-1] {
				bursts++
			}
		}
	}
	require.Equal(t, uint64(lost), c.LinkStats().Lost)
	require.InDelta(t, total/6, lost, total/60, "lost %d", lost)
	meanBurst := float64(lost) / float64(bursts)
	require.InDelta(t, 4, meanBurst, 0.5, "mean burst length %.2f", meanBurst)
}

func TestDuplication(t *testing.T) {
	n, c, s := dial(t, 11, sim.Link{Up: sim.Conditions{Duplicate: 0.1, Jitter: time.Millisecond}, DatagramQueueLen: 1 << 20})
	const total = 5000
	for i := range total {
		require.NoError(t, c.SendDatagram([]byte{byte(i)}))
	}
	n.Advance(time.Second)
	got := 0
	var first []byte
	for {
		b, ok := s.PollDatagram()
		if !ok {
			break
		}
		if first == nil {
			first = b
		}
		got++
	}
	dups := c.LinkStats().Duplicated
	require.Equal(t, uint64(got), total+dups)
	require.InDelta(t, 500, float64(dups), 100)
	require.Equal(t, uint64(got), s.Stats().DatagramsReceived)
}

func TestDuplicatesAreIndependentSlices(t *testing.T) {
	n, c, s := dial(t, 1, sim.Link{Up: sim.Conditions{Duplicate: 1}})
	require.NoError(t, c.SendDatagram([]byte("ab")))
	n.Advance(time.Millisecond)
	a, ok1 := s.PollDatagram()
	b, ok2 := s.PollDatagram()
	require.True(t, ok1 && ok2)
	a[0] = 'X'
	require.Equal(t, []byte("ab"), b)
}

func TestReordering(t *testing.T) {
	n, c, s := dial(t, 13, sim.Link{Up: sim.Conditions{Latency: 10 * time.Millisecond, Reorder: 0.1, ReorderDelay: 50 * time.Millisecond}, DatagramQueueLen: 1 << 20})
	const total = 2000
	for i := range total {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(i))
		require.NoError(t, c.SendDatagram(b[:]))
		n.Advance(time.Millisecond)
	}
	n.Advance(time.Second)
	var seq []uint32
	for {
		b, ok := s.PollDatagram()
		if !ok {
			break
		}
		seq = append(seq, binary.BigEndian.Uint32(b))
	}
	require.Len(t, seq, total, "reordering loses nothing")
	late := 0
	for i := 1; i < len(seq); i++ {
		if seq[i] < seq[i-1] {
			late++
		}
	}
	reordered := c.LinkStats().Reordered
	require.InDelta(t, 200, float64(reordered), 60)
	require.Positive(t, late)
	require.LessOrEqual(t, uint64(late), reordered)
}

func TestJitterBounds(t *testing.T) {
	n, c, s := dial(t, 15, sim.Link{Up: sim.Conditions{Latency: 20 * time.Millisecond, Jitter: 10 * time.Millisecond}})
	var lat []time.Duration
	for range 500 {
		require.NoError(t, c.SendDatagram([]byte("j")))
		sent := n.Now()
		for {
			if _, ok := s.PollDatagram(); ok {
				break
			}
			n.Advance(time.Millisecond)
		}
		lat = append(lat, n.Now().Sub(sent))
	}
	lo, hi := lat[0], lat[0]
	for _, d := range lat {
		lo, hi = min(lo, d), max(hi, d)
	}
	// Arrivals are observed at the next whole millisecond.
	require.GreaterOrEqual(t, lo, 20*time.Millisecond)
	require.LessOrEqual(t, lo, 21*time.Millisecond)
	require.Equal(t, 30*time.Millisecond, hi)
}

func TestBandwidthAndTailDrop(t *testing.T) {
	// 100 kB/s, 10 kB queue: a burst of 100 × 1000 B fits 10 (+1 in transmission), the rest is dropped.
	n, c, s := dial(t, 17, sim.Link{Up: sim.Conditions{Bandwidth: 100_000, QueueBytes: 10_000}})
	welcome(t, s)
	for range 100 {
		require.NoError(t, c.SendDatagram(make([]byte, 1000)))
	}
	st := c.LinkStats()
	require.Equal(t, uint64(10), st.Datagrams-st.QueueDropped)
	require.Equal(t, uint64(90), st.QueueDropped)

	// Serialization: 1000 B take 10 ms each.
	var arrivals []time.Duration
	for range 200 {
		n.Advance(time.Millisecond)
		for {
			if _, ok := s.PollDatagram(); !ok {
				break
			}
			arrivals = append(arrivals, n.Now().Sub(start))
		}
	}
	require.Len(t, arrivals, 10)
	for i, at := range arrivals {
		require.Equal(t, time.Duration(i+1)*10*time.Millisecond, at)
	}

	// Reliable messages wait at the bottleneck instead of being dropped.
	for range 50 {
		require.NoError(t, c.SendMessage(make([]byte, 1000)))
	}
	n.Advance(499 * time.Millisecond)
	require.Equal(t, uint64(49), s.Stats().MessagesReceived)
	n.Advance(time.Millisecond)
	require.Equal(t, uint64(50), s.Stats().MessagesReceived)
}

func TestMTU(t *testing.T) {
	n, c, s := dial(t, 1, sim.Link{Up: sim.Conditions{MTU: 500}})
	require.Equal(t, 500, c.MaxDatagramSize())
	require.Equal(t, 1200, s.MaxDatagramSize(), "zero MTU means 1200")
	var tooLarge *transport.DatagramTooLargeError
	require.ErrorAs(t, c.SendDatagram(make([]byte, 501)), &tooLarge)
	require.Equal(t, transport.DatagramTooLargeError{Size: 501, Max: 500}, *tooLarge)
	require.NoError(t, c.SendDatagram(make([]byte, 500)))
	n.Advance(0)
	b, ok := s.PollDatagram()
	require.True(t, ok)
	require.Len(t, b, 500)
	require.Equal(t, uint64(1), c.Stats().DatagramsSent, "a rejected datagram is not counted as sent")
}

func TestReliableUnderLoss(t *testing.T) {
	cond := sim.Conditions{Latency: 50 * time.Millisecond, Loss: 0.2}
	n, c, s := dial(t, 21, sim.Link{Up: cond, Down: cond})
	welcome(t, s)
	const total = 1000
	for i := range total {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(i))
		require.NoError(t, c.SendMessage(b[:]))
		if i%10 == 0 {
			n.Advance(16 * time.Millisecond)
		}
	}
	var got []uint32
	for range 2000 {
		n.Advance(10 * time.Millisecond)
		for {
			b, ok := s.PollMessage()
			if !ok {
				break
			}
			got = append(got, binary.BigEndian.Uint32(b))
		}
	}
	require.Len(t, got, total, "every message arrives exactly once")
	for i, v := range got {
		require.Equal(t, uint32(i), v, "in order")
	}
	rt := c.LinkStats().Retransmissions
	// Expected retransmissions per message: 0.2/0.8 = 0.25.
	require.InDelta(t, 250, float64(rt), 60, "retransmissions %d", rt)
}

func TestRetransmissionDelaysAndBlocks(t *testing.T) {
	// With loss 1 each message is retransmitted MaxRetransmissions times; RTO = max(2×RTT, 20ms).
	cond := sim.Conditions{Latency: 30 * time.Millisecond}
	lossy := cond
	lossy.Loss = 1
	n, c, s := dial(t, 1, sim.Link{Up: lossy, Down: cond})
	welcome(t, s)
	require.NoError(t, c.SendMessage([]byte("first")))
	c.SetConditions(cond, cond)
	require.NoError(t, c.SendMessage([]byte("second")))
	rto := 120 * time.Millisecond
	due := 30*time.Millisecond + sim.MaxRetransmissions*rto
	n.Advance(due - time.Millisecond)
	_, ok := s.PollMessage()
	require.False(t, ok, "the second message is blocked behind the first")
	n.Advance(time.Millisecond)
	b1, _ := s.PollMessage()
	b2, _ := s.PollMessage()
	require.Equal(t, "first", string(b1))
	require.Equal(t, "second", string(b2))
}

func TestLinkDown(t *testing.T) {
	cond := sim.Conditions{Latency: 10 * time.Millisecond}
	n, c, s := dial(t, 1, sim.Link{Up: cond, Down: cond, IdleTimeout: 5 * time.Second})
	require.NoError(t, c.SendDatagram([]byte("in flight")))
	c.SetLinkDown(true)
	require.True(t, s.LinkDown())
	require.NoError(t, c.SendDatagram([]byte("while down")))
	require.NoError(t, c.SendMessage([]byte("m1")))
	require.NoError(t, s.SendMessage([]byte("m2")))
	n.Advance(time.Second)
	_, ok := s.PollDatagram()
	require.False(t, ok)
	_, ok = s.PollMessage()
	require.False(t, ok, "messages are held while the link is down")
	require.Equal(t, uint64(2), c.LinkStats().LinkDownDropped)

	c.SetLinkDown(false)
	n.Advance(9 * time.Millisecond)
	_, ok = s.PollMessage()
	require.False(t, ok)
	n.Advance(time.Millisecond)
	b, ok := s.PollMessage()
	require.True(t, ok)
	require.Equal(t, "m1", string(b))
	b, ok = c.PollMessage()
	require.True(t, ok)
	require.Equal(t, "m2", string(b))

	// Down longer than the idle timeout: both ends time out.
	c.SetLinkDown(true)
	n.Advance(5*time.Second - time.Millisecond)
	require.NoError(t, c.Err())
	n.Advance(time.Millisecond)
	for _, end := range []*sim.Conn{c, s} {
		select {
		case <-end.Done():
		default:
			t.Fatal("end still open after the idle timeout")
		}
		require.ErrorIs(t, end.Err(), transport.ErrTimeout)
		require.ErrorIs(t, end.Err(), transport.ErrClosed)
		var ce *transport.CloseError
		require.ErrorAs(t, end.Err(), &ce)
		require.Equal(t, transport.CodeTimeout, ce.Code)
	}
}

func TestLinkDownShorterThanIdleTimeoutSurvives(t *testing.T) {
	n, c, _ := dial(t, 1, sim.Link{IdleTimeout: time.Second})
	c.SetLinkDown(true)
	n.Advance(900 * time.Millisecond)
	c.SetLinkDown(false)
	n.Advance(10 * time.Second)
	require.NoError(t, c.Err())
}

func TestReceiveQueueBound(t *testing.T) {
	n, c, s := dial(t, 1, sim.Link{DatagramQueueLen: 8})
	for range 20 {
		require.NoError(t, c.SendDatagram([]byte("x")))
	}
	n.Advance(0)
	st := s.Stats()
	require.Equal(t, uint64(8), st.DatagramsReceived)
	require.Equal(t, uint64(12), st.DatagramsDropped)
}

func TestStatsRTT(t *testing.T) {
	_, c, s := dial(t, 1, sim.Link{Up: sim.Conditions{Latency: 30 * time.Millisecond}, Down: sim.Conditions{Latency: 20 * time.Millisecond}})
	require.Equal(t, 50*time.Millisecond, c.Stats().RTT)
	require.Equal(t, 50*time.Millisecond, s.Stats().RTT)
}

func TestBlockingAcceptWakesOnDial(t *testing.T) {
	n := sim.NewNetwork(1, start)
	l := n.Listen("server")
	got := make(chan transport.Conn)
	go func() {
		c, err := l.Accept(context.Background())
		if err == nil {
			got <- c
		}
		close(got)
	}()
	_, err := n.Dial("server", sim.Link{})
	require.NoError(t, err)
	require.NotNil(t, <-got)

	closed := make(chan error)
	go func() {
		_, err := l.Accept(context.Background())
		closed <- err
	}()
	require.NoError(t, l.Close())
	require.ErrorIs(t, <-closed, transport.ErrClosed)
}

func TestBlockingReceiveWakesOnAdvance(t *testing.T) {
	n, c, s := dial(t, 1, sim.Link{Up: sim.Conditions{Latency: 100 * time.Millisecond}})
	got := make(chan []byte)
	go func() {
		b, err := s.ReceiveMessage(context.Background())
		if err != nil {
			b = nil
		}
		got <- b
	}()
	require.NoError(t, c.SendMessage([]byte("tick")))
	n.Advance(100 * time.Millisecond)
	require.Equal(t, []byte("tick"), <-got)
}

func TestListenerCloseClosesConns(t *testing.T) {
	n := sim.NewNetwork(1, start)
	l := n.Listen("server")
	c, err := n.Dial("server", sim.Link{})
	require.NoError(t, err)
	require.NoError(t, l.Close())
	n.Advance(0)
	require.ErrorIs(t, c.Err(), transport.ErrClosed)
	_, err = n.Dial("server", sim.Link{})
	require.ErrorIs(t, err, sim.ErrNoListener)
	require.NotPanics(t, func() { n.Listen("server") }, "the address is free again")
}

func TestCloseFlushesHeldMessagesInOrder(t *testing.T) {
	n, c, s := dial(t, 1, sim.Link{})
	c.SetLinkDown(true)
	require.NoError(t, c.SendMessage([]byte("last words")))
	require.NoError(t, c.CloseWithReason(transport.CodeApplication, "bye"))
	n.Advance(time.Second)
	require.NoError(t, s.Err(), "the close is held with the messages")
	c.SetLinkDown(false)
	n.Advance(0)
	b, ok := s.PollMessage()
	require.True(t, ok)
	require.True(t, bytes.Equal(b, []byte("last words")))
	require.Error(t, s.Err())
}

func TestInvalidConditionsAreErrors(t *testing.T) {
	n := sim.NewNetwork(1, time.Unix(0, 0))
	n.Listen("server")
	for _, bad := range []sim.Conditions{
		{Latency: -time.Millisecond},
		{Jitter: -1},
		{Loss: 1.5},
		{Loss: math.NaN()},
		{Duplicate: -0.1},
		{Burst: sim.GilbertElliott{LossBad: 2}},
		{MTU: -1},
		{Bandwidth: -1},
	} {
		_, err := n.Dial("server", sim.Link{Down: bad})
		require.ErrorIs(t, err, sim.ErrInvalidConditions, "%+v", bad)
	}
	_, err := n.Dial("server", sim.Link{MaxMessageSize: -1})
	require.ErrorIs(t, err, sim.ErrInvalidConditions)
	c, err := n.Dial("server", sim.Link{})
	require.NoError(t, err)
	require.ErrorIs(t, c.SetConditions(sim.Conditions{Loss: -1}, sim.Conditions{}), sim.ErrInvalidConditions)
	send, _ := c.Conditions()
	require.Zero(t, send.Loss, "a refused change changes nothing")
	require.NoError(t, c.SetConditions(sim.Conditions{Loss: 0.5}, sim.Conditions{}))
}
