package pagegame

import (
	"errors"
	"log/slog"

	arche "github.com/mlange-42/arche/ecs"

	"github.com/archenet/archenet/input"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/replication/replicationtest"
	"github.com/archenet/archenet/transport"
)

// Client is one side of the game: its own world mirrors the server's; a player's
// body is predicted (Player), a watcher only mirrors (Player nil). Its connection
// records the snapshot datagrams of the first ticks (Recorder).
type Client struct {
	World    *arche.World
	Net      *replication.Client
	Player   *input.Player[Body, Move]
	Recorder *replicationtest.Recorder
}

// NewClient joins the server at the other end of conn and sends the Hello; sample
// is the player's input (nil: a watcher). It records the first maxTicks snapshot
// ticks. tweak, if given, adjusts the client's configuration.
func NewClient(conn transport.Conn, sample func(uint32, *Body) Move, maxTicks int, logger *slog.Logger, tweak ...func(*replication.ClientConfig)) (*Client, error) {
	w := arche.NewWorld()
	c := &Client{World: &w, Recorder: replicationtest.NewRecorder(conn, maxTicks)}
	cfg := replication.ClientConfig{Registry: Registry(), Logger: logger}
	for _, f := range tweak {
		f(&cfg)
	}
	var err error
	if c.Net, err = replication.NewClient(&w, c.Recorder, cfg); err != nil {
		return nil, err
	}
	if sample != nil {
		if c.Player, err = input.NewPlayer(c.Net, input.PlayerConfig[Body, Move]{Step: Step, Sample: sample}); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Frame runs one client frame: receive, then predict and send (a player) or ack
// (a watcher). It returns the client's error once it is disconnected.
func (c *Client) Frame() error {
	c.Net.Receive()
	if c.Net.State() == replication.StateClosed {
		if err := c.Net.Err(); err != nil {
			return err
		}
		return errors.New("pagegame: disconnected")
	}
	if c.Player != nil {
		return c.Player.Update()
	}
	c.Net.Send()
	return nil
}

// Converged runs replicationtest.Converged on the client's world against the
// server's state s (every entity is relevant: the server has no interest).
func (c *Client) Converged(s replicationtest.State) error {
	w, ids, err := s.World(Registry())
	if err != nil {
		return err
	}
	return replicationtest.Converged(replicationtest.Check{Registry: Registry(), Server: w, NetID: ids, Client: c.World, Me: c.Net.ID()})
}
