package replication

import (
	"testing"
	"time"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/internal/link"
	"github.com/archenet/archenet/replication/schema"
	"github.com/stretchr/testify/require"
)

// TestConfigsRefuseInvalidSettings: every invalid setting of ServerConfig
// and ClientConfig is an error naming it; zero settings take their
// defaults, and nothing is clamped silently.
func TestConfigsRefuseInvalidSettings(t *testing.T) {
	reg := schema.NewRegistry()
	schema.MustRegister[components.Transform](reg)
	for _, tc := range []struct {
		name, want string
		tweak      func(*ServerConfig)
	}{
		{"negative net rate", "NetRate -1", func(c *ServerConfig) { c.NetRate = -1 }},
		{"net rate beyond the wire's", "NetRate 70000", func(c *ServerConfig) { c.NetRate = 70000 }},
		{"depth", "Depth 129", func(c *ServerConfig) { c.Depth = 129 }},
		{"clients", "MaxClients 255", func(c *ServerConfig) { c.MaxClients = 255 }},
		{"negative workers", "Workers -2", func(c *ServerConfig) { c.Workers = -2 }},
		{"min above max", "MinBytesPerSecond 9000 exceeds MaxBytesPerSecond 8000", func(c *ServerConfig) { c.MinBytesPerSecond, c.MaxBytesPerSecond = 9000, 8000 }},
		{"negative handshake timeout", "HandshakeTimeout -1s", func(c *ServerConfig) { c.HandshakeTimeout = -time.Second }},
	} {
		cfg := ServerConfig{Registry: reg}
		tc.tweak(&cfg)
		_, err := cfg.resolve()
		require.ErrorContains(t, err, tc.want, tc.name)
	}
	r, err := ServerConfig{Registry: reg, MaxBytesPerSecond: 2000, MaxClients: 1, ClientTimeout: -1}.resolve()
	require.NoError(t, err)
	require.Equal(t, 2000, r.MinBytesPerSecond, "the default floor is the ceiling when the ceiling is lower")
	require.Equal(t, 1, r.Workers, "the default workers are no more than the clients")
	require.Equal(t, 30, r.NetRate)
	require.Equal(t, time.Duration(-1), r.ClientTimeout, "negative: no timeout (documented)")

	_, err = ClientConfig{Registry: reg, MaxEntities: -1}.resolve()
	require.ErrorContains(t, err, "MaxEntities -1")
	_, err = ClientConfig{Registry: reg, PredictedSpawnTimeout: -time.Second}.resolve()
	require.ErrorContains(t, err, "PredictedSpawnTimeout -1s")
	c, err := ClientConfig{Registry: reg}.resolve()
	require.NoError(t, err)
	require.Equal(t, DefaultTimeout, c.Timeout)
}

// TestClientStatesAreTheLinks: a ClientState is its link's state
// converted, so the two must agree value for value.
func TestClientStatesAreTheLinks(t *testing.T) {
	for _, tc := range []struct {
		client ClientState
		link   link.State
	}{{StateConnecting, link.Connecting}, {StateJoined, link.Joined}, {StateReady, link.Ready}, {StateClosed, link.Closed}} {
		require.Equal(t, tc.client, ClientState(tc.link))
		require.Equal(t, tc.client.String(), tc.link.String())
	}
}
