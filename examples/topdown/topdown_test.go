package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/replication/replicationtest"
	"github.com/archenet/archenet/transport/quic"
)

// The game over QUIC on loopback: two bots play for two seconds, then let
// go of their keys; every client converges on the server's state, and its
// prediction matched the server except where the server knew more (coins
// picked up raise the score).
func TestTopdownOverQUIC(t *testing.T) {
	cert, err := quic.GenerateDevCert(time.Hour)
	require.NoError(t, err)
	ln, err := quic.Listen("127.0.0.1:0", &quic.Config{TLS: cert.ServerTLS()})
	require.NoError(t, err)
	srv, err := NewServer(ln)
	require.NoError(t, err)
	defer srv.Sched.Close()
	playing := true
	var clients []*Client
	for i := range 2 {
		conn, err := quic.Dial(t.Context(), ln.Addr().String(), &quic.Config{TLS: cert.ClientTLS()})
		require.NoError(t, err)
		bot := Bot(uint64(i))
		c, err := NewClient(conn, func(tick uint32, b *Body) Move {
			if !playing {
				return Move{}
			}
			return bot(tick, b)
		})
		require.NoError(t, err)
		defer c.Net.Close()
		clients = append(clients, c)
	}
	// Every world is stepped from this goroutine, paced by real time (QUIC
	// runs in real time).
	frames := func(limit time.Duration, done func() bool) bool {
		last := time.Now()
		tick := time.NewTicker(4 * time.Millisecond)
		defer tick.Stop()
		for end := last.Add(limit); time.Now().Before(end); <-tick.C {
			now := time.Now()
			srv.Sched.Advance(now.Sub(last))
			for _, c := range clients {
				c.Sched.Advance(now.Sub(last))
			}
			last = now
			if done != nil && done() {
				return true
			}
		}
		return false
	}
	converged := func() bool {
		for _, c := range clients {
			err := replicationtest.Converged(replicationtest.Check{Registry: Registry(), Server: srv.World, NetID: srv.Net.NetID, Client: c.World, Me: c.Net.ID()})
			if err != nil {
				return false
			}
		}
		return true
	}
	require.True(t, frames(10*time.Second, func() bool { return len(srv.Net.Clients()) == 2 && clients[0].Net.Ready() && clients[1].Net.Ready() }))
	frames(2*time.Second, nil)
	playing = false
	require.True(t, frames(5*time.Second, converged), "clients converge once the bots stop")
	for i, c := range clients {
		st := c.Player.Stats()
		t.Logf("client %d: %d input ticks, %d matches, %d corrections (max %d steps), %d resets; coins picked by all: %d",
			i, st.InputTicks, st.Matches, st.Corrections, st.MaxError, st.Resets, srv.Picked)
		require.Greater(t, st.InputTicks, uint64(100))
		require.Greater(t, st.Matches, uint64(20), "the prediction matches the server")
		require.LessOrEqual(t, st.Corrections, uint64(srv.Picked)+2, "corrections only where the server knew more")
		require.Equal(t, uint64(1), st.Resets, "one start from the first state")
	}
}
