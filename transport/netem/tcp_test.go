package netem_test

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"

	"github.com/archenet/archenet/transport/netem"
	"github.com/stretchr/testify/require"
)

// echo serves one TCP echo server, closed at the test's end.
func echo(t *testing.T) net.Listener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); _ = c.Close() }()
		}
	}()
	return ln
}

// The TCP proxy delays each direction by its latency, keeps the stream in
// order, and delays a lost chunk by a retransmission (holding up what
// follows); the generous upper bounds are stalls, not timings.
func TestTCPProxy(t *testing.T) {
	ln := echo(t)
	p, err := netem.ListenTCP(ln.Addr().String(), 1)
	require.NoError(t, err)
	defer p.Close()
	p.SetConditions(netem.Conditions{Latency: 20 * time.Millisecond}, netem.Conditions{Latency: 20 * time.Millisecond})
	c, err := net.Dial("tcp", p.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	roundTrip := func(msg []byte) time.Duration {
		t0 := time.Now()
		_, err := c.Write(msg)
		require.NoError(t, err)
		got := make([]byte, len(msg))
		_, err = io.ReadFull(c, got)
		require.NoError(t, err)
		require.True(t, bytes.Equal(msg, got), "in order and intact")
		return time.Since(t0)
	}
	d := roundTrip([]byte("hello"))
	require.GreaterOrEqual(t, d, 40*time.Millisecond)
	require.Less(t, d, 2*time.Second)
	p.SetConditions(netem.Conditions{Latency: 20 * time.Millisecond, Loss: 1}, netem.Conditions{Latency: 20 * time.Millisecond})
	d = roundTrip(bytes.Repeat([]byte("x"), 5000))
	require.GreaterOrEqual(t, d, 40*time.Millisecond+netem.RTOMin, "a lost chunk waits for its retransmission")
	up, _ := p.Stats()
	require.Positive(t, up.Retransmitted)
}
