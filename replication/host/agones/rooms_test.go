package agones_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/replication/host"
	"github.com/archenet/archenet/replication/host/agones"
	"github.com/archenet/archenet/replication/host/agones/agonestest"
	"github.com/archenet/archenet/transport"
)

// roomsGameServer is a GameServer as a Fleet with a rooms counter and a
// players list makes it (examples/agones/fleet.json), placed on a node
// (its status as the sidecar's local mode takes it from the file).
const roomsGameServer = `{"apiVersion": "agones.dev/v1", "kind": "GameServer",
  "metadata": {"name": "archenet-rooms"},
  "spec": {"health": {"periodSeconds": 1},
    "ports": [{"name": "default", "containerPort": 7777, "protocol": "UDP"}],
    "counters": {"rooms": {"count": 0, "capacity": 4}},
    "lists": {"players": {"capacity": 256}}},
  "status": {"state": "Scheduled", "address": "203.0.113.5",
    "addresses": [{"type": "InternalIP", "address": "10.0.0.5"}],
    "ports": [{"name": "default", "port": 7777}],
    "counters": {"rooms": {"count": 0, "capacity": 4}},
    "lists": {"players": {"capacity": 256, "values": []}}}}`

// sidecarView reads the rooms counter and the players list.
func sidecarView(t *testing.T, url string) (rooms int64, players []string) {
	var c agones.Counter
	require.NoError(t, json.Unmarshal([]byte(call(t, http.MethodGet, url+"/v1beta1/counters/rooms", "")), &c))
	var l struct {
		Values []string `json:"values"`
	}
	require.NoError(t, json.Unmarshal([]byte(call(t, http.MethodGet, url+"/v1beta1/lists/players", "")), &l))
	slices.Sort(l.Values)
	return c.Count, l.Values
}

// allocate does what a counter-based GameServerAllocation does to the
// GameServer it picks: counters.rooms Increment 1, metadata.labels.match,
// state Allocated (the local sidecar has no allocator).
func allocate(t *testing.T, url, match string) {
	call(t, http.MethodPatch, url+"/v1beta1/counters/rooms", `{"countDiff":"1"}`)
	call(t, http.MethodPut, url+"/metadata/label", `{"key":"match","value":"`+match+`"}`)
	call(t, http.MethodPost, url+"/allocate", `{}`)
}

// TestAgonesRooms, against the real sidecar: two matches opened by
// counter-based allocation on one pod; the rooms counter and the players
// list follow opens, joins, leaves and ends; a stalled match is ended with
// its reason while the other keeps ticking and health pings go on; the pod
// returns to Ready after its last match ends; the driver gives the address
// tokens name.
func TestAgonesRooms(t *testing.T) {
	sc := agonestest.Start(t, roomsGameServer)
	obs := observe(t, sc.URL)
	until(t, "the watch's first state", func() bool { return obs.last() == "Scheduled" })
	reg := registry()
	var games sync.Map
	d, err := agones.New(agones.Config{URL: sc.URL, HealthPeriod: 50 * time.Millisecond, MinBackoff: 20 * time.Millisecond, Logger: quiet,
		OpenMatch: func(h *host.Host, name string) error { return openGame(h, reg, name, &games) }})
	require.NoError(t, err)

	addr, err := d.Address(context.Background())
	require.NoError(t, err)
	require.Equal(t, agones.Address{Host: "203.0.113.5", Addresses: []string{"10.0.0.5"}, Ports: map[string]int{"default": 7777}}, addr)
	ep, err := addr.Endpoint("")
	require.NoError(t, err)
	require.Equal(t, "203.0.113.5:7777", ep)

	hc := host.Config{StallAfter: 500 * time.Millisecond}
	var ends []host.MatchEvent
	var mu sync.Mutex
	hc.OnMatch = func(e host.MatchEvent) {
		if !e.Opened {
			mu.Lock()
			ends = append(ends, e)
			mu.Unlock()
		}
	}
	d.Configure(&hc) // (after the game's own hook)
	h, cert := quicHost(t, hc)
	ran := make(chan error, 1)
	go func() { ran <- d.Run(context.Background(), h) }()
	until(t, "Ready", func() bool { return obs.last() == "Ready" })

	allocate(t, sc.URL, "duel-1")
	until(t, "duel-1 open", func() bool { _, ok := h.Match("duel-1"); return ok && obs.last() == "Allocated" })
	allocate(t, sc.URL, "duel-2")
	until(t, "duel-2 open", func() bool { _, ok := h.Match("duel-2"); return ok })
	rooms, _ := sidecarView(t, sc.URL)
	require.EqualValues(t, 2, rooms, "two allocations, two rooms (the driver added none)")

	p1, p2, p3 := dial(t, h, cert, reg, "duel-1"), dial(t, h, cert, reg, "duel-2"), dial(t, h, cert, reg, "duel-2")
	view := func(want []string) func() bool {
		return func() bool { _, got := sidecarView(t, sc.URL); return slices.Equal(got, want) }
	}
	until(t, "three players listed", view([]string{"duel-1/1", "duel-2/1", "duel-2/2"}), p1, p2, p3)
	p3.c.Close() // (the player leaves: a lost connection would keep its seat)
	left := []string{"duel-1/1", "duel-2/1", "duel-2/2"}
	left = slices.DeleteFunc(left, func(v string) bool { return v == "duel-2/"+strconv.Itoa(int(p3.c.ID())) })
	until(t, "a leave unlisted", view(left), p1, p2)

	// duel-2 stalls: it is ended with its reason; duel-1 goes on; the pings
	// go on.
	const ping = "Health Ping Received!"
	g, _ := games.Load("duel-2")
	unblock := make(chan struct{})
	t.Cleanup(func() { close(unblock) })
	g.(*game).block.Store(&unblock)
	pings := sc.Count(ping)
	until(t, "the stalled match ended", func() bool { _, ok := h.Match("duel-2"); return !ok }, p1, p2)
	until(t, "its player told why", func() bool { return p2.c.Err() != nil }, p1, p2)
	require.Equal(t, transport.CodeInternal, transport.CodeOf(p2.c.Err()))
	require.ErrorContains(t, p2.c.Err(), "match stalled: no frame done for")
	until(t, "rooms 1, its player unlisted", func() bool {
		r, pl := sidecarView(t, sc.URL)
		return r == 1 && slices.Equal(pl, []string{"duel-1/1"})
	}, p1)
	until(t, "pings go on", func() bool { return sc.Count(ping) >= pings+5 }, p1)
	require.NoError(t, h.Live())
	require.Zero(t, d.Stats().Skipped)
	m1, _ := h.Match("duel-1")
	frames := m1.Stats().Frames
	until(t, "duel-1 ticks", func() bool { return m1.Stats().Frames > frames+10 }, p1)
	require.True(t, p1.c.Ready())
	require.NoError(t, p1.c.Err())

	// duel-1 ends: no room left, the pod is Ready again.
	m1.Close(transport.CodeApplication, "game over")
	until(t, "Ready again", func() bool { return obs.last() == "Ready" }, p1)
	rooms, players := sidecarView(t, sc.URL)
	require.Zero(t, rooms)
	require.Empty(t, players)
	require.Equal(t, []string{"Scheduled", "Ready", "Allocated", "Ready"}, obs.seen())
	mu.Lock()
	require.Len(t, ends, 2, "the game's own OnMatch ran too")
	mu.Unlock()

	// A match opening as the pod went Ready (an allocation racing with the
	// Ready call) makes it Allocated again: the fleet must not scale down
	// a pod with a match in it.
	require.NoError(t, openGame(h, reg, "late", nil))
	until(t, "Allocated again", func() bool { return obs.last() == "Allocated" })
	until(t, "counted", func() bool { r, _ := sidecarView(t, sc.URL); return r == 1 })
	late, _ := h.Match("late")
	late.Close(transport.CodeApplication, "game over")
	until(t, "Ready once more", func() bool { return obs.last() == "Ready" })
	until(t, "no room", func() bool { r, _ := sidecarView(t, sc.URL); return r == 0 })

	h.Drain("test over", time.Now())
	until(t, "Shutdown", func() bool { return obs.last() == "Shutdown" })
	require.NoError(t, <-ran)
	st := d.Stats()
	require.EqualValues(t, 2, st.Opened)
	require.EqualValues(t, 2, st.BackToReady)
	require.Zero(t, st.Rooms)
	require.Zero(t, st.PlayersDropped)
}

// TestAgonesShutdownWhenEmpty: with ShutdownWhenEmpty the pod is shut down
// once its allocated match ends; a match the game opens itself is counted
// in the rooms counter too.
func TestAgonesShutdownWhenEmpty(t *testing.T) {
	sc := agonestest.Start(t, roomsGameServer)
	obs := observe(t, sc.URL)
	reg := registry()
	d, err := agones.New(agones.Config{URL: sc.URL, HealthPeriod: 50 * time.Millisecond, MinBackoff: 20 * time.Millisecond, Logger: quiet,
		WhenEmpty: agones.ShutdownWhenEmpty, MatchCapacity: 3,
		OpenMatch: func(h *host.Host, name string) error { return openGame(h, reg, name, nil) }})
	require.NoError(t, err)
	var hc host.Config
	d.Configure(&hc)
	h, _ := quicHost(t, hc)
	ran := make(chan error, 1)
	go func() { ran <- d.Run(context.Background(), h) }()
	until(t, "Ready", func() bool { return obs.last() == "Ready" })
	require.NoError(t, openGame(h, reg, "lobby", nil))
	until(t, "the lobby counted", func() bool { r, _ := sidecarView(t, sc.URL); return r == 1 })
	var c agones.Counter
	require.NoError(t, json.Unmarshal([]byte(call(t, http.MethodGet, sc.URL+"/v1beta1/counters/rooms", "")), &c))
	require.EqualValues(t, 3, c.Capacity, "MatchCapacity")
	allocate(t, sc.URL, "duel")
	until(t, "duel open", func() bool { _, ok := h.Match("duel"); return ok })
	until(t, "two rooms", func() bool { r, _ := sidecarView(t, sc.URL); return r == 2 })
	for _, m := range h.Matches() {
		m.Close(transport.CodeApplication, "game over")
	}
	until(t, "Shutdown", func() bool { return obs.last() == "Shutdown" })
	require.NoError(t, <-ran)
	require.Equal(t, []string{"Scheduled", "Ready", "Allocated", "Shutdown"}, obs.seen())
}

// A room the counter holds beyond the open matches — an allocation whose
// label the watch has not brought yet, or one that named no match — is
// kept for a health period (its match may be about to open), then taken
// off; the room of a match that ended goes at once.
func TestAgonesRoomsGrace(t *testing.T) {
	sc := agonestest.Start(t, roomsGameServer)
	reg := registry()
	const period = 300 * time.Millisecond
	d, err := agones.New(agones.Config{URL: sc.URL, HealthPeriod: period, MinBackoff: 20 * time.Millisecond, Logger: quiet,
		OpenMatch: func(h *host.Host, name string) error { return openGame(h, reg, name, nil) }})
	require.NoError(t, err)
	var hc host.Config
	d.Configure(&hc)
	h, _ := quicHost(t, hc)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- d.Run(ctx, h) }()
	defer func() { cancel(); <-ran }()
	until(t, "Ready", func() bool { return d.State() == "Ready" })
	require.NoError(t, openGame(h, reg, "own", nil))
	until(t, "the game's match counted", func() bool { r, _ := sidecarView(t, sc.URL); return r == 1 })

	call(t, http.MethodPatch, sc.URL+"/v1beta1/counters/rooms", `{"countDiff":"1"}`) // (no label)
	start := time.Now()
	m, _ := h.Match("own")
	m.Close(transport.CodeApplication, "over") // its room goes at once; the unnamed one stays
	until(t, "the ended match's room off", func() bool { r, _ := sidecarView(t, sc.URL); return r == 1 })
	if time.Since(start) < period {
		r, _ := sidecarView(t, sc.URL)
		require.EqualValues(t, 1, r, "the unnamed allocation's room is kept within a period")
	}
	until(t, "the unnamed room off after a period", func() bool { r, _ := sidecarView(t, sc.URL); return r == 0 })
	require.GreaterOrEqual(t, time.Since(start), period, "not before a period")
}
