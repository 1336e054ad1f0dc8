package pagegame

import (
	"errors"
	"fmt"
	"log/slog"

	arche "github.com/mlange-42/arche/ecs"

	"github.com/archenet/archenet/components"
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
	// Msgs is what the client saw of the match's messages (Messages).
	Msgs   MessageStats
	msgs   *replication.ClientEndpoint[Event]
	pokes  *replication.ClientEndpoint[Poke]
	last   [2]uint32 // the newest Seq of streams 0 and 1
	frames int       // net ticks poked in
	poked  uint32    // the server tick of the last poke
}

// MessageStats counts a client's messages (Client.Messages): the Events of
// each stream received, the first violation of their promises seen (Err:
// a reliable event missing, twice or out of order; an unreliable one older
// than one before; an event about a mover the client does not see, or
// whose reference does not read as its mirror), and the Pokes sent.
type MessageStats struct {
	Reliable, Unreliable, Scoped uint64
	Err                          string
	Pokes                        uint64
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

// Messages has the client check the server's Events as they arrive and
// send a Poke naming a mover it sees once per server tick it receives
// (unreliable) and every 15th (reliable): 32 messages a second, within the
// server's allowance.
func (c *Client) Messages() error {
	var err error
	if c.msgs, err = replication.ClientMessages[Event](c.Net); err != nil {
		return err
	}
	if c.pokes, err = replication.ClientMessages[Poke](c.Net); err != nil {
		return err
	}
	c.msgs.Handle(c.onEvent)
	return nil
}

func (c *Client) onEvent(m replication.Message[Event]) {
	v := m.Value
	fail := func(format string, args ...any) {
		if c.Msgs.Err == "" {
			c.Msgs.Err = fmt.Sprintf(format, args...)
		}
	}
	switch v.Stream {
	case 0:
		if c.last[0] != 0 && v.Seq != c.last[0]+1 {
			fail("reliable event %d after %d", v.Seq, c.last[0])
		}
		c.last[0] = v.Seq
		c.Msgs.Reliable++
	case 1:
		if v.Seq <= c.last[1] {
			fail("unreliable event %d after %d", v.Seq, c.last[1])
		}
		c.last[1] = v.Seq
		c.Msgs.Unreliable++
	case 2:
		if Hidden(c.Net.ID(), int(v.Mover)) {
			fail("event about mover %d, which client %d does not see", v.Mover, c.Net.ID())
		}
		if e, ok := c.Net.Entity(v.About.ID); !ok || e != v.About.Entity {
			fail("event about mover %d: its reference does not read as its mirror", v.Mover)
		}
		c.Msgs.Scoped++
	}
}

// poke sends a Poke naming the first mover the client mirrors, once per
// server tick.
func (c *Client) poke() {
	t := c.Net.ServerTick()
	if t == c.poked {
		return
	}
	c.poked = t
	c.frames++
	idNet := arche.ComponentID[components.NetID](c.World)
	f := arche.All(arche.ComponentID[Body](c.World), idNet).Without(arche.ComponentID[components.Predicted](c.World))
	var mover arche.Entity
	for q := c.World.Query(&f); q.Next(); {
		if mover.IsZero() {
			mover = q.Entity()
		}
	}
	if mover.IsZero() {
		return
	}
	p := Poke{Seq: uint32(c.frames), Mover: components.RefTo(mover)}
	if c.pokes.Send(p, replication.Unreliable) == nil {
		c.Msgs.Pokes++
	}
	if c.frames%15 == 0 && c.pokes.Send(p, replication.Reliable) == nil {
		c.Msgs.Pokes++
	}
}

// Frame runs one client frame: receive, then predict and send (a player) or ack
// (a watcher). It returns the client's error once it is disconnected.
func (c *Client) Frame() error {
	c.Net.Receive()
	if c.pokes != nil && c.Net.Ready() {
		c.poke()
	}
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
// server's state s: every entity is relevant, but in a match with messages
// (Messages) the movers Hidden from this client.
func (c *Client) Converged(s replicationtest.State) error {
	w, ids, err := s.World(Registry())
	if err != nil {
		return err
	}
	check := replicationtest.Check{Registry: Registry(), Server: w, NetID: ids, Client: c.World, Me: c.Net.ID()}
	if c.msgs != nil {
		idPred := arche.ComponentID[components.Predicted](w)
		me := c.Net.ID()
		check.Relevance = func(e arche.Entity, id components.NetID) replicationtest.Need {
			if !w.Has(e, idPred) && Hidden(me, int(id.Index())) {
				return replicationtest.MustNot
			}
			return replicationtest.Must
		}
	}
	return replicationtest.Converged(check)
}
