package main

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/replication/host/agones/agonestest"
)

// TestRunAgones: `arena -agones` under the real sidecar (local mode),
// started as README.md says, with examples/agones/gameserver-local.json:
// the GameServer goes from Scheduled to Ready, an allocation naming match
// "duel" (a room, a label, Allocated) opens it, two bots
// (`arena -mode client -match duel`) play in it and are listed, and when
// -duration ends the server drains and the GameServer is shut down.
func TestRunAgones(t *testing.T) {
	if testing.Short() {
		t.Skip("real time")
	}
	gs, err := os.ReadFile("../agones/gameserver-local.json")
	require.NoError(t, err)
	sc := agonestest.Start(t, string(gs))
	dir := t.TempDir()
	var out, errb syncBuffer
	code := make(chan int, 1)
	go func() {
		code <- run([]string{"-agones", "-agones-url", sc.URL, "-addr", "127.0.0.1:0", "-cert", dir, "-npcs", "4",
			"-duration", "10s", "-drain", "2s"}, &out, &errb)
	}()
	addr := waitFor(t, &out, regexp.MustCompile(`arena game server on (\S+) \(QUIC\)`))
	waitFor(t, &out, regexp.MustCompile(`agones Ready matches 0 rooms 0`))
	post := func(method, path, body string) string {
		req, _ := http.NewRequest(method, sc.URL+path, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		return string(b)
	}
	post(http.MethodPatch, "/v1beta1/counters/rooms", `{"countDiff":"1"}`)
	post(http.MethodPut, "/metadata/label", `{"key":"match","value":"duel"}`)
	post(http.MethodPost, "/allocate", `{}`)
	waitFor(t, &out, regexp.MustCompile(`match "duel" open`))
	listed := make(chan string, 1)
	go func() {
		for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if l := post(http.MethodGet, "/v1beta1/lists/players", ""); strings.Contains(l, `"duel/2"`) {
				listed <- l
				return
			}
		}
		listed <- ""
	}()

	var bots bytes.Buffer
	require.Equal(t, 0, run([]string{"-mode", "client", "-addr", addr, "-cert", dir, "-match", "duel", "-clients", "2", "-duration", "2500ms"}, &bots, &bots), bots.String())
	require.Contains(t, bots.String(), "2 bot clients connected")
	require.Contains(t, <-listed, `"duel/1"`, "both bots listed")
	select {
	case c := <-code:
		t.Logf("stdout:\n%s\nstderr:\n%s", out.String(), errb.String())
		require.Equal(t, 0, c)
	case <-time.After(30 * time.Second):
		t.Fatalf("the server did not end; stdout:\n%s", out.String())
	}
	require.Contains(t, out.String(), "summary: 1 matches opened, 2 clients routed, game server Shutdown")
	require.Contains(t, out.String(), "agones Allocated matches 1 rooms 1 clients 2")
	require.Contains(t, out.String(), "agones state Scheduled\nagones state Scheduled → Ready\n")
	require.Contains(t, out.String(), "agones state Ready → Allocated\n")
	require.Positive(t, sc.Count("Health Ping Received!"))
}

// waitFor polls out until re matches (15 s at most) and returns its first
// group, if any.
func waitFor(t *testing.T, out *syncBuffer, re *regexp.Regexp) string {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			if len(m) > 1 {
				return m[1]
			}
			return ""
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q within 15 s; stdout:\n%s", re, out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
