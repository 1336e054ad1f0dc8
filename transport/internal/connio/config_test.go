package connio

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/transport"
)

// Zero settings take their defaults; the ones whose negative value is
// documented keep it; KeepAlivePeriod and DatagramBurst follow IdleTimeout and
// DatagramRateLimit.
func TestSettingsDefaults(t *testing.T) {
	var s Settings
	require.NoError(t, s.Resolve("quic", nil))
	require.Equal(t, DefaultHandshakeTimeout, s.HandshakeTimeout)
	require.Equal(t, DefaultIdleTimeout, s.IdleTimeout)
	require.Equal(t, DefaultIdleTimeout/3, s.KeepAlivePeriod)
	require.Equal(t, DefaultMaxMessageSize, s.MaxMessageSize)
	require.Equal(t, DefaultDatagramRateLimit, s.DatagramRateLimit)
	require.Equal(t, DefaultDatagramRateLimit, s.DatagramBurst)
	require.Equal(t, transport.DefaultOutboxDatagrams, s.DatagramSendQueueLen)
	require.Equal(t, DefaultMaxPendingPerAddress, s.MaxPendingPerAddress)
	require.NotNil(t, s.Logger)

	s = Settings{IdleTimeout: 9 * time.Second, KeepAlivePeriod: -1, DatagramRateLimit: -1, MaxPendingPerAddress: -1, RetryAbove: -1}
	require.NoError(t, s.Resolve("quic", nil), "negative: none or no bound, as documented")
	require.Equal(t, time.Duration(-1), s.KeepAlivePeriod)
	require.Equal(t, -1, s.DatagramRateLimit)
	require.Equal(t, 1, s.DatagramBurst)
	require.Equal(t, -1, s.MaxPendingPerAddress)
	require.Equal(t, -1, s.RetryAbove)

	s = Settings{IdleTimeout: 9 * time.Second}
	require.NoError(t, s.ResolveLimits("webtransport"))
	require.Equal(t, 3*time.Second, s.KeepAlivePeriod)
	require.Nil(t, s.Logger, "ResolveLimits leaves the Logger alone")
}

// A negative setting where none is documented is an error naming it and the
// package, not a silent default.
func TestSettingsRefuseNegative(t *testing.T) {
	for name, s := range map[string]Settings{
		"MaxMessageSize":     {MaxMessageSize: -1},
		"HandshakeTimeout":   {HandshakeTimeout: -time.Second},
		"SendBacklogTimeout": {SendBacklogTimeout: -time.Second},
		"AcceptBacklog":      {AcceptBacklog: -3},
		"DatagramBurst":      {DatagramBurst: -1},
	} {
		err := s.Resolve("webtransport", nil)
		require.ErrorContains(t, err, "webtransport: Config."+name+" -", name)
		require.ErrorContains(t, err, "is negative", name)
	}
}

func TestSettingsCheckListen(t *testing.T) {
	s := Settings{HandshakeWindow: transport.MaxHandshakeMessageSize}
	require.NoError(t, s.Resolve("quic", nil))
	require.ErrorContains(t, s.CheckListen(), "quic: Config.HandshakeWindow")
	s = Settings{}
	require.NoError(t, s.Resolve("quic", nil))
	require.NoError(t, s.CheckListen())
}

func TestCloseCodeOf(t *testing.T) {
	require.Equal(t, transport.CodeFlood, CloseCodeOf(uint64(transport.CodeFlood)))
	require.Equal(t, transport.CloseCode(0xffff), CloseCodeOf(0xffff))
	require.Equal(t, transport.CodeProtocolError, CloseCodeOf(0x10000))
}
