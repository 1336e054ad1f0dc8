package netem_test

import (
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/archenet/archenet/transport/netem"
	"github.com/stretchr/testify/require"
)

// echoPair is a target socket and a client socket talking through a proxy.
type echoPair struct {
	target, client *net.UDPConn
	proxy          *netem.Proxy
}

func newPair(t *testing.T, seed uint64) *echoPair {
	t.Helper()
	target, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	p, err := netem.Listen(target.LocalAddr().String(), seed)
	require.NoError(t, err)
	client, err := net.DialUDP("udp", nil, p.Addr().(*net.UDPAddr))
	require.NoError(t, err)
	t.Cleanup(func() {
		client.Close()
		p.Close()
		target.Close()
	})
	return &echoPair{target: target, client: client, proxy: p}
}

// send numbers n datagrams 0..n-1 from the client.
func (e *echoPair) send(t *testing.T, n int) time.Time {
	start := time.Now()
	for i := range n {
		var b [8]byte
		binary.BigEndian.PutUint32(b[:], uint32(i))
		_, err := e.client.Write(b[:])
		require.NoError(t, err)
	}
	return start
}

// receive reads datagrams at the target until quiet for idle, returning their numbers
// and arrival times.
func (e *echoPair) receive(t *testing.T, idle time.Duration) ([]uint32, []time.Time) {
	var nums []uint32
	var at []time.Time
	buf := make([]byte, 64)
	for {
		require.NoError(t, e.target.SetReadDeadline(time.Now().Add(idle)))
		n, _, err := e.target.ReadFromUDP(buf)
		if err != nil {
			return nums, at
		}
		require.Equal(t, 8, n)
		nums = append(nums, binary.BigEndian.Uint32(buf))
		at = append(at, time.Now())
	}
}

func TestLatencyAndOrderUnderJitter(t *testing.T) {
	e := newPair(t, 1)
	cond := netem.Conditions{Latency: 30 * time.Millisecond, Jitter: 20 * time.Millisecond}
	e.proxy.SetConditions(cond, cond)
	start := e.send(t, 200)
	nums, at := e.receive(t, 300*time.Millisecond)
	require.Len(t, nums, 200)
	for i, n := range nums {
		require.Equal(t, uint32(i), n, "jitter keeps datagrams in order")
	}
	require.GreaterOrEqual(t, at[0].Sub(start), 10*time.Millisecond, "latency − jitter at least")
	up, _ := e.proxy.Stats()
	require.Equal(t, uint64(200), up.Forwarded)
}

func TestLossDuplicationReordering(t *testing.T) {
	e := newPair(t, 7)
	cond := netem.Conditions{Loss: 0.2, Duplicate: 0.1, Reorder: 0.1, ReorderDelay: 20 * time.Millisecond}
	e.proxy.SetConditions(cond, netem.Conditions{})
	// A burst small enough for the sockets' buffers: the kernel drops nothing.
	e.send(t, 200)
	nums, _ := e.receive(t, 300*time.Millisecond)
	up, _ := e.proxy.Stats()
	require.Equal(t, uint64(200), up.Received)
	require.Equal(t, int(up.Forwarded), len(nums))
	require.Equal(t, 200-int(up.Lost)+int(up.Duplicated), len(nums))
	require.InDelta(t, 40, float64(up.Lost), 20)
	require.InDelta(t, 16, float64(up.Duplicated), 12)
	require.Greater(t, up.Reordered, uint64(0))
	inversions := 0
	for i := 1; i < len(nums); i++ {
		if nums[i] < nums[i-1] {
			inversions++
		}
	}
	require.Greater(t, inversions, 0, "reordered datagrams are overtaken")
}

func TestOutageAndReturn(t *testing.T) {
	e := newPair(t, 3)
	e.send(t, 1) // the proxy learns the client
	buf := make([]byte, 64)
	require.NoError(t, e.target.SetReadDeadline(time.Now().Add(time.Second)))
	_, upstream, err := e.target.ReadFromUDP(buf)
	require.NoError(t, err)

	e.proxy.SetDown(true)
	e.send(t, 50)
	nums, _ := e.receive(t, 100*time.Millisecond)
	require.Empty(t, nums)
	_, err = e.target.WriteToUDP([]byte("downlink"), upstream)
	require.NoError(t, err)
	require.NoError(t, e.client.SetReadDeadline(time.Now().Add(100*time.Millisecond)))
	_, err = e.client.Read(buf)
	require.Error(t, err, "nothing crosses an outage")

	e.proxy.SetDown(false)
	e.send(t, 5)
	nums, _ = e.receive(t, 100*time.Millisecond)
	require.Len(t, nums, 5)
	_, err = e.target.WriteToUDP([]byte("downlink"), upstream)
	require.NoError(t, err)
	require.NoError(t, e.client.SetReadDeadline(time.Now().Add(time.Second)))
	n, err := e.client.Read(buf)
	require.NoError(t, err)
	require.Equal(t, "downlink", string(buf[:n]))
	up, down := e.proxy.Stats()
	require.Equal(t, uint64(50), up.DownDropped)
	require.Equal(t, uint64(1), down.DownDropped)
}

func TestBandwidthCap(t *testing.T) {
	e := newPair(t, 5)
	// 8 KB/s with a 1 KB queue: a burst of 100 8-byte datagrams (800 B) fits the queue
	// and drains in ~100 ms; a second burst on top overflows it.
	cond := netem.Conditions{Bandwidth: 8000, QueueBytes: 1000}
	e.proxy.SetConditions(cond, netem.Conditions{})
	start := e.send(t, 100)
	nums, at := e.receive(t, 200*time.Millisecond)
	require.Len(t, nums, 100)
	require.GreaterOrEqual(t, at[len(at)-1].Sub(start), 90*time.Millisecond)
	e.send(t, 200)
	nums, _ = e.receive(t, 200*time.Millisecond)
	up, _ := e.proxy.Stats()
	require.Greater(t, up.QueueDropped, uint64(0))
	require.Equal(t, 200-int(up.QueueDropped), len(nums))
}
