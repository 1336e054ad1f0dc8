package sockets_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/replication/replicationtest"
	"github.com/archenet/archenet/tests/internal/harness"
	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/netem"
	"github.com/archenet/archenet/transport/quic"
	"github.com/archenet/archenet/transport/websocket"
	"github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/require"
)

// What the WebSocket fallback costs against QUIC on a 50 ms round trip with
// 1% loss each way (transport/netem: UDP for QUIC, its TCP proxy for the
// WebSocket, whose lost segments hold up what follows): 10 s of 100
// entities moving every tick, one client on each. Both keep every mirror
// equal to the server's state at the tick it shows
// (replicationtest.History) and converge once the world stops; the figures
// (bytes, snapshot age, stale share) are logged. The bound on staleness is
// generous: a stall, not a timing.
func TestWebSocketAgainstQUICUnderLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("10 s of real time")
	}
	h, cert, ql, wl := mixedMatch(t)
	cond := netem.Conditions{Latency: 25 * time.Millisecond, Loss: 0.01}
	udp, err := netem.Listen(ql.Addr().String(), 7)
	require.NoError(t, err)
	defer udp.Close()
	udp.SetConditions(cond, cond)
	tcp, err := netem.ListenTCP(wl.Addr().String(), 7)
	require.NoError(t, err)
	defer tcp.Close()
	tcp.SetConditions(cond, cond)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	qc, err := quic.Dial(ctx, udp.Addr().String(), &quic.Config{TLS: cert.ClientTLS(), Logger: harness.Quiet})
	require.NoError(t, err)
	wc, err := websocket.Dial(ctx, "ws://"+tcp.Addr().String()+websocket.DefaultPath, &websocket.Config{Logger: harness.Quiet})
	require.NoError(t, err)
	for _, conn := range []transport.Conn{qc, wc} {
		w := ecs.NewWorld()
		c, err := replication.NewClient(&w, conn, replication.ClientConfig{Registry: h.Registry, Logger: harness.Quiet})
		require.NoError(t, err)
		h.Clients = append(h.Clients, &harness.ClientSide{World: &w, Client: c})
	}
	rng := rand.New(rand.NewPCG(9, 9))
	var ents []ecs.Entity
	for range 100 {
		ents = append(ents, h.Spawn(0, components.Vec3{X: rng.Float64() * 50, Z: rng.Float64() * 50}))
	}
	hist := replicationtest.NewHistory(h.Registry, 64)
	moving := false
	tickEvery := time.Second / harness.NetRate
	next := time.Now()
	ages := make([][]int, 2)
	step := func() {
		h.Server.Receive()
		if moving {
			for _, e := range ents {
				p := h.Pos(e)
				p.X += rng.Float64() - 0.5
				p.Z += rng.Float64() - 0.5
			}
		}
		h.Server.Send()
		require.NoError(t, hist.Record(h.World, h.Server.NetID, h.Server.Tick()))
		next = next.Add(tickEvery)
		for time.Now().Before(next) { // the clients run between the server's ticks
			for _, c := range h.Clients {
				c.Client.Receive()
				c.Client.Send()
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	for !h.Clients[0].Client.Ready() || !h.Clients[1].Client.Ready() {
		require.NoError(t, ctx.Err(), "waiting for both clients")
		step()
	}
	bytes0 := []uint64{h.Clients[0].Client.Stats.BytesIn, h.Clients[1].Client.Stats.BytesIn}
	moving = true
	start := time.Now()
	ticks := 0
	for time.Since(start) < 10*time.Second {
		step()
		ticks++
		for i, c := range h.Clients {
			ages[i] = append(ages[i], int(h.Server.Tick()-c.Client.ServerTick()))
			_, err := hist.Check(replicationtest.LiveCheck{Client: c.World, Me: c.Client.ID(), StateTick: c.Client.StateTick})
			require.NoError(t, err)
		}
	}
	secs := time.Since(start).Seconds()
	moving = false
	for !(h.Converged(0, nil) == nil && h.Converged(1, nil) == nil) {
		require.NoError(t, ctx.Err(), "waiting for convergence")
		step()
	}
	for i, name := range []string{"QUIC", "WebSocket"} {
		a := slices.Clone(ages[i])
		slices.Sort(a)
		stale := 0
		for _, x := range a {
			if x > 4 { // (the path's round trip is under 2 ticks: older is a stall)
				stale++
			}
		}
		kbs := float64(h.Clients[i].Client.Stats.BytesIn-bytes0[i]) / 1024 / secs
		t.Logf("%s: %.1f KB/s down over %d ticks; newest snapshot age median %d ticks, p99 %d, max %d; stale (over 4 ticks) %.1f%%",
			name, kbs, ticks, a[len(a)/2], a[len(a)*99/100], a[len(a)-1], 100*float64(stale)/float64(len(a)))
		require.Less(t, float64(stale)/float64(len(a)), 0.5, "%s: stale most of the time", name)
	}
	up, down := tcp.Stats()
	t.Logf("TCP proxy: %d and %d chunks, %d and %d retransmitted (up, down)", up.Chunks, down.Chunks, up.Retransmitted, down.Retransmitted)
}
