package quic

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/transport/internal/connio"
)

// TestConfigRefusesNegativeSettings: a negative setting where none is
// documented is an error naming it, not a silent default.
func TestConfigRefusesNegativeSettings(t *testing.T) {
	for _, c := range []Config{{MaxMessageSize: -1}, {AcceptBacklog: -3}, {IdleTimeout: -time.Second}, {DatagramBurst: -1}} {
		_, _, err := c.resolve()
		require.Error(t, err, "%+v", c)
		require.Contains(t, err.Error(), "negative")
	}
	_, s, err := (&Config{KeepAlivePeriod: -1, DatagramRateLimit: -1, MaxPendingPerAddress: -1}).resolve()
	require.NoError(t, err, "negative: none or no bound, as documented")
	require.Equal(t, connio.DefaultIdleTimeout, s.IdleTimeout)
	_, err = Dial(t.Context(), "127.0.0.1:1", &Config{MessageQueueLen: -1})
	require.ErrorContains(t, err, "MessageQueueLen -1")
}
