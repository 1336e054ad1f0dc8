package browser_test

import (
	"context"
	"testing"
	"time"

	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/tests/internal/pagegame"
	"github.com/stretchr/testify/require"
)

// Game messages in a match of three players, one of them a page in headless
// Chromium (WebTransport, js/wasm) with the same code as the two native
// ones: each gets every reliable broadcast once and in order, unreliable
// ones never older than one before, and the events about movers only for
// the movers it sees, each naming that mover's mirror (a page or native
// client of an even id does not see every third mover); the server takes
// their pokes, each naming a mover the poking client sees, as the live
// entity, and refuses none.
func TestBrowserMessages(t *testing.T) {
	m := newMatch(t, pagegame.ServerOptions{Movers: browserMovers, Players: true, Messages: true})
	natives := []*pagegame.Client{m.dialNativeWith(pagegame.Wander(3, nil), true)}
	ctx, cancel := context.WithTimeout(m.browser, 2*time.Minute)
	defer cancel()
	m.open(ctx, "play&messages=1") // (client 2: it does not see every third mover)
	natives = append(natives, m.dialNativeWith(pagegame.Wander(4, nil), true))
	r := m.waitPage(ctx, "3 s of messages", func(r pageReport) bool { return r.Msgs.Reliable >= 90 && r.Msgs.Pokes >= 90 })
	t.Logf("page: client %d, %d mirrors; events: %d reliable, %d unreliable, %d about movers; %d pokes sent", r.ID, r.Mirrors, r.Msgs.Reliable, r.Msgs.Unreliable, r.Msgs.Scoped, r.Msgs.Pokes)
	require.Empty(t, r.Msgs.Err, "the page saw a broken promise")
	require.Greater(t, r.Msgs.Unreliable, r.Msgs.Reliable/2, "unreliable events arrive on a loopback link")
	require.Positive(t, r.Msgs.Scoped)
	if r.ID%2 == 0 {
		require.Less(t, r.Msgs.Scoped, r.Msgs.Reliable, "events about the movers it does not see do not reach it")
	}
	visible := 0
	for i := range browserMovers {
		if !pagegame.Hidden(replication.ClientID(r.ID), i) {
			visible++
		}
	}
	var clients []replication.ClientID
	m.do(func() { clients = m.srv.Net.Clients() })
	require.Equal(t, visible+len(clients), r.Mirrors, "the page mirrors the movers it sees and the players' bodies (clients %v)", clients)

	var pokes, wrong int
	var refused uint64
	var stats []pagegame.MessageStats
	var ids []replication.ClientID
	m.do(func() {
		pokes, wrong = m.srv.Pokes[replication.ClientID(r.ID)], m.srv.PokesWrong[replication.ClientID(r.ID)]
		refused = m.srv.Net.Stats.MessagesRefused
		for _, c := range natives {
			stats, ids = append(stats, c.Msgs), append(ids, c.Net.ID())
		}
	})
	t.Logf("server: %d of the page's pokes taken, %d naming a wrong mover, %d refused in all", pokes, wrong, refused)
	require.Greater(t, pokes, 60)
	require.Zero(t, wrong)
	require.Zero(t, refused)
	for i, st := range stats {
		t.Logf("native client %d: events %d reliable, %d unreliable, %d about movers; %d pokes sent", ids[i], st.Reliable, st.Unreliable, st.Scoped, st.Pokes)
		require.Empty(t, st.Err)
		require.Greater(t, st.Reliable, uint64(60))
		require.Positive(t, st.Scoped)
	}
}
