package host

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/replication/host/token"
)

// TestResumeWithTokens: a player admitted by a connect token whose link
// dies comes back to its seat on a new connection without a token (the
// Hello's ticket is its credential, and names the match): the host routes
// it by the match's name, the game's player is the same (its token's
// claims; no leave, no join), and its seat counts while suspended.
func TestResumeWithTokens(t *testing.T) {
	r, key := newTokenRig(t)
	r.open("duel", 3)
	tok, err := token.NewMinter(1, key).Mint(token.Claims{Match: "duel", ClientID: 77, Expires: r.net.Now().Add(time.Minute), Servers: []string{"game.example:7777"}})
	require.NoError(t, err)
	p := r.dial(func(c *replication.ClientConfig) { c.Token = tok })
	r.run(10)
	require.True(t, p.c.Ready(), "%v", p.c.Err())
	require.Len(t, r.events, 1)
	require.Equal(t, "77", r.events[0].Player.ID)

	p.conn.SetLinkDown(true)
	r.run(int(12 * time.Second / frameDt)) // (past the server's ClientTimeout: the seat is suspended)
	m, _ := r.h.Match("duel")
	require.Equal(t, []replication.ClientID{p.c.ID()}, r.games["duel"].srv.Suspended())
	pl, ok := m.Player(p.c.ID())
	require.True(t, ok, "a suspended seat is still the match's player")
	require.Equal(t, "77", pl.ID)

	conn, err := r.net.DialFrom("host", "roaming", simLink())
	require.NoError(t, err)
	p.conn = conn
	require.NoError(t, p.c.Resume(conn))
	r.run(10)
	require.Equal(t, replication.StateReady, p.c.State(), "%v", p.c.Err())
	require.Equal(t, 3.0, p.x())
	require.Len(t, r.events, 1, "no leave, no join: %v", r.events)
	require.Equal(t, 1, r.games["duel"].srv.Stats.Resumed)

	// The same token cannot join a second player: it was spent.
	again := r.dial(func(c *replication.ClientConfig) { c.Token = tok })
	r.run(5)
	require.ErrorIs(t, again.c.Err(), token.ErrReplayed)
}
