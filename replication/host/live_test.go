package host

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/sim"
)

// eventually polls cond every 5 ms until it holds or 10 s pass.
func eventually(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 10 s: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	b, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(b)
}

// TestLiveness: with matches on their own goroutines and KeepStalled, a
// match whose frame is stuck makes the host not live (/healthz 503 naming it) after
// StallAfter while the others go on; once it moves again the host is live.
// /readyz follows admission. (On a busy machine the other match, too, can
// go StallAfter without a frame now and then: the probe is polled until it
// names the stuck match alone, which a host that stalled every match
// behind the stuck one would never do.)
func TestLiveness(t *testing.T) {
	net := sim.NewNetwork(1, time.Unix(0, 0))
	h, err := New(net.Listen("host"), Config{StallAfter: 100 * time.Millisecond, KeepStalled: true, Logger: quiet})
	require.NoError(t, err)
	defer h.Close()
	reg := testRegistry()
	games := map[string]*testGame{}
	for _, name := range []string{"stuck", "fine"} {
		_, err := h.Open(name, MatchConfig{Start: startGame(reg, 1, games), FrameRate: 100})
		require.NoError(t, err)
	}
	web := h.Handler()
	code, body := get(t, web, "/healthz")
	require.Equal(t, http.StatusOK, code, body)
	code, body = get(t, web, "/readyz")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "admitting\n", body)

	unblock := make(chan struct{})
	fine, _ := h.Match("fine")
	games["stuck"].block.Store(&unblock) // the next frame waits (a deadlock in the game)
	eventually(t, func() bool { return h.Live() != nil }, "stalled")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		code, body = get(t, web, "/healthz")
		if code == http.StatusServiceUnavailable && strings.Contains(body, "stalled: stuck (no frame done for") && !strings.Contains(body, "fine") {
			break
		}
		require.True(t, time.Now().Before(deadline), "/healthz did not name the stuck match alone within 10 s: %d %q", code, body)
	}
	before := fine.Stats().Frames
	eventually(t, func() bool { return fine.Stats().Frames > before+5 }, "the other match goes on")
	games["stuck"].block.Store(nil)
	close(unblock)
	eventually(t, func() bool { return h.Live() == nil }, "live again")

	h.Drain("bye", time.Time{})
	code, body = get(t, web, "/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, "draining\n", body)
	<-h.Done() // (both matches are empty: they end)
}

// TestCloseStalledMatch: Close returns, after StallAfter, even when a
// match is stuck in its frame for good (KeepStalled).
func TestCloseStalledMatch(t *testing.T) {
	net := sim.NewNetwork(1, time.Unix(0, 0))
	h, err := New(net.Listen("host"), Config{StallAfter: 100 * time.Millisecond, KeepStalled: true, Logger: quiet})
	require.NoError(t, err)
	games := map[string]*testGame{}
	_, err = h.Open("stuck", MatchConfig{Start: startGame(testRegistry(), 1, games), FrameRate: 100})
	require.NoError(t, err)
	forever := make(chan struct{})
	defer close(forever)
	games["stuck"].block.Store(&forever)
	eventually(t, func() bool { return h.Live() != nil }, "stalled")
	closed := make(chan struct{})
	go func() { _ = h.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close waits for a stalled match")
	}
	<-h.Done()
}

// TestDrainDeadlineWithStalledMatch: a drain whose deadline passes with a
// match stuck in its frame (KeepStalled) still ends: Done closes StallAfter past the
// deadline (the process can exit and be replaced).
func TestDrainDeadlineWithStalledMatch(t *testing.T) {
	net := sim.NewNetwork(1, time.Unix(0, 0))
	h, err := New(net.Listen("host"), Config{StallAfter: 100 * time.Millisecond, KeepStalled: true, Logger: quiet})
	require.NoError(t, err)
	games := map[string]*testGame{}
	_, err = h.Open("stuck", MatchConfig{Start: startGame(testRegistry(), 1, games), FrameRate: 100})
	require.NoError(t, err)
	forever := make(chan struct{})
	defer close(forever)
	games["stuck"].block.Store(&forever)
	start := time.Now()
	h.Drain("bye", start.Add(100*time.Millisecond))
	select {
	case <-h.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("not done after the drain deadline with a stalled match")
	}
	require.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond, "done before deadline + StallAfter")
	require.Len(t, h.Matches(), 1, "the stalled match is left behind")
	require.NoError(t, h.Close())
}

// TestStalledMatchEnded: without KeepStalled, a match stuck in its frame is
// ended after StallAfter from the host's goroutine while the other goes on
// and the host stays live; when the stuck frame returns, the match's game
// is closed and its Frame not called again.
func TestStalledMatchEnded(t *testing.T) {
	net := sim.NewNetwork(1, time.Unix(0, 0))
	var mu sync.Mutex
	var ended []MatchEvent
	h, err := New(net.Listen("host"), Config{StallAfter: 100 * time.Millisecond, Logger: quiet,
		OnMatch: func(e MatchEvent) {
			mu.Lock()
			ended = append(ended, e)
			mu.Unlock()
		}})
	require.NoError(t, err)
	defer h.Close()
	games := map[string]*testGame{}
	for _, name := range []string{"stuck", "fine"} {
		_, err := h.Open(name, MatchConfig{Start: startGame(testRegistry(), 1, games), FrameRate: 100})
		require.NoError(t, err)
	}
	stuck, _ := h.Match("stuck")
	fine, _ := h.Match("fine")
	unblock := make(chan struct{})
	games["stuck"].block.Store(&unblock)
	eventually(t, func() bool { _, open := h.Match("stuck"); return !open }, "the stalled match ended")
	<-stuck.Ended()
	require.NoError(t, h.Live(), "the host stays live")
	code, body := get(t, h.Handler(), "/healthz")
	require.Equal(t, http.StatusOK, code, body)
	st := h.Stats()
	require.EqualValues(t, 1, st.Stalled)
	require.Len(t, st.Matches, 1)
	before := fine.Stats().Frames
	eventually(t, func() bool { return fine.Stats().Frames > before+5 }, "the other match goes on")
	mu.Lock()
	require.Len(t, ended, 3)
	require.Equal(t, MatchEvent{Match: "stuck", Opened: false, Why: ended[2].Why}, ended[2])
	require.Contains(t, ended[2].Why.Reason, "match stalled: no frame done for")
	mu.Unlock()
	require.False(t, games["stuck"].closed.Load(), "its frame has not returned")
	games["stuck"].block.Store(nil)
	frames := func() int { return games["stuck"].frames }
	close(unblock)
	eventually(t, func() bool { return games["stuck"].closed.Load() }, "the game closed once its frame returned")
	n := frames()
	time.Sleep(50 * time.Millisecond) // (a frame period is 10 ms)
	require.Equal(t, n, frames(), "no frame after the end")
}

// TestStalledMatchPlayers: a stalled match's players are disconnected with
// CodeInternal and the reason, and reported gone, at once; the other
// match's player stays and keeps getting state (Manual rig; the stall is
// forged by the match's liveness clock).
func TestStalledMatchPlayers(t *testing.T) {
	var matches []MatchEvent
	r := newRig(t, func(c *Config) { c.OnMatch = func(e MatchEvent) { matches = append(matches, e) } })
	r.open("stuck", 1)
	fine := r.open("fine", 2)
	c1 := r.dial(func(c *replication.ClientConfig) { c.Match = "stuck" })
	c2 := r.dial(func(c *replication.ClientConfig) { c.Match = "fine" })
	r.run(5)
	require.Len(t, r.events, 2)
	stuck, _ := r.h.Match("stuck")
	stuck.lastFrame.Store(time.Now().Add(-time.Minute).UnixNano())
	r.h.endStalled(time.Now())
	require.Len(t, r.events, 3)
	require.Equal(t, PlayerEvent{Match: "stuck", Player: Player{ID: "stuck/1", Client: 1}}, r.events[2], "left at once")
	_, open := r.h.Match("stuck")
	require.False(t, open)
	require.NoError(t, r.h.Live())
	r.run(5)
	var ce *transport.CloseError
	require.ErrorAs(t, c1.c.Err(), &ce)
	require.Equal(t, transport.CodeInternal, ce.Code)
	require.Contains(t, ce.Reason, "match stalled")
	require.NoError(t, c2.c.Err())
	require.Equal(t, 2.0, c2.x())
	require.False(t, r.games["stuck"].closed.Load())
	require.False(t, stuck.frame(r.net.Now()), "the stuck frame returns: the match ends") // (its goroutine's loop)
	require.True(t, r.games["stuck"].closed.Load())
	require.Len(t, r.events, 3, "no second leave")
	require.Equal(t, []string{"stuck", "fine", "stuck"}, []string{matches[0].Match, matches[1].Match, matches[2].Match})
	require.Nil(t, matches[0].Why)
	require.Equal(t, transport.CodeInternal, matches[2].Why.Code)
	require.Equal(t, uint64(1), r.h.Stats().Stalled)
	_ = fine
}
