package quic_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/transport/quic"
)

// closedUDPAddr returns a loopback UDP address nothing listens on.
func closedUDPAddr(t *testing.T) string {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	addr := c.LocalAddr().String()
	require.NoError(t, c.Close())
	return addr
}

// Dialing a port with no server says which address and which phase failed, and
// still matches context.DeadlineExceeded.
func TestDialNoServer(t *testing.T) {
	addr := closedUDPAddr(t)

	start := time.Now()
	_, err := quic.Dial(context.Background(), addr, &quic.Config{HandshakeTimeout: 200 * time.Millisecond})
	require.Error(t, err)
	require.Less(t, time.Since(start), 5*time.Second)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Contains(t, err.Error(), "quic: dial "+addr+": no handshake response within 200ms (is a server listening there?)")
	var ne net.Error
	require.True(t, errors.As(err, &ne) && ne.Timeout(), "a net.Error that is a timeout: %v", err)

	// The caller's shorter deadline is the one reported.
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	_, err = quic.Dial(ctx, addr, nil)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Contains(t, err.Error(), addr)
	// (Reported as of the call: a busy machine may take a few ms before it.)
	require.Regexp(t, `no handshake response within 1[45][0-9]ms`, err.Error())

	// A caller's cancellation is not a timeout.
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	_, err = quic.Dial(ctx, addr, nil)
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, context.DeadlineExceeded)
	require.Contains(t, err.Error(), "quic: dial "+addr+": QUIC handshake")

	// An unresolvable address names the phase too.
	_, err = quic.Dial(context.Background(), "127.0.0.1:notaport", nil)
	require.ErrorContains(t, err, "quic: dial 127.0.0.1:notaport: resolving the address")
}
