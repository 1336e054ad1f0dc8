package sim_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/tests/internal/harness"
	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/sim"
	"github.com/stretchr/testify/require"
)

// Connections that never say Hello: at most MaxHandshakes wait at a time
// (the rest are refused as busy), each is closed at the handshake timeout,
// and the pending list lets go of them.
func TestHandshakeFlood(t *testing.T) {
	h := harness.New(t, 1, sim.Link{}, func(cfg *replication.ServerConfig) {
		cfg.Limits.MaxHandshakes = 8
		cfg.Limits.HandshakeTimeout = time.Second
	})
	h.Run(3)
	var silent []*sim.Conn
	for range 20 {
		c, err := h.Net.Dial("server", sim.Link{})
		require.NoError(t, err)
		silent = append(silent, c)
	}
	h.Run(1)
	require.Equal(t, 12, h.Server.Stats.Busy)
	h.Run(int(time.Second/harness.TickDt) + 2)
	require.Equal(t, 8, h.Server.Stats.HandshakeTimeouts)
	closed := 0
	for _, c := range silent {
		select {
		case <-c.Done():
			closed++
			var ce *transport.CloseError
			require.ErrorAs(t, c.Err(), &ce)
			require.Contains(t, []string{"no hello in time", "server busy: 8 handshakes in progress (ServerConfig.Limits.MaxHandshakes)"}, ce.Reason)
		default:
		}
	}
	require.Equal(t, 20, closed)
	// The playing client never noticed.
	require.NoError(t, h.Converged(0, nil))
	require.Len(t, h.Server.Clients(), 1)
	// A new client still gets in.
	late := h.AddClient()
	h.Run(3)
	require.True(t, late.Client.Ready(), fmt.Sprint(late.Client.Err()))
}
