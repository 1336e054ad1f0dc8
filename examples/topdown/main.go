package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	arche "github.com/mlange-42/arche/ecs"

	"github.com/archenet/archenet/ecs"
	"github.com/archenet/archenet/transport/quic"
)

func main() {
	bots := flag.Int("bots", 4, "bot players")
	dur := flag.Duration("duration", 10*time.Second, "how long to play")
	flag.Parse()
	if err := play(*bots, *dur, func(s string) { fmt.Println(s) }); err != nil {
		fmt.Fprintln(os.Stderr, "topdown:", err)
		os.Exit(1)
	}
}

// play runs a server and n bots over QUIC on loopback for d, reporting each
// second.
func play(n int, d time.Duration, report func(string)) error {
	cert, err := quic.GenerateDevCert(time.Hour)
	if err != nil {
		return err
	}
	// The bots connect from this machine at once: no bound on pending
	// connections per address (it guards a public server).
	ln, err := quic.Listen("127.0.0.1:0", &quic.Config{TLS: cert.ServerTLS(), MaxPendingPerAddress: -1})
	if err != nil {
		return err
	}
	srv, err := NewServer(ln)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	done := make(chan error, n+1)
	// Each world runs on its own goroutine; the server reports once a second.
	srv.Sched.AddNetSystem(ecs.Func(func(*arche.World) {
		if srv.Sched.Info().Tick%SimRate == 0 {
			report(fmt.Sprintf("players %d, coins picked %d, tags %d, greetings %d, snapshots %.1f KB, messages %d (%.1f KB)", len(srv.Net.Clients()), srv.Picked, srv.Hits, srv.Greets,
				float64(srv.Net.Stats.SnapshotBytes)/1024, srv.Net.Stats.MessagesOut, float64(srv.Net.Stats.MessageBytes)/1024))
		}
	}))
	go func() { done <- srv.Sched.Run(ctx, ecs.RealClock{}) }() // closes the server at the end
	clients := make([]*Client, n)
	for i := range clients {
		conn, err := quic.Dial(ctx, ln.Addr().String(), &quic.Config{TLS: cert.ClientTLS()})
		if err != nil {
			return err
		}
		if clients[i], err = NewClient(conn, Bot(uint64(i))); err != nil {
			return err
		}
		go func(c *Client) { done <- c.Sched.Run(ctx, ecs.RealClock{}); c.Net.Close() }(clients[i])
	}
	for range n + 1 {
		<-done
	}
	return nil
}
