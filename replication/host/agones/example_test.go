package agones_test

import (
	"context"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/archenet/archenet/replication/host"
	"github.com/archenet/archenet/replication/host/agones"
	"github.com/archenet/archenet/transport"
)

// A game server process under Agones: matches open when the GameServer is
// allocated, players are tracked, SIGTERM drains, and the sidecar is told
// to shut down when the last match has ended. (Not run: it needs the
// sidecar; see TestAgonesLifecycle.)
func ExampleDriver_Run() {
	var l transport.Listener // quic.Listen(":7777", ...)
	start := func(m *host.Match) (host.Game, error) {
		return nil, nil // the game's world and replication.NewServer(world, m.Listener(), cfg)
	}

	var d *agones.Driver
	h, err := host.New(l, host.Config{OnPlayer: func(e host.PlayerEvent) { d.OnPlayer(e) }})
	if err != nil {
		log.Fatal(err)
	}
	d, err = agones.New(agones.Config{
		Capacity: 16,
		Open: func(name string) error {
			_, err := h.Open(name, host.MatchConfig{Start: start, FrameRate: 60})
			return err
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	go func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM)
		<-sig
		h.Drain("server shutting down", time.Now().Add(30*time.Second))
	}()
	if err := d.Run(context.Background(), h); err != nil {
		log.Fatal(err)
	}
}
