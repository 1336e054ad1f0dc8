package main

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/examples/arena/game"
	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/netem"
	"github.com/archenet/archenet/transport/quic"
	"github.com/archenet/archenet/transport/websocket"
)

// A predicted player over the WebSocket fallback under 1% loss each way and a
// 50 ms round trip (TCP through netem.ListenTCP: a lost chunk arrives a
// retransmission later and holds up what follows), beside one over QUIC
// through the same impairment and one over clean QUIC, for 10 s of play in
// real time: the figures the WebSocket costs (bytes, corrections per second,
// snapshot age and stale fraction) against QUIC's, and bounds that a stalled
// or diverging player would break.
func TestArenaWebSocketUnderLoss(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("real time: run without -short and the race detector (.ci/run does)")
	}
	t.Setenv("QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING", "true")
	cert, err := quic.GenerateDevCert(time.Hour)
	require.NoError(t, err)
	ql, err := quic.Listen("127.0.0.1:0", &quic.Config{TLS: cert.ServerTLS(), Logger: quiet})
	require.NoError(t, err)
	wl, err := websocket.Listen("127.0.0.1:0", &websocket.Config{Logger: quiet})
	require.NoError(t, err)
	srv, err := game.NewServerGame(game.ServerOptions{Listener: transport.MergeListeners(ql, wl), NPCs: 24, Seed: 7, Logger: quiet, MaxClientsPerAddress: -1})
	require.NoError(t, err)
	defer srv.Close()
	a := &Arena{Server: srv}
	path := netem.Conditions{Latency: 25 * time.Millisecond, Loss: 0.01}
	udp, err := netem.Listen(ql.Addr().String(), 11)
	require.NoError(t, err)
	defer udp.Close()
	udp.SetConditions(path, path)
	tcp, err := netem.ListenTCP(wl.Addr().String(), 11)
	require.NoError(t, err)
	defer tcp.Close()
	tcp.SetConditions(path, path)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	names := []string{"QUIC, clean", "QUIC, 1% loss", "WebSocket, 1% loss"}
	var conns []transport.Conn
	for _, addr := range []string{ql.Addr().String(), udp.Addr().String()} {
		c, err := quic.Dial(ctx, addr, &quic.Config{TLS: cert.ClientTLS(), Logger: quiet})
		require.NoError(t, err)
		conns = append(conns, c)
	}
	wc, err := websocket.Dial(ctx, "ws://"+tcp.Addr().String()+websocket.DefaultPath, &websocket.Config{Logger: quiet})
	require.NoError(t, err)
	conns = append(conns, wc)
	for i, c := range conns {
		b, err := game.NewBot(game.BotOptions{Conn: c, Seed: uint64(700 + i), Logger: quiet})
		require.NoError(t, err)
		defer b.Close()
		a.Bots = append(a.Bots, b)
	}
	tk := time.NewTicker(simFrame)
	defer tk.Stop()
	frame := func() { require.NoError(t, a.Frame(<-tk.C)) }
	for time.Since(a.start) < 3*time.Second || a.start.IsZero() { // joined and settled
		frame()
	}
	type mark struct {
		bytes uint64
		st    game.BotStats
		ages  []int
	}
	marks := make([]mark, len(a.Bots))
	for i, b := range a.Bots {
		marks[i] = mark{bytes: b.BytesIn(), st: b.Stats()}
	}
	start := time.Now()
	net := srv.Replication()
	for time.Since(start) < 10*time.Second {
		frame()
		for i, b := range a.Bots {
			marks[i].ages = append(marks[i].ages, int(net.Tick()-b.Client().ServerTick()))
		}
	}
	secs := time.Since(start).Seconds()
	for i, b := range a.Bots {
		m, st := marks[i], b.Stats()
		ages := slices.Clone(m.ages)
		slices.Sort(ages)
		stale := 0
		for _, x := range ages {
			if x > 4 { // (the path's round trip is under 2 net ticks: older is a stall)
				stale++
			}
		}
		staleFrac := float64(stale) / float64(len(ages))
		corr := float64(st.Corrections-m.st.Corrections) / secs
		inputCorr := float64(st.InputCorrections-m.st.InputCorrections) / secs
		t.Logf("%s: %.1f KB/s down; corrections %.2f/s (input path %.2f/s), largest %.2f m; newest snapshot age median %d net ticks, p99 %d, max %d; stale (over 4) %.1f%%; %d snapshots",
			names[i], float64(b.BytesIn()-m.bytes)/1024/secs, corr, inputCorr, st.MaxCorrection, ages[len(ages)/2], ages[len(ages)*99/100], ages[len(ages)-1], 100*staleFrac, st.Snapshots-m.st.Snapshots)
		require.True(t, b.Client().Ready(), "%s: %v", names[i], b.Client().Err())
		require.Less(t, staleFrac, 0.25, "%s: stale a quarter of the time", names[i])
		require.Less(t, ages[len(ages)/2], 4, "%s: the median age is a stall", names[i])
	}
	up, down := tcp.Stats()
	t.Logf("TCP proxy: %d and %d chunks, %d and %d retransmitted (up, down)", up.Chunks, down.Chunks, up.Retransmitted, down.Retransmitted)
}
