package host

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/replication/host/token"
	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/sim"
)

// rejected requires that c was refused with code and a reason containing
// text.
func rejected(t *testing.T, c *testClient, code transport.CloseCode, text string) {
	t.Helper()
	require.Equal(t, replication.StateClosed, c.c.State())
	err := c.c.Err()
	var he *transport.HandshakeError
	require.ErrorAs(t, err, &he, "%v", err)
	require.Contains(t, err.Error(), text)
	require.Equal(t, code, transport.CodeOf(err), "%v", err)
}

// TestRouteByMatchName: without tokens, clients join the match their Hello
// names (or the default match); a name not open, none without a default,
// and another protocol version are refused, each saying why.
func TestRouteByMatchName(t *testing.T) {
	r := newRig(t, nil)
	r.open("a", 1)
	r.open("b", 2)
	ca := r.dial(func(c *replication.ClientConfig) { c.Match = "a" })
	cb := r.dial(func(c *replication.ClientConfig) { c.Match = "b" })
	cx := r.dial(func(c *replication.ClientConfig) { c.Match = "x" })
	none := r.dial(nil)
	r.run(10)
	require.True(t, ca.c.Ready())
	require.True(t, cb.c.Ready())
	require.Equal(t, 1.0, ca.x(), "client of a mirrors a's world")
	require.Equal(t, 2.0, cb.x(), "client of b mirrors b's world")
	rejected(t, cx, transport.CodeUnknownMatch, `rejected by server: unknown match "x"`)
	rejected(t, none, transport.CodeUnknownMatch, "no match named")
	require.Len(t, r.games["a"].srv.Clients(), 1)
	require.Len(t, r.games["b"].srv.Clients(), 1)

	st := r.h.Stats()
	require.Equal(t, uint64(4), st.Accepted)
	require.Equal(t, uint64(2), st.Routed)
	require.Equal(t, map[string]uint64{"unknown match": 2}, st.Refused)
	require.Equal(t, 2, st.Clients)
	require.Len(t, st.Matches, 2)
	require.Equal(t, uint64(1), st.Matches[0].Routed)
}

func TestDefaultMatch(t *testing.T) {
	r := newRig(t, func(c *Config) { c.DefaultMatch = "lobby" })
	r.open("lobby", 5)
	c := r.dial(nil)
	r.run(10)
	require.True(t, c.c.Ready())
	require.Equal(t, 5.0, c.x())
}

// TestRouteVersionAndMalformed: a Hello of another protocol version or one
// that does not parse is refused by the host with the server's version.
func TestRouteVersionAndMalformed(t *testing.T) {
	r := newRig(t, nil)
	r.open("a", 1)
	old, err := r.net.Dial("host", simLink())
	require.NoError(t, err)
	require.NoError(t, old.SendMessage(transport.Hello{Version: replication.ProtocolVersion - 1, ProtocolHash: 7, Match: "a"}.Append(nil)))
	junk, err := r.net.Dial("host", simLink())
	require.NoError(t, err)
	require.NoError(t, junk.SendMessage([]byte{byte(transport.MessageHello), 1}))
	r.run(3)
	for conn, want := range map[*simConn]string{old: "protocol version mismatch", junk: "malformed"} {
		m, ok := conn.PollMessage()
		require.True(t, ok)
		rj, err := transport.ParseReject(m)
		require.NoError(t, err)
		require.Equal(t, replication.ProtocolVersion, rj.Version)
		require.Contains(t, rj.Err(replication.ProtocolVersion-1, 7).Error()+rj.Reason, want)
	}
	require.Equal(t, map[string]uint64{"protocol version": 1, "malformed hello": 1}, r.h.Stats().Refused)
}

// newTokenRig is a rig whose host takes connect tokens sealed with key (id
// 1) for "game.example:7777".
func newTokenRig(t *testing.T) (*rig, token.Key) {
	key := token.NewKey()
	var r *rig
	r = newRig(t, func(c *Config) {
		v, err := token.NewVerifier(token.VerifierConfig{Keys: map[uint32]token.Key{1: key}, Addresses: []string{"game.example:7777"}, Now: func() time.Time { return r.net.Now() }})
		require.NoError(t, err)
		c.Tokens = v
	})
	return r, key
}

// TestTokens: with connect tokens, a valid token admits its player to the
// match it names (the game sees its claims); expired, wrong-key,
// replayed, unknown-match, wrong-server, truncated and oversized tokens
// are refused, each with its reason, and counted.
func TestTokens(t *testing.T) {
	r, key := newTokenRig(t)
	r.open("duel", 3)
	m := token.NewMinter(1, key)
	mint := func(tweak func(*token.Claims)) []byte {
		c := token.Claims{Match: "duel", ClientID: 77, UserData: []byte("red"), Expires: r.net.Now().Add(time.Minute), Servers: []string{"game.example:7777"}}
		if tweak != nil {
			tweak(&c)
		}
		tok, err := m.Mint(c)
		require.NoError(t, err)
		return tok
	}
	good := mint(nil)
	withToken := func(tok []byte) func(*replication.ClientConfig) {
		return func(c *replication.ClientConfig) { c.Token = tok; c.Match = "ignored" }
	}
	player := r.dial(withToken(good))
	cases := []struct {
		c    *testClient
		text string
		is   error
	}{
		{r.dial(withToken(mint(func(c *token.Claims) { c.Expires = r.net.Now().Add(-time.Second) }))), "connect token expired", token.ErrExpired},
		{r.dial(withToken(func() []byte {
			tok, _ := token.NewMinter(1, token.NewKey()).Mint(token.Claims{Match: "duel", Expires: r.net.Now().Add(time.Minute), Servers: []string{"game.example:7777"}})
			return tok
		}())), "not sealed with this server's key", token.ErrWrongKey},
		{r.dial(withToken(mint(func(c *token.Claims) { c.Match = "other" }))), `unknown match "other"`, token.ErrUnknownMatch},
		{r.dial(withToken(mint(func(c *token.Claims) { c.Servers = []string{"elsewhere:1"} }))), "connect token is for another server", token.ErrWrongServer},
		{r.dial(withToken(good[:len(good)-5])), "connect token malformed", token.ErrMalformed},
		{r.dial(withToken(make([]byte, transport.MaxTokenLen))), "connect token malformed", token.ErrMalformed},
		{r.dial(nil), "connect token malformed", token.ErrMalformed},
	}
	r.run(10)
	require.True(t, player.c.Ready())
	require.Equal(t, 3.0, player.x())
	id := player.c.ID()
	g := r.games["duel"]
	// The game sees who the player is.
	mt, _ := r.h.Match("duel")
	p, ok := mt.Player(id)
	require.True(t, ok)
	require.Equal(t, "77", p.ID)
	require.Equal(t, []byte("red"), p.Token.UserData)
	require.Len(t, g.srv.Clients(), 1)
	all := []error{token.ErrExpired, token.ErrWrongKey, token.ErrUnknownMatch, token.ErrWrongServer, token.ErrMalformed, token.ErrReplayed, token.ErrBusy}
	for i, tc := range cases {
		// The client's error says which refusal it was, for errors.Is: the
		// sentinel's close code came in the Reject.
		rejected(t, tc.c, transport.CodeOf(tc.is), tc.text)
		require.NotContains(t, tc.c.c.Err().Error(), "hash mismatch", "case %d", i)
		for _, other := range all {
			require.Equal(t, other == tc.is, errors.Is(tc.c.c.Err(), other), "case %d: errors.Is(%v, %v)", i, tc.c.c.Err(), other)
		}
	}
	// The same token again: replayed.
	again := r.dial(withToken(good))
	r.run(5)
	rejected(t, again, transport.CodeTokenReplayed, "connect token already used")
	require.ErrorIs(t, again.c.Err(), token.ErrReplayed)
	require.Equal(t, map[string]uint64{RefusedTokenExpired: 1, RefusedTokenWrongKey: 1, RefusedUnknownMatch: 1, RefusedTokenWrongServer: 1,
		RefusedTokenMalformed: 3, RefusedTokenReplayed: 1}, r.h.Stats().Refused)
}

// A client acts on a refusal by its kind (errors.Is and the code's
// Retryable), not its text: a token for a match that is not open yet is
// retried as it is once the match opens; an expired one is replaced by a new
// token first.
func TestTokenRetryDecision(t *testing.T) {
	r, key := newTokenRig(t)
	m := token.NewMinter(1, key)
	mint := func(match string, expires time.Time) []byte {
		tok, err := m.Mint(token.Claims{Match: match, ClientID: 5, Expires: expires, Servers: []string{"game.example:7777"}})
		require.NoError(t, err)
		return tok
	}
	// join dials with tok until it is in, deciding after each refusal as a
	// game's client would; it returns the decisions taken.
	join := func(tok []byte, renew func() []byte) (decisions []string) {
		for range 4 {
			c := r.dial(func(c *replication.ClientConfig) { c.Token = tok })
			r.run(5)
			if c.c.Ready() {
				return append(decisions, "joined")
			}
			err := c.c.Err()
			switch code := transport.CodeOf(err); {
			case code.Retryable():
				require.ErrorIs(t, err, token.ErrUnknownMatch)
				decisions = append(decisions, "retry the same token")
				r.open("later", 1) // (the match opens meanwhile)
			case errors.Is(err, token.ErrExpired):
				decisions = append(decisions, "ask for a new token")
				tok = renew()
			default:
				t.Fatalf("unexpected refusal: %v", err)
			}
		}
		return decisions
	}
	require.Equal(t, []string{"retry the same token", "joined"}, join(mint("later", r.net.Now().Add(time.Minute)), nil))
	require.Equal(t, []string{"ask for a new token", "joined"}, join(mint("later", r.net.Now().Add(-time.Second)),
		func() []byte { return mint("later", r.net.Now().Add(time.Minute)) }))
}

// A connect token admits one connection: a client that reconnects with its
// spent token is refused as replayed (not retryable), and one that
// reconnects with a new token rejoins.
func TestReconnectWithNewToken(t *testing.T) {
	r, key := newTokenRig(t)
	r.open("duel", 4)
	m := token.NewMinter(1, key)
	mint := func() []byte {
		tok, err := m.Mint(token.Claims{Match: "duel", ClientID: 9, Expires: r.net.Now().Add(time.Minute), Servers: []string{"game.example:7777"}})
		require.NoError(t, err)
		return tok
	}
	p := r.dial(func(c *replication.ClientConfig) { c.Token = mint() })
	r.run(5)
	require.True(t, p.c.Ready())
	redial := func() {
		var err error
		p.conn, err = r.net.Dial("host", sim.Link{})
		require.NoError(t, err)
	}
	redial()
	require.NoError(t, p.c.Reconnect(p.conn))
	r.run(5)
	err := p.c.Err()
	require.ErrorIs(t, err, token.ErrReplayed)
	require.False(t, transport.CodeOf(err).Retryable())
	redial()
	require.Error(t, p.c.ReconnectWithToken(p.conn, make([]byte, transport.MaxTokenLen+1)))
	require.NoError(t, p.c.ReconnectWithToken(p.conn, mint()))
	r.run(5)
	require.True(t, p.c.Ready(), "%v", p.c.Err())
	require.Equal(t, 4.0, p.x())
}

// A join that times out does not spend its token: neither a client that
// gave up before the match's server took its connection, nor one welcomed
// that never acknowledged a snapshot (dropped by the server's JoinTimeout).
// A token is spent once its player acknowledged a snapshot.
func TestTimedOutJoinKeepsToken(t *testing.T) {
	r, key := newTokenRig(t)
	r.open("duel", 5)
	tok, err := token.NewMinter(1, key).Mint(token.Claims{Match: "duel", ClientID: 3, Expires: r.net.Now().Add(time.Hour), Servers: []string{"game.example:7777"}})
	require.NoError(t, err)
	withToken := func(c *replication.ClientConfig) { c.Token = tok }
	g := r.games["duel"]

	// The match's server does not take connections for a while; the client
	// gives up.
	g.paused.Store(true)
	gaveUp := r.dial(withToken)
	r.run(5)
	require.False(t, gaveUp.c.Ready())
	require.NoError(t, gaveUp.conn.Close())
	r.clients = r.clients[:0]
	g.paused.Store(false)
	r.run(5)
	require.EqualValues(t, 1, r.h.Stats().TokensReleased)
	require.Len(t, r.events, 2, "welcomed, then gone (the server noticed the close after)")
	r.events = r.events[:0]

	// Welcomed, but it never acknowledges a snapshot: JoinTimeout (2 s).
	silent := r.dial(withToken)
	silent.c.Send()
	r.clients = r.clients[:0] // (never stepped again)
	r.run(int(4 * time.Second / frameDt))
	require.Len(t, r.events, 2, "joined, then dropped")
	require.False(t, r.events[1].Joined)
	require.EqualValues(t, 2, r.h.Stats().TokensReleased)

	// The token still admits, once the player acknowledged: then it is
	// spent.
	p := r.dial(withToken)
	r.run(10)
	require.True(t, p.c.Ready(), "%v", p.c.Err())
	require.Equal(t, 5.0, p.x())
	p.c.Close()
	r.run(5)
	again := r.dial(withToken)
	r.run(5)
	require.ErrorIs(t, again.c.Err(), token.ErrReplayed)
	require.EqualValues(t, 2, r.h.Stats().TokensReleased)
}

// TestDrainEndsWhenEmpty: a draining host refuses new clients with
// CodeDraining, tells the connected ones, ends each match when its last
// client leaves, and is done when no match is left — before the deadline.
func TestDrainEndsWhenEmpty(t *testing.T) {
	r := newRig(t, nil)
	r.open("a", 1)
	r.open("b", 2)
	ca := r.dial(func(c *replication.ClientConfig) { c.Match = "a" })
	cb := r.dial(func(c *replication.ClientConfig) { c.Match = "b" })
	r.run(10)
	require.True(t, ca.c.Ready() && cb.c.Ready())
	require.True(t, r.h.Admitting())

	deadline := r.net.Now().Add(time.Minute)
	r.h.Drain("update", deadline)
	require.False(t, r.h.Admitting())
	_, err := r.h.Open("c", MatchConfig{Start: startGame(r.reg, 3, nil)})
	require.ErrorIs(t, err, ErrDraining)
	late := r.dial(func(c *replication.ClientConfig) { c.Match = "a" })
	r.run(5)
	rejected(t, late, transport.CodeDraining, "rejected by server: server draining: update")
	for _, c := range []*testClient{ca, cb} {
		d, ok := c.c.Draining()
		require.True(t, ok)
		require.Equal(t, "update", d.Reason)
		require.WithinDuration(t, deadline, d.Deadline, time.Second)
	}
	// a's player leaves: a ends; b goes on.
	ca.c.Close()
	r.run(5)
	_, open := r.h.Match("a")
	require.False(t, open)
	require.Len(t, r.h.Matches(), 1)
	require.True(t, r.games["a"].closed.Load())
	select {
	case <-r.h.Done():
		t.Fatal("done with a match left")
	default:
	}
	cb.c.Close()
	r.run(5)
	select {
	case <-r.h.Done():
	default:
		t.Fatal("not done once every match ended")
	}
	require.True(t, r.net.Now().Before(deadline))
}

// TestDrainDeadline: matches whose clients stay are ended at the deadline,
// their clients told so with CodeDraining; then the host is done.
func TestDrainDeadline(t *testing.T) {
	r := newRig(t, nil)
	r.open("a", 1)
	ca := r.dial(func(c *replication.ClientConfig) { c.Match = "a" })
	r.run(10)
	deadline := r.net.Now().Add(2 * time.Second)
	r.h.Drain("update", deadline)
	for r.net.Now().Before(deadline) {
		r.step()
		require.Equal(t, replication.StateReady, ca.c.State(), "the match goes on until the deadline")
	}
	r.run(3)
	select {
	case <-r.h.Done():
	default:
		t.Fatal("not done after the deadline")
	}
	require.Equal(t, replication.StateClosed, ca.c.State())
	var ce *transport.CloseError
	require.ErrorAs(t, ca.c.Err(), &ce)
	require.Equal(t, transport.CodeDraining, ce.Code)
	require.Equal(t, "server draining: update", ce.Reason)
}

// TestDrainEmptyHost: a host without matches is done at once.
func TestDrainEmptyHost(t *testing.T) {
	r := newRig(t, nil)
	r.h.Drain("nothing to do", time.Time{})
	<-r.h.Done()
}

// TestMatchPanic: a game that panics ends its own match (its clients are
// told "match crashed") and no other.
func TestMatchPanic(t *testing.T) {
	r := newRig(t, nil)
	r.open("bad", 1)
	r.open("good", 2)
	bad := r.dial(func(c *replication.ClientConfig) { c.Match = "bad" })
	good := r.dial(func(c *replication.ClientConfig) { c.Match = "good" })
	r.run(10)
	require.True(t, bad.c.Ready() && good.c.Ready())
	r.games["bad"].panicAt = r.games["bad"].frames + 1
	r.run(30)
	require.Equal(t, replication.StateClosed, bad.c.State())
	var ce *transport.CloseError
	require.ErrorAs(t, bad.c.Err(), &ce)
	require.Equal(t, transport.CodeInternal, ce.Code)
	require.Equal(t, "match crashed: boom", ce.Reason)
	require.Equal(t, replication.StateReady, good.c.State())
	z := r.games["good"].frames
	require.Greater(t, z, 35)
	st := r.h.Stats()
	require.Equal(t, uint64(1), st.Crashed)
	require.Len(t, st.Matches, 1)
	require.Equal(t, "good", st.Matches[0].Name)
	// A new match may take the crashed one's name.
	r.open("bad", 3)
}

// TestPlayerEvents: OnPlayer hears joins and leaves, with token ids or
// match/client names, and the players left when a match ends.
func TestPlayerEvents(t *testing.T) {
	r := newRig(t, nil)
	m := r.open("a", 1)
	c1 := r.dial(func(c *replication.ClientConfig) { c.Match = "a" })
	c2 := r.dial(func(c *replication.ClientConfig) { c.Match = "a" })
	r.run(5)
	c1.c.Close()
	r.run(5)
	m.Close(transport.CodeApplication, "game over")
	r.run(2)
	var got []string
	for _, e := range r.events {
		verb := "left"
		if e.Joined {
			verb = "joined"
		}
		got = append(got, e.Player.ID+" "+verb)
	}
	require.Equal(t, []string{"a/1 joined", "a/2 joined", "a/1 left", "a/2 left"}, got)
	var ce *transport.CloseError
	require.ErrorAs(t, c2.c.Err(), &ce)
	require.Equal(t, "game over", ce.Reason)
}

// TestHandshakeBounds: past MaxHandshakes connections are refused at once
// ("host busy"); a connection that never says Hello is dropped after
// HandshakeTimeout.
func TestHandshakeBounds(t *testing.T) {
	r := newRig(t, func(c *Config) { c.MaxHandshakes = 2; c.HandshakeTimeout = time.Second })
	var silent []*simConn
	for range 3 {
		c, err := r.net.Dial("host", simLink())
		require.NoError(t, err)
		silent = append(silent, c)
	}
	r.run(2)
	require.Equal(t, map[string]uint64{"host busy": 1}, r.h.Stats().Refused)
	r.run(40)
	require.Equal(t, map[string]uint64{"host busy": 1, "no hello in time": 2}, r.h.Stats().Refused)
	for _, c := range silent {
		select {
		case <-c.Done():
		default:
			t.Fatal("a silent connection is still open")
		}
	}
	require.Contains(t, silent[2].Err().Error(), "host busy")
	require.Contains(t, silent[0].Err().Error(), "no hello in time")
}

// TestMatchBusy: past MatchConfig.Handoffs routed connections waiting for
// the match's next frame, more are refused ("match busy").
func TestMatchBusy(t *testing.T) {
	r := newRig(t, nil)
	_, err := r.h.Open("a", MatchConfig{Start: startGame(r.reg, 1, r.games), Handoffs: 2})
	require.NoError(t, err)
	var cs []*testClient
	for range 4 {
		cs = append(cs, r.dial(func(c *replication.ClientConfig) { c.Match = "a" }))
	}
	// Route without a frame between: the hellos arrive, the host routes.
	r.net.Advance(frameDt)
	r.h.pollAccept(r.net.Now())
	r.run(10)
	ready := 0
	for _, c := range cs {
		if c.c.Ready() {
			ready++
		} else {
			rejected(t, c, transport.CodeBusy, "match busy")
		}
	}
	require.Equal(t, 2, ready)
}

func TestConfigErrors(t *testing.T) {
	r := newRig(t, nil)
	for name, cfg := range map[string]Config{
		"negative timeout": {HandshakeTimeout: -1},
		"long default":     {DefaultMatch: strings.Repeat("m", transport.MaxMatchLen+1)},
	} {
		_, err := New(r.net.Listen("x-"+name), cfg)
		require.Error(t, err, name)
	}
	_, err := r.h.Open("", MatchConfig{Start: startGame(r.reg, 1, nil)})
	require.Error(t, err)
	_, err = r.h.Open("a", MatchConfig{})
	require.Error(t, err)
	_, err = r.h.Open("a", MatchConfig{Start: startGame(r.reg, 1, nil), FrameRate: -1})
	require.Error(t, err)
	_, err = r.h.Open("a", MatchConfig{Start: func(*Match) (Game, error) { return nil, errors.New("no") }})
	require.ErrorContains(t, err, "no")
	_, ok := r.h.Match("a")
	require.False(t, ok, "a failed Start leaves no match")
	r.open("a", 1)
	_, err = r.h.Open("a", MatchConfig{Start: startGame(r.reg, 1, nil)})
	require.ErrorIs(t, err, ErrExists)
}
