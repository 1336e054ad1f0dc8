package host

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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

// TestLiveness: with matches on their own goroutines, a match whose frame
// is stuck makes the host not live (/healthz 503 naming it) after
// StallAfter while the others go on; once it moves again the host is live.
// /readyz follows admission. (On a busy machine the other match, too, can
// go StallAfter without a frame now and then: the probe is polled until it
// names the stuck match alone, which a host that stalled every match
// behind the stuck one would never do.)
func TestLiveness(t *testing.T) {
	net := sim.NewNetwork(1, time.Unix(0, 0))
	h, err := New(net.Listen("host"), Config{StallAfter: 100 * time.Millisecond, Logger: quiet})
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
// match is stuck in its frame for good.
func TestCloseStalledMatch(t *testing.T) {
	net := sim.NewNetwork(1, time.Unix(0, 0))
	h, err := New(net.Listen("host"), Config{StallAfter: 100 * time.Millisecond, Logger: quiet})
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
// match stuck in its frame still ends: Done closes StallAfter past the
// deadline (the process can exit and be replaced).
func TestDrainDeadlineWithStalledMatch(t *testing.T) {
	net := sim.NewNetwork(1, time.Unix(0, 0))
	h, err := New(net.Listen("host"), Config{StallAfter: 100 * time.Millisecond, Logger: quiet})
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
