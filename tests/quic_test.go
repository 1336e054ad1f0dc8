package tests

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/replication/schema"
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

	h := &harness{t: t, reg: newRegistry()}
	sw := ecs.NewWorld()
	h.sw = &sw
	srv, err := replication.NewServer(h.sw, l, replication.ServerConfig{Registry: h.reg, NetRate: netRate, Logger: quiet})
	require.NoError(t, err)
	h.srv = srv
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := 0; i < 2; i++ {
		conn, err := quic.Dial(ctx, l.Addr().String(), &quic.Config{TLS: cert.ClientTLS()})
		require.NoError(t, err)
		w := ecs.NewWorld()
		c, err := replication.NewClient(&w, conn, replication.ClientConfig{Registry: h.reg, Logger: quiet})
		require.NoError(t, err)
		h.clients = append(h.clients, &clientSide{w: &w, c: c})
	}
	rng := rand.New(rand.NewPCG(4, 4))
	ents := make([]ecs.Entity, 100)
	for i := range ents {
		ents[i] = h.spawn(0, components.Vec3{X: rng.Float64() * 50})
	}
	step := func() {
		h.srv.Receive()
		if h.game != nil {
			h.game(0)
		}
		h.srv.Send()
		time.Sleep(2 * time.Millisecond) // let the sockets move
		for _, c := range h.clients {
			c.c.Receive()
			c.c.Send()
		}
	}
	until := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			require.NoError(t, ctx.Err(), "waiting for %s", what)
			step()
		}
	}
	until("clients ready", func() bool { return h.clients[0].c.Ready() && h.clients[1].c.Ready() })
	convergedAll := func() bool { return h.converged(0, nil) == nil && h.converged(1, nil) == nil }
	until("initial convergence", convergedAll)

	moves := 0
	h.game = func(int) {
		if moves < 60 {
			moves++
			for _, e := range ents[:30] {
				h.pos(e).Z += 0.25
			}
		}
	}
	h.sw.RemoveEntity(ents[99])
	h.spawn(0, components.Vec3{Y: 3})
	until("movement done", func() bool { return moves >= 60 })
	until("convergence after movement", convergedAll)
	for _, c := range h.clients {
		require.Greater(t, c.c.Stats.Datagrams, uint64(10))
	}

	// A client built with a different registry is refused with a clear error
	// on both sides.
	other := schema.NewRegistry()
	schema.MustRegister[components.Transform](other)
	conn, err := quic.Dial(ctx, l.Addr().String(), &quic.Config{TLS: cert.ClientTLS()})
	require.NoError(t, err)
	w := ecs.NewWorld()
	bad, err := replication.NewClient(&w, conn, replication.ClientConfig{Registry: other, Logger: quiet})
	require.NoError(t, err)
	rejected := h.srv.Stats.Rejected
	for bad.State() != replication.StateClosed {
		require.NoError(t, ctx.Err())
		step()
		bad.Receive()
	}
	var he *transport.HandshakeError
	require.True(t, errors.As(bad.Err(), &he), "%v", bad.Err())
	require.Contains(t, bad.Err().Error(), "protocol hash mismatch: server 0x")
	require.Equal(t, rejected+1, h.srv.Stats.Rejected)
	require.Len(t, h.srv.Clients(), 2, "the other clients are unaffected")
}
