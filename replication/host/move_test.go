package host

import (
	"context"
	"testing"
	"time"

	"github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/replication/schema"
)

// movingGame is a testGame that opens from a checkpoint when its match has
// one (Match.NewServer), and carries its frame count as its own state.
func movingGame(reg *schema.Registry, x float64, games map[string]*testGame) func(m *Match) (Game, error) {
	return func(m *Match) (Game, error) {
		w := ecs.NewWorld()
		g := &testGame{world: &w}
		srv, state, err := m.NewServer(&w, replication.ServerConfig{Registry: reg, NetRate: 30, Limits: replication.ServerLimits{MaxClientsPerAddress: -1}})
		if err != nil {
			return nil, err
		}
		g.srv = srv
		if state != nil {
			g.frames = int(state[0]) // (the game's own state: where it was)
			q := w.Query(ecs.All(ecs.ComponentID[components.Replicated](&w)))
			for q.Next() {
				g.e = q.Entity()
			}
		} else {
			idR, idT := ecs.ComponentID[components.Replicated](&w), ecs.ComponentID[components.Transform](&w)
			g.e = w.NewEntity(idR, idT)
			tr := (*components.Transform)(w.Get(g.e, idT))
			tr.Pos.X, tr.Rot = x, components.QuatIdentity()
		}
		games[m.Name()] = g
		return &checkpointingGame{g}, nil
	}
}

type checkpointingGame struct{ *testGame }

func (g *checkpointingGame) CheckpointState() ([]byte, error) { return []byte{byte(g.frames)}, nil }

// TestMoveMatch: a match moves to another host: its checkpoint (with the
// game's own state) opens it there, MoveTo tells the players, each resumes
// its seat on the new host (the same client id, the entity where it was),
// the match here ends once they have gone, and the other match here goes
// on. The new host's players are the same players.
func TestMoveMatch(t *testing.T) {
	r := newRig(t, nil)
	hb, err := New(r.net.Listen("host-b"), Config{Manual: true, Now: r.net.Now, Logger: quiet, OnPlayer: func(e PlayerEvent) {
		if e.Joined {
			r.events = append(r.events, e)
		}
	}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = hb.Close() })
	ma, err := r.h.Open("duel", MatchConfig{Start: movingGame(r.reg, 4, r.games), FrameRate: 30})
	require.NoError(t, err)
	r.open("other", 9)
	c1 := r.dial(func(c *replication.ClientConfig) { c.Match = "duel" })
	c2 := r.dial(func(c *replication.ClientConfig) { c.Match = "duel" })
	co := r.dial(func(c *replication.ClientConfig) { c.Match = "other" })
	r.run(10)
	ids := []replication.ClientID{c1.c.ID(), c2.c.ID()}
	require.True(t, c1.c.Ready() && c2.c.Ready() && co.c.Ready())

	// The checkpoint is taken at the match's next frame (here: the next Step).
	got := make(chan []byte, 1)
	go func() {
		cp, err := ma.Checkpoint(context.Background())
		if err != nil {
			t.Error(err)
		}
		got <- cp
	}()
	var cp []byte
	for cp == nil {
		r.step()
		select {
		case cp = <-got:
		default:
		}
	}
	gamesB := map[string]*testGame{}
	_, err = hb.Open("duel", MatchConfig{Start: movingGame(r.reg, 0, gamesB), FrameRate: 30, Checkpoint: cp})
	require.NoError(t, err)
	require.Greater(t, gamesB["duel"].frames, 0, "the game's own state came along")
	ma.MoveTo("host-b", "the pod is replaced", time.Time{})
	stepBoth := func() {
		hb.Step()
		r.step()
		for _, c := range []*testClient{c1, c2} {
			if d, ok := c.c.Draining(); ok && d.Address != "" && c.c.Stats.Resumes == 0 {
				conn, err := r.net.DialFrom(d.Address, "roaming", simLink())
				require.NoError(t, err)
				c.conn = conn
				require.NoError(t, c.c.Resume(conn))
			}
		}
	}
	for range 15 {
		stepBoth()
	}
	for i, c := range []*testClient{c1, c2} {
		require.Equal(t, replication.StateReady, c.c.State(), "%v", c.c.Err())
		require.Equal(t, ids[i], c.c.ID(), "the same seat")
		require.Equal(t, 4.0, c.x(), "the entity where it was")
	}
	select {
	case <-ma.Ended():
	default:
		t.Fatal("the moved match did not end once its players had gone")
	}
	_, open := r.h.Match("other")
	require.True(t, open, "the other match goes on")
	require.True(t, co.c.Ready())
	mb, ok := hb.Match("duel")
	require.True(t, ok)
	for _, id := range ids {
		_, ok := mb.Player(id)
		require.True(t, ok, "client %d is a player of the new host", id)
	}
	require.Equal(t, 2, gamesB["duel"].srv.Stats.Resumed)
}
