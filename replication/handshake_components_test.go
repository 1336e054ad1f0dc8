package replication_test

import (
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/replication/schema"
	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/sim"
	"github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/require"
)

type avatarXZ struct {
	X float32 `net:"range=0:100,step=0.1"`
	Z float32 `net:"range=0:100,step=0.1"`
}

type avatarXY struct {
	X float32 `net:"range=0:100,step=0.1"`
	Y float32 `net:"range=0:100,step=0.1"`
}

type avatarXZFine struct {
	X float32 `net:"range=0:100,step=0.01"`
	Z float32 `net:"range=0:100,step=0.1"`
}

type projectile struct {
	Speed float32 `net:"range=0:100,step=0.1"`
}

type foo struct {
	N int32
}

// join connects a client with registry creg to a server with registry sreg
// over the simulated transport and returns the client's error.
func join(t *testing.T, sreg, creg *schema.Registry) error {
	t.Helper()
	net := sim.NewNetwork(1, time.Unix(1000, 0))
	sw, cw := ecs.NewWorld(), ecs.NewWorld()
	server, err := replication.NewServer(&sw, net.Listen("game"), replication.ServerConfig{Registry: sreg, Now: net.Now, Logger: discardLog})
	require.NoError(t, err)
	conn, err := net.Dial("game", sim.Link{})
	require.NoError(t, err)
	client, err := replication.NewClient(&cw, conn, replication.ClientConfig{Registry: creg, Now: net.Now, Logger: discardLog})
	require.NoError(t, err)
	for range 10 {
		server.Receive()
		server.Send()
		net.Advance(time.Second / 30)
		client.Receive()
		client.Send()
	}
	require.Equal(t, 1, server.Stats.Rejected)
	return client.Err()
}

func registry(t *testing.T, reg func(r *schema.Registry)) *schema.Registry {
	t.Helper()
	r := schema.NewRegistry()
	schema.MustRegister[components.Transform](r)
	reg(r)
	return r
}

func requireHashMismatch(t *testing.T, err error, want ...string) {
	t.Helper()
	require.Error(t, err)
	var he *transport.HandshakeError
	require.ErrorAs(t, err, &he)
	require.Equal(t, transport.HandshakeHashMismatch, he.Kind)
	msg := err.Error()
	require.True(t, strings.HasPrefix(msg, "protocol hash mismatch: server 0x"), msg)
	for _, w := range want {
		require.Contains(t, msg, w)
	}
	require.Equal(t, 1, strings.Count(msg, "protocol hash mismatch"), msg)
	require.NotContains(t, msg, "rejected by server")
}

// A client whose registry differs from the server's in one component's
// fields learns which component, with both sides' fields.
func TestHashMismatchNamesTheComponent(t *testing.T) {
	sreg := registry(t, func(r *schema.Registry) { schema.MustRegister[avatarXZ](r, schema.WithName("Avatar")) })
	creg := registry(t, func(r *schema.Registry) { schema.MustRegister[avatarXY](r, schema.WithName("Avatar")) })
	err := join(t, sreg, creg)
	t.Log(err)
	requireHashMismatch(t, err, `component 1 differs: server "Avatar" (fields X,Z) vs client "Avatar" (fields X,Y)`)
	require.NotContains(t, err.Error(), "Transform")

	// Same fields, other precision.
	creg = registry(t, func(r *schema.Registry) { schema.MustRegister[avatarXZFine](r, schema.WithName("Avatar")) })
	requireHashMismatch(t, join(t, sreg, creg), `component 1 differs: "Avatar" has the same fields (X,Z) on both sides but other precision`)
}

func TestHashMismatchNamesExtraAndMissingComponents(t *testing.T) {
	sreg := registry(t, func(r *schema.Registry) {
		schema.MustRegister[avatarXZ](r, schema.WithName("Avatar"))
		schema.MustRegister[foo](r, schema.WithName("Foo"))
	})
	creg := registry(t, func(r *schema.Registry) { schema.MustRegister[avatarXZ](r, schema.WithName("Avatar")) })
	requireHashMismatch(t, join(t, sreg, creg), `client lacks component "Foo" (server component 2)`)
	requireHashMismatch(t, join(t, creg, sreg), `server lacks component "Foo" (client component 2)`)

	// Another component at the same id.
	preg := registry(t, func(r *schema.Registry) { schema.MustRegister[projectile](r, schema.WithName("Projectile")) })
	requireHashMismatch(t, join(t, preg, creg), `component 1: server registers "Projectile" where the client registers "Avatar"`)

	// The same components in another order.
	oreg := registry(t, func(r *schema.Registry) {
		schema.MustRegister[foo](r, schema.WithName("Foo"))
		schema.MustRegister[avatarXZ](r, schema.WithName("Avatar"))
	})
	requireHashMismatch(t, join(t, sreg, oreg), `component 1: server registers "Avatar" where the client registers "Foo" (registration order differs)`)
}

var discardLog = slog.New(slog.NewTextHandler(io.Discard, nil))
