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
	"github.com/archenet/archenet/replication/host/token"
	"github.com/archenet/archenet/transport"
)

// A game server process under Agones: matches open when the GameServer is
// allocated (counted in its rooms counter), players are tracked (and
// listed), connect tokens name the address Agones gives, the GameServer is
// Ready again when its matches have ended, SIGTERM drains, and the sidecar
// is told to shut down when the last match has ended. (Not run: it needs the
// sidecar; see TestAgonesRooms.)
func ExampleDriver_Run() {
	var l transport.Listener // quic.Listen(":7777", ...)
	var key token.Key        // token.ParseKey(os.Getenv("TOKEN_KEY")): the matchmaker's
	start := func(m *host.Match) (host.Game, error) {
		return nil, nil // the game's world and replication.NewServer(world, m.Listener(), cfg)
	}

	// The driver first (it needs no host until Run): it opens the matches
	// allocations name, and the host's hooks report to it.
	d, err := agones.New(agones.Config{
		Capacity: 16,
		OpenMatch: func(h *host.Host, name string) error {
			_, err := h.Open(name, host.MatchConfig{Start: start, FrameRate: 60})
			return err
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	// Connect tokens name the server by the address Agones gives it.
	addr, err := d.Address(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	self, err := addr.Endpoint("default")
	if err != nil {
		log.Fatal(err)
	}
	tokens, err := token.NewVerifier(token.VerifierConfig{Keys: map[uint32]token.Key{1: key}, Addresses: []string{self}})
	if err != nil {
		log.Fatal(err)
	}
	hc := host.Config{Tokens: tokens}
	d.Configure(&hc)
	h, err := host.New(l, hc)
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
