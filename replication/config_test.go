package replication

import (
	"strings"
	"testing"
	"time"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/ecs"
	"github.com/archenet/archenet/replication/internal/link"
	"github.com/archenet/archenet/replication/schema"
	arche "github.com/mlange-42/arche/ecs"
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
		{"clients", "Limits.MaxClients 255", func(c *ServerConfig) { c.Limits.MaxClients = 255 }},
		{"negative workers", "Workers -2", func(c *ServerConfig) { c.Workers = -2 }},
		{"min above max", "MinBytesPerSecond 9000 exceeds MaxBytesPerSecond 8000", func(c *ServerConfig) { c.MinBytesPerSecond, c.MaxBytesPerSecond = 9000, 8000 }},
		{"negative handshake timeout", "Limits.HandshakeTimeout -1s", func(c *ServerConfig) { c.Limits.HandshakeTimeout = -time.Second }},
		{"match name", "Match of 65 bytes", func(c *ServerConfig) { c.Match = strings.Repeat("m", 65) }},
	} {
		cfg := ServerConfig{Registry: reg}
		tc.tweak(&cfg)
		_, err := cfg.resolve()
		require.ErrorContains(t, err, tc.want, tc.name)
	}
	r, err := ServerConfig{Registry: reg, MaxBytesPerSecond: 2000, Limits: ServerLimits{MaxClients: 1, ClientTimeout: -1}}.resolve()
	require.NoError(t, err)
	require.Equal(t, 2000, r.MinBytesPerSecond, "the default floor is the ceiling when the ceiling is lower")
	require.Equal(t, 1, r.Workers, "the default workers are no more than the clients")
	require.Equal(t, 30, r.NetRate)
	require.Equal(t, time.Duration(-1), r.Limits.ClientTimeout, "negative: no timeout (documented)")

	_, err = ClientConfig{Registry: reg, MaxEntities: -1}.resolve()
	require.ErrorContains(t, err, "MaxEntities -1")
	_, err = ClientConfig{Registry: reg, PredictedSpawnTimeout: -time.Second}.resolve()
	require.ErrorContains(t, err, "PredictedSpawnTimeout -1s")
	c, err := ClientConfig{Registry: reg}.resolve()
	require.NoError(t, err)
	require.Equal(t, DefaultTimeout, c.Timeout)
}

// TestServerLimitsDefaults: the documented defaults of ServerLimits, and a
// message bound no client batch fits in is refused.
func TestServerLimitsDefaults(t *testing.T) {
	reg := schema.NewRegistry()
	schema.MustRegister[components.Transform](reg)
	d, err := ServerConfig{Registry: reg}.resolve()
	require.NoError(t, err)
	require.Equal(t, ServerLimits{MaxClients: 64, SeatWindow: DefaultSeatWindow, MaxSuspendedPerAddress: 4, MaxClientsPerAddress: DefaultMaxClientsPerAddress, MaxHandshakes: 256,
		MaxPredictedSpawns: DefaultMaxPredictedSpawns, HandshakeTimeout: 5 * time.Second, JoinTimeout: DefaultJoinTimeout,
		ClientTimeout: DefaultTimeout, MaxMessageBytes: 4 << 10, MaxMessagesPerSecond: 120, MaxQueuedMessageBytes: 16 << 10}, d.Limits, "the documented defaults")
	_, err = ServerConfig{Registry: reg, Limits: ServerLimits{MaxMessageBytes: 512}}.resolve()
	require.ErrorContains(t, err, "MaxMessageBytes 512 is below a client's batch (1024 bytes)")
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

// A server is its world's Server resource while open (helpers such as
// input.Authority find it there); a second server on the world leaves the
// first's in place; after Close the next one made takes the place.
func TestServerIsItsWorldsResource(t *testing.T) {
	reg := schema.NewRegistry()
	schema.MustRegister[components.Transform](reg)
	w := arche.NewWorld()
	of := func() *Server {
		s, _ := w.Resources().Get(arche.ResourceID[Server](&w)).(*Server)
		return s
	}
	a, err := NewServer(&w, nil, ServerConfig{Registry: reg, Workers: 1})
	require.NoError(t, err)
	require.Same(t, a, of())
	b, err := NewServer(&w, nil, ServerConfig{Registry: reg, Workers: 1})
	require.NoError(t, err)
	require.Same(t, a, of())
	require.NoError(t, b.Close())
	require.Same(t, a, of(), "another server's close leaves it")
	require.NoError(t, a.Close())
	require.Nil(t, of())
	c, err := NewServer(&w, nil, ServerConfig{Registry: reg, Workers: 1})
	require.NoError(t, err)
	require.Same(t, c, of())
	require.NoError(t, c.Close())
}

// With a Scheduler the net rate, divisor and tick come from it; a value
// set as well must agree.
func TestSchedulerTiming(t *testing.T) {
	reg := schema.NewRegistry()
	schema.MustRegister[components.Transform](reg)
	w := arche.NewWorld()
	sched, err := ecs.New(&w, ecs.Config{TickRate: 60, NetDivisor: 3})
	require.NoError(t, err)
	c, err := ServerConfig{Registry: reg, Scheduler: sched}.resolve()
	require.NoError(t, err)
	require.Equal(t, 20, c.NetRate)
	require.Equal(t, 3, c.NetDivisor)
	for range 7 {
		sched.Step()
	}
	require.Equal(t, sched.Info().NetTick, c.Tick())
	_, err = ServerConfig{Registry: reg, Scheduler: sched, NetRate: 20, NetDivisor: 3}.resolve()
	require.NoError(t, err, "agreeing values")
	_, err = ServerConfig{Registry: reg, Scheduler: sched, NetRate: 30}.resolve()
	require.ErrorContains(t, err, "NetRate 30 disagrees with its Scheduler's 20")
	_, err = ServerConfig{Registry: reg, Scheduler: sched, Tick: func() uint32 { return 0 }}.resolve()
	require.ErrorContains(t, err, "Tick and Scheduler are both set")
	w2 := arche.NewWorld()
	odd, err := ecs.New(&w2, ecs.Config{TickRate: 50, NetDivisor: 3})
	require.NoError(t, err)
	_, err = ServerConfig{Registry: reg, Scheduler: odd}.resolve()
	require.ErrorContains(t, err, "not a multiple")
}
