package debugview_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mlange-42/arche/ecs"
	"github.com/mlange-42/arche/generic"
	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/replication/debugview"
	"github.com/archenet/archenet/replication/schema"
	"github.com/archenet/archenet/transport/sim"
)

// Health is a second replicated component, with a field that clamps.
type Health struct {
	HP int16 `net:"range=0:100"`
}

// simServer is a server with moving entities and clients over transport/sim,
// stepped tick by tick on the test's goroutine.
type simServer struct {
	t       *testing.T
	net     *sim.Network
	world   *ecs.World
	srv     *replication.Server
	clients []*replication.Client
	ents    []ecs.Entity
	rec     *debugview.Recorder
	tick    int
}

const netRate = 30

func newSimServer(t *testing.T, clients, entities int, link sim.Link, opts debugview.Options) *simServer {
	reg := schema.NewRegistry()
	schema.MustRegister[components.Transform](reg)
	schema.MustRegister[Health](reg)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	s := &simServer{t: t, net: sim.NewNetwork(1, time.Unix(1000, 0))}
	w := ecs.NewWorld()
	s.world = &w
	var err error
	s.srv, err = replication.NewServer(s.world, s.net.Listen("srv"), replication.ServerConfig{Registry: reg, NetRate: netRate, Now: s.net.Now, Logger: log})
	require.NoError(t, err)
	spawn := generic.NewMap3[components.Replicated, components.Transform, Health](s.world)
	get := generic.NewMap2[components.Transform, Health](s.world)
	for i := 0; i < entities; i++ {
		e := spawn.New()
		tr, h := get.Get(e)
		tr.Pos, tr.Rot = components.Vec3{X: float64(i)}, components.QuatIdentity()
		h.HP = 100
		s.ents = append(s.ents, e)
	}
	for i := 0; i < clients; i++ {
		conn, err := s.net.Dial("srv", link)
		require.NoError(t, err)
		cw := ecs.NewWorld()
		c, err := replication.NewClient(&cw, conn, replication.ClientConfig{Registry: reg, Now: s.net.Now, Logger: log})
		require.NoError(t, err)
		s.clients = append(s.clients, c)
	}
	opts.Now = s.net.Now
	s.rec = debugview.NewRecorder(s.srv, opts)
	t.Cleanup(func() { _ = s.srv.Close() })
	return s
}

// step runs one net tick: entities move, one in 50 ticks is despawned and
// another spawned, and now and then a health value is out of range.
func (s *simServer) step() {
	s.tick++
	s.srv.Receive()
	tr := generic.NewMap2[components.Transform, Health](s.world)
	for i, e := range s.ents {
		p, h := tr.Get(e)
		p.Pos.X += 0.05 * float64(i%5)
		if s.tick%45 == 0 && i == 0 {
			h.HP = 150 // clamped to 100
		}
	}
	if s.tick%50 == 0 && len(s.ents) > 1 {
		s.world.RemoveEntity(s.ents[1])
		s.ents = append(s.ents[:1], s.ents[2:]...)
		spawn := generic.NewMap3[components.Replicated, components.Transform, Health](s.world)
		e := spawn.New()
		p, h := tr.Get(e)
		p.Rot, h.HP = components.QuatIdentity(), 50
		s.ents = append(s.ents, e)
	}
	t0 := time.Now()
	s.srv.Send()
	s.rec.TickTime(time.Since(t0))
	s.rec.Sample()
	s.net.Advance(time.Second / netRate)
	for _, c := range s.clients {
		c.Receive()
		c.Send()
	}
}

func (s *simServer) run(d time.Duration) {
	for i := 0; i < int(d.Seconds()*netRate); i++ {
		s.step()
	}
}

func getStats(t *testing.T, h http.Handler, query string) (debugview.Stats, map[string]any) {
	t.Helper()
	rr := httptest.NewRecorder()
	h.ServeHTTP(rr, httptest.NewRequest("GET", "/stats"+query, nil))
	require.Equal(t, http.StatusOK, rr.Code, rr.Body.String())
	require.Equal(t, "application/json", rr.Header().Get("Content-Type"))
	var st debugview.Stats
	require.NoError(t, json.Unmarshal(rr.Body.Bytes(), &st))
	var raw map[string]any
	require.NoError(t, json.Unmarshal(rr.Body.Bytes(), &raw))
	return st, raw
}

// TestStatsJSON runs a server with two clients on a lossy simulated link
// and checks the JSON the page reads: every field present, and the figures
// consistent with the server's own counters.
func TestStatsJSON(t *testing.T) {
	s := newSimServer(t, 2, 40, sim.Link{Up: sim.Conditions{Latency: 10 * time.Millisecond, Loss: 0.05}, Down: sim.Conditions{Latency: 10 * time.Millisecond, Loss: 0.05}}, debugview.Options{Interval: 250 * time.Millisecond})
	h := debugview.Handler(s.rec)
	st, _ := getStats(t, h, "")
	require.Zero(t, st.Seq)
	require.Empty(t, st.Samples)

	s.run(6 * time.Second)
	st, raw := getStats(t, h, "")
	for _, k := range []string{"interval_ms", "window_s", "components", "component_bits", "seq", "samples"} {
		require.Contains(t, raw, k)
	}
	rs := raw["samples"].([]any)
	require.NotEmpty(t, rs)
	for _, k := range []string{"seq", "t", "tick", "net_ticks", "snapshot_bps", "spawn_bps", "snapshot_bytes", "spawn_bytes",
		"deltas", "fulls", "removals", "deferred", "datagrams", "component_bps", "component_bytes", "framing_bps", "header_bps",
		"unattributed_bps", "send_ms", "tick_ms", "tick_max_ms", "has_tick_time", "connected", "clients", "clamps"} {
		require.Contains(t, rs[len(rs)-1], k)
	}
	last := rs[len(rs)-1].(map[string]any)["clients"].([]any)
	require.Len(t, last, 2)
	for _, k := range []string{"id", "ready", "down_bps", "budget_bps", "rtt_ms", "ack_delay_ms", "loss", "relevant", "spawned", "send_dropped", "backlog"} {
		require.Contains(t, last[0], k)
	}

	require.Equal(t, 250.0, st.IntervalMS)
	require.Equal(t, []string{"Transform", "Health"}, st.Components)
	require.True(t, st.ComponentBits)
	// 6 s at 4 samples a second; the first Sample call only starts the clock.
	require.InDelta(t, 23, len(st.Samples), 1)
	require.Equal(t, st.Samples[len(st.Samples)-1].Seq, st.Seq)

	var deltas, fulls, removals float64
	for i, sm := range st.Samples {
		require.Equal(t, uint64(i+1), sm.Seq)
		require.InDelta(t, 7.5, sm.NetTicks, 1, "net ticks in 250 ms at 30 Hz")
		require.Greater(t, sm.T, 0.0)
		if i > 0 {
			require.Greater(t, sm.T, st.Samples[i-1].T)
		}
		deltas += sm.Deltas * float64(sm.NetTicks)
		fulls += sm.Fulls * float64(sm.NetTicks)
		removals += sm.Removals * float64(sm.NetTicks)
		require.Len(t, sm.ComponentBps, 2)
		require.Len(t, sm.ComponentBytes, 2)
		// Every snapshot bit is accounted for, except the padding of each
		// datagram to whole bytes (no compression here).
		acct := sm.FramingBps + sm.HeaderBps + sm.UnattributedBps
		for _, v := range sm.ComponentBps {
			acct += v
		}
		secs := float64(sm.NetTicks) / netRate
		require.LessOrEqual(t, acct, sm.SnapshotBps*1.0001)
		require.InDelta(t, sm.SnapshotBps, acct, sm.Datagrams*float64(sm.NetTicks)/secs+1, "sample %d", i)
		require.GreaterOrEqual(t, sm.SendMS, 0.0)
		require.True(t, sm.HasTickTime)
		require.GreaterOrEqual(t, sm.TickMaxMS, sm.TickMS)
		require.Len(t, sm.Clients, 2)
		for _, c := range sm.Clients {
			require.True(t, c.Ready)
			require.Positive(t, c.BudgetBps)
			require.GreaterOrEqual(t, c.Loss, 0.0)
			require.LessOrEqual(t, c.Loss, 1.0)
			require.False(t, math.IsNaN(c.RTTMS))
			if i > 0 {
				require.Positive(t, c.DownBps)
			}
		}
	}
	// The kinds add up to the server's counters (summed over clients),
	// apart from the ticks before the first sample.
	// (Despawns go by reliable message; removal records are rare.)
	stats := s.srv.Stats
	require.Positive(t, deltas)
	require.Positive(t, fulls)
	require.LessOrEqual(t, deltas, float64(stats.Deltas))
	require.Greater(t, deltas, 0.7*float64(stats.Deltas))
	require.LessOrEqual(t, fulls+removals, float64(stats.Fulls+stats.Removals))
	require.Positive(t, stats.Fulls)

	sm := st.Samples[len(st.Samples)-1]
	// Transforms move every tick; health changes rarely.
	require.Greater(t, sm.ComponentBytes[0], sm.ComponentBytes[1])
	require.Positive(t, sm.ComponentBytes[1])
	require.Equal(t, []debugview.Clamp{{Component: "Health", Field: "HP", OutOfRange: sm.Clamps[0].OutOfRange}}, sm.Clamps)
	require.Positive(t, sm.Clamps[0].OutOfRange)
	require.Positive(t, sm.SnapshotB)

	// since: only newer samples.
	st2, _ := getStats(t, h, "?since=20")
	require.Len(t, st2.Samples, len(st.Samples)-20)
	require.Equal(t, uint64(21), st2.Samples[0].Seq)

	rr := httptest.NewRecorder()
	h.ServeHTTP(rr, httptest.NewRequest("GET", "/stats?since=x", nil))
	require.Equal(t, http.StatusBadRequest, rr.Code)
}

// TestWindowBoundsHistory: the recorder keeps Window/Interval samples.
func TestWindowBoundsHistory(t *testing.T) {
	s := newSimServer(t, 1, 5, sim.Link{}, debugview.Options{Interval: 100 * time.Millisecond, Window: time.Second, NoComponentBits: true})
	s.run(4 * time.Second)
	st := s.rec.Stats(0)
	require.Len(t, st.Samples, 10)
	require.False(t, st.ComponentBits)
	for i := 1; i < len(st.Samples); i++ {
		require.Equal(t, st.Samples[i-1].Seq+1, st.Samples[i].Seq)
	}
	require.Equal(t, st.Seq, st.Samples[9].Seq)
	require.Empty(t, st.Samples[9].ComponentBps)
}

// TestPageSelfContained: the page loads nothing from elsewhere.
func TestPageSelfContained(t *testing.T) {
	s := newSimServer(t, 0, 1, sim.Link{}, debugview.Options{})
	h := debugview.Handler(s.rec)
	rr := httptest.NewRecorder()
	h.ServeHTTP(rr, httptest.NewRequest("GET", "/", nil))
	require.Equal(t, http.StatusOK, rr.Code)
	body := rr.Body.String()
	require.Contains(t, rr.Header().Get("Content-Type"), "text/html")
	require.Contains(t, body, "<canvas")
	require.Contains(t, body, `fetch("stats?since="`)
	for _, bad := range []string{"http://", "https://", "<link", "src="} {
		require.NotContains(t, body, bad)
	}
	rr = httptest.NewRecorder()
	h.ServeHTTP(rr, httptest.NewRequest("GET", "/nope", nil))
	require.Equal(t, http.StatusNotFound, rr.Code)
	require.False(t, strings.Contains(rr.Body.String(), "<canvas"))
}

// TestClientLeavesAndJoins: a client that leaves drops out of the samples,
// one that joins appears, with no rate in its first sample.
func TestClientLeavesAndJoins(t *testing.T) {
	s := newSimServer(t, 2, 20, sim.Link{}, debugview.Options{Interval: 200 * time.Millisecond})
	s.run(3 * time.Second)
	s.srv.Kick(1, "test")
	s.clients = s.clients[1:]
	conn, err := s.net.Dial("srv", sim.Link{})
	require.NoError(t, err)
	cw := ecs.NewWorld()
	c, err := replication.NewClient(&cw, conn, replication.ClientConfig{Registry: s.srv.Registry(), Now: s.net.Now, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	s.clients = append(s.clients, c)
	s.run(2 * time.Second)
	st := s.rec.Stats(0)
	ids := map[replication.ClientID]bool{}
	for _, sm := range st.Samples {
		for _, c := range sm.Clients {
			ids[c.ID] = true
			require.Less(t, c.DownBps, 1e6, "client %d at %.1f s", c.ID, sm.T)
		}
	}
	require.Equal(t, map[replication.ClientID]bool{1: true, 2: true, 3: true}, ids)
	last := st.Samples[len(st.Samples)-1]
	require.Len(t, last.Clients, 2)
	require.Equal(t, []replication.ClientID{2, 3}, []replication.ClientID{last.Clients[0].ID, last.Clients[1].ID})
	for i, sm := range st.Samples {
		for _, c := range sm.Clients {
			if c.ID == 3 && (i == 0 || len(st.Samples[i-1].Clients) < 2 || st.Samples[i-1].Clients[1].ID != 3) {
				require.Zero(t, c.DownBps, "client 3's first sample")
			}
		}
	}
	require.Equal(t, 1, last.Disconnected)
	require.Equal(t, 3, last.Connected)
}

// A client whose link dies is shown suspended (its seat kept), and once it
// resumes on a new connection, connected again; the samples count the
// seats suspended, resumed and expired.
func TestSeatsShown(t *testing.T) {
	s := newSimServer(t, 2, 20, sim.Link{}, debugview.Options{Interval: 200 * time.Millisecond})
	s.run(time.Second)
	down, err := s.net.Dial("srv", sim.Link{}) // (a third client, whose link will die)
	require.NoError(t, err)
	cw := ecs.NewWorld()
	c, err := replication.NewClient(&cw, down, replication.ClientConfig{Registry: s.srv.Registry(), Now: s.net.Now, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	s.clients = append(s.clients, c)
	s.run(time.Second)
	down.SetLinkDown(true)
	s.run(12 * time.Second) // (past ClientTimeout)
	last := s.rec.Stats(0).Samples
	sm := last[len(last)-1]
	require.Equal(t, 1, sm.SeatsSuspended)
	require.Equal(t, 1, sm.Suspended)
	var shown bool
	for _, cs := range sm.Clients {
		if cs.ID == c.ID() {
			shown = cs.Suspended
		}
	}
	require.True(t, shown, "the suspended client is listed as such")

	conn, err := s.net.DialFrom("srv", "elsewhere", sim.Link{})
	require.NoError(t, err)
	require.NoError(t, c.Resume(conn))
	s.run(time.Second)
	last = s.rec.Stats(0).Samples
	sm = last[len(last)-1]
	require.Zero(t, sm.SeatsSuspended)
	require.Equal(t, 1, sm.Resumed)
	require.Zero(t, sm.SeatsExpired)
}
