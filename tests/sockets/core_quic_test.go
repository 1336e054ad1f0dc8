package sockets_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/replication/schema"
	"github.com/archenet/archenet/tests/internal/harness"
	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/quic"
	"github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/require"
)

// TestCoreOverQUIC runs the core of the suite — spawn, movement, despawn,
// convergence, and a protocol-hash mismatch — over real QUIC on 127.0.0.1.
// Real sockets need real time: the loop steps the worlds and polls until a
// condition holds, bounded by a deadline.
func TestCoreOverQUIC(t *testing.T) {
	t.Setenv("QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING", "true")
	cert, err := quic.GenerateDevCert(time.Hour)
	require.NoError(t, err)
	l, err := quic.Listen("127.0.0.1:0", &quic.Config{TLS: cert.ServerTLS()})
	require.NoError(t, err)

	h := &harness.Harness{T: t, Registry: harness.NewRegistry()}
	sw := ecs.NewWorld()
	h.World = &sw
	srv, err := replication.NewServer(h.World, l, replication.ServerConfig{Registry: h.Registry, NetRate: harness.NetRate, Logger: harness.Quiet})
	require.NoError(t, err)
	h.Server = srv
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := 0; i < 2; i++ {
		conn, err := quic.Dial(ctx, l.Addr().String(), &quic.Config{TLS: cert.ClientTLS()})
		require.NoError(t, err)
		w := ecs.NewWorld()
		c, err := replication.NewClient(&w, conn, replication.ClientConfig{Registry: h.Registry, Logger: harness.Quiet})
		require.NoError(t, err)
		h.Clients = append(h.Clients, &harness.ClientSide{World: &w, Client: c})
	}
	rng := rand.New(rand.NewPCG(4, 4))
	ents := make([]ecs.Entity, 100)
	for i := range ents {
		ents[i] = h.Spawn(0, components.Vec3{X: rng.Float64() * 50})
	}
	step := func() {
		h.Server.Receive()
		if h.Game != nil {
			h.Game(0)
		}
		h.Server.Send()
		time.Sleep(2 * time.Millisecond) // let the sockets move
		for _, c := range h.Clients {
			c.Client.Receive()
			c.Client.Send()
		}
	}
	until := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			require.NoError(t, ctx.Err(), "waiting for %s", what)
			step()
		}
	}
	until("clients ready", func() bool { return h.Clients[0].Client.Ready() && h.Clients[1].Client.Ready() })
	convergedAll := func() bool { return h.Converged(0, nil) == nil && h.Converged(1, nil) == nil }
	until("initial convergence", convergedAll)

	moves := 0
	h.Game = func(int) {
		if moves < 60 {
			moves++
			for _, e := range ents[:30] {
				h.Pos(e).Z += 0.25
			}
		}
	}
	h.World.RemoveEntity(ents[99])
	h.Spawn(0, components.Vec3{Y: 3})
	until("movement done", func() bool { return moves >= 60 })
	until("convergence after movement", convergedAll)
	for _, c := range h.Clients {
		require.Greater(t, c.Client.Stats.Datagrams, uint64(10))
	}

	// A client built with a different registry is refused with a clear error
	// on both sides.
	other := schema.NewRegistry()
	schema.MustRegister[components.Transform](other)
	conn, err := quic.Dial(ctx, l.Addr().String(), &quic.Config{TLS: cert.ClientTLS()})
	require.NoError(t, err)
	w := ecs.NewWorld()
	bad, err := replication.NewClient(&w, conn, replication.ClientConfig{Registry: other, Logger: harness.Quiet})
	require.NoError(t, err)
	rejected := h.Server.Stats.Rejected
	for bad.State() != replication.StateClosed {
		require.NoError(t, ctx.Err())
		step()
		bad.Receive()
	}
	var he *transport.HandshakeError
	require.True(t, errors.As(bad.Err(), &he), "%v", bad.Err())
	require.Contains(t, bad.Err().Error(), "protocol hash mismatch: server 0x")
	require.Equal(t, rejected+1, h.Server.Stats.Rejected)
	require.Len(t, h.Server.Clients(), 2, "the other clients are unaffected")
}
