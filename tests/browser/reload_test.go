package browser_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/replication"
)

// A page that reloads mid-match comes back to its seat: it saved its ticket
// in sessionStorage (Client.ResumeTicket), and the reloaded page resumes with
// it (ClientConfig.ResumeTicket). The server counts a resume, not a join:
// the same ClientID, the player's body (its state in the game: the same
// entity, never removed) kept throughout, and the page converges on the
// server's state again.
func TestBrowserReloadResumesSeat(t *testing.T) {
	m := newBrowserMatch(t, true)
	ctx, cancel := context.WithTimeout(m.browser, 2*time.Minute)
	defer cancel()
	m.open(ctx, "play&resume=1")
	r := m.waitPage(ctx, "1 s of play and a saved ticket", func(r pageReport) bool { return r.InputTicks >= 60 && r.Saved })
	id := replication.ClientID(r.ID)
	var body ecs.Entity
	var connected int
	m.do(func() {
		var ok bool
		body, ok = m.srv.Body(id)
		require.True(t, ok)
		connected = m.srv.Net.Stats.Connected
	})

	require.NoError(t, chromedp.Do(ctx, chromedp.Reload()))
	r = m.waitPage(ctx, "the reloaded page to play in its seat", func(r pageReport) bool {
		return r.Resumed && r.State == "playing" && r.Snapshots > 0 && r.InputTicks >= 30
	})
	require.Equal(t, int(id), r.ID, "the same seat")
	var st replication.ServerStats
	var after ecs.Entity
	m.do(func() {
		st = m.srv.Net.Stats
		after, _ = m.srv.Body(id)
	})
	t.Logf("reloaded: client %d, %d snapshots; server: %d resumed (%d started over), %d suspended, %d connected", r.ID, r.Snapshots, st.Resumed, st.ResumesReset, st.Suspended, st.Connected)
	require.Equal(t, 1, st.Resumed, "a resume")
	require.Equal(t, connected, st.Connected, "not a join")
	require.Equal(t, body, after, "the player's body is the one it had")
	require.Equal(t, browserMovers+1, r.Mirrors, "the page mirrors every mover and its body")
	var stop atomic.Bool
	r, _ = m.still(ctx, &stop)
	require.True(t, r.Converged, r.ConvergeError)
}
