package tests

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/replication/replicationtest"
	"github.com/archenet/archenet/tests/internal/pagegame"
	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/quic"
	"github.com/archenet/archenet/transport/webtransport"
	"github.com/archenet/archenet/transport/webtransport/webtransporttest"
)

// browserMatch is one pagegame match that native clients (QUIC) and a page in
// headless Chromium (WebTransport, tests/internal/pageclient) join through one
// merged listener. The server and the native clients run on a goroutine of their
// own, in real time, while the test drives the page; do runs a function there.
type browserMatch struct {
	t       *testing.T
	srv     *pagegame.Server
	cert    *quic.DevCert
	ql      *quic.Listener
	wl      *webtransport.Listener
	page    string // the page's URL
	browser context.Context
	natives []*pagegame.Client
	// state is the server's replicationtest.State (JSON) of the newest tick
	// once the match is still, served at /server.json.
	state atomic.Pointer[[]byte]
	calls chan func()
	quit  chan struct{}
	done  chan struct{}
}

const browserMovers = 24

func newBrowserMatch(t *testing.T, players bool) *browserMatch {
	t.Setenv("QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING", "true")
	browser := webtransporttest.Chromium(t)
	wasm := webtransporttest.BuildWasm(t, "", "./internal/pageclient")
	m := &browserMatch{t: t, browser: browser, calls: make(chan func()), quit: make(chan struct{}), done: make(chan struct{})}
	var err error
	m.cert, err = quic.GenerateDevCert(time.Hour)
	require.NoError(t, err)
	m.ql, err = quic.Listen("127.0.0.1:0", &quic.Config{TLS: m.cert.ServerTLS(), Logger: quiet})
	require.NoError(t, err)
	certs, err := webtransport.NewSelfSigned(webtransport.SelfSignedConfig{})
	require.NoError(t, err)
	m.wl, err = webtransport.Listen("127.0.0.1:0", &webtransport.Config{TLS: certs.TLSConfig(), Logger: quiet})
	require.NoError(t, err)
	m.srv, err = pagegame.NewServer(pagegame.ServerOptions{Listener: transport.MergeListeners(m.ql, m.wl), Movers: browserMovers, Players: players, Logger: quiet})
	require.NoError(t, err)

	mux := http.NewServeMux()
	mux.Handle("/endpoint.json", webtransport.EndpointHandler(m.wl.URL, certs.Hashes))
	mux.HandleFunc("/server.json", func(w http.ResponseWriter, r *http.Request) {
		b := m.state.Load()
		if b == nil {
			http.Error(w, "the match is not still yet", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(*b)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(webtransporttest.RunPage)) })
	ps := webtransporttest.PageServer(t, m.wl.Addr().(*net.UDPAddr).Port, webtransporttest.WasmHandler(t, wasm, mux))
	m.page = ps.URL
	go m.run()
	t.Cleanup(func() {
		close(m.quit)
		<-m.done
		m.srv.Net.Close()
	})
	return m
}

// run steps the server and the native clients every 4 ms of real time.
func (m *browserMatch) run() {
	defer close(m.done)
	tk := time.NewTicker(4 * time.Millisecond)
	defer tk.Stop()
	last := time.Now()
	for {
		select {
		case <-m.quit:
			return
		case f := <-m.calls:
			f()
			continue
		case <-tk.C:
		}
		now := time.Now()
		m.srv.Sched.Advance(now.Sub(last))
		last = now
		for _, c := range m.natives {
			_ = c.Frame()
		}
		if m.srv.Still {
			s, err := m.srv.State()
			if err == nil {
				b, _ := json.Marshal(s)
				m.state.Store(&b)
			}
		}
	}
}

// do runs f on the match's goroutine.
func (m *browserMatch) do(f func()) {
	done := make(chan struct{})
	m.calls <- func() { f(); close(done) }
	<-done
}

// dialNative joins a native client over QUIC (sample nil: a watcher).
func (m *browserMatch) dialNative(sample func(uint32, *pagegame.Body) pagegame.Move) *pagegame.Client {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := quic.Dial(ctx, m.ql.Addr().String(), &quic.Config{TLS: m.cert.ClientTLS(), Logger: quiet})
	require.NoError(m.t, err)
	m.t.Cleanup(func() { _ = conn.Close() })
	c, err := pagegame.NewClient(conn, sample, 600, quiet)
	require.NoError(m.t, err)
	m.do(func() { m.natives = append(m.natives, c) })
	return c
}

// pageReport is what tests/internal/pageclient publishes.
type pageReport struct {
	State         string                       `json:"state"`
	Error         string                       `json:"error"`
	ID            int                          `json:"id"`
	Snapshots     int                          `json:"snapshots"`
	Mirrors       int                          `json:"mirrors"`
	Predicted     bool                         `json:"predicted"`
	InputTicks    uint64                       `json:"inputTicks"`
	Matches       uint64                       `json:"matches"`
	Corrections   uint64                       `json:"corrections"`
	Resets        uint64                       `json:"resets"`
	FrameMs       float64                      `json:"frameMs"`
	Checks        int                          `json:"checks"`
	Converged     bool                         `json:"converged"`
	ConvergeError string                       `json:"convergeError"`
	Records       []replicationtest.TickRecord `json:"records"`
	Transport     map[string]float64           `json:"transport"`
}

// open loads the page in mode and waits until it plays (and the natives are ready).
func (m *browserMatch) open(ctx context.Context, mode string) {
	m.t.Helper()
	require.NoError(m.t, chromedp.Do(ctx, chromedp.Navigate(m.page+"/?mode="+mode)))
	m.waitPage(ctx, "the page to play", func(r pageReport) bool { return r.State == "playing" && r.Snapshots > 0 })
}

// waitPage polls the page's report until cond holds (failing on an error in the page).
func (m *browserMatch) waitPage(ctx context.Context, what string, cond func(pageReport) bool) pageReport {
	m.t.Helper()
	var r pageReport
	deadline := time.Now().Add(60 * time.Second)
	for {
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`window.pageReport || "{}"`))
		require.NoError(m.t, err)
		r = pageReport{}
		require.NoError(m.t, json.Unmarshal([]byte(s), &r))
		require.NotEqual(m.t, "error", r.State, "the page failed: %s", r.Error)
		if cond(r) {
			return r
		}
		require.True(m.t, time.Now().Before(deadline), "%s: not within 60 s; page: %s", what, s)
		time.Sleep(50 * time.Millisecond) // (polling the page)
	}
}

// still stops the movers and the players' input (native and page) and waits for the
// page and every native client to converge on the server's state. It returns the
// page's report and the net tick at which the movers stopped.
func (m *browserMatch) still(ctx context.Context, stop *atomic.Bool) (pageReport, uint32) {
	m.t.Helper()
	var at uint32
	m.do(func() { m.srv.Still, at = true, m.srv.Sched.Info().NetTick })
	stop.Store(true)
	_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.pageStop = true`))
	require.NoError(m.t, err)
	r := m.waitPage(ctx, "the page to converge", func(r pageReport) bool { return r.State == "converged" })
	deadline := time.Now().Add(10 * time.Second)
	for {
		var errs []error
		m.do(func() {
			s, err := m.srv.State()
			require.NoError(m.t, err)
			for _, c := range m.natives {
				if err := c.Converged(s); err != nil {
					errs = append(errs, err)
				}
			}
		})
		if len(errs) == 0 {
			return r, at
		}
		require.True(m.t, time.Now().Before(deadline), "native clients did not converge: %v", errs)
		time.Sleep(20 * time.Millisecond) // (polling the match)
	}
}

// A WASM client in headless Chromium joins a native server beside a native player:
// it receives the spawns (every mover and both players' bodies) and the snapshots,
// predicts its own body with input.Player (the same code as the native player), and
// once everyone lets go of the keys and the movers stop, replicationtest.Converged
// run in the page on its world against the server's state holds, as it does for the
// native player.
func TestBrowserPlayerPredictsAndConverges(t *testing.T) {
	m := newBrowserMatch(t, true)
	var stop atomic.Bool
	native := m.dialNative(pagegame.Wander(3, stop.Load))
	ctx, cancel := context.WithTimeout(m.browser, 2*time.Minute)
	defer cancel()
	m.open(ctx, "play")
	r := m.waitPage(ctx, "3 s of play", func(r pageReport) bool { return r.InputTicks >= 180 })
	require.Equal(t, browserMovers+2, r.Mirrors, "the page mirrors every mover and both players' bodies")
	require.True(t, r.Predicted, "the page predicts its body")
	r, _ = m.still(ctx, &stop)
	t.Logf("page: client %d, %d snapshots, %d mirrors; prediction: %d input ticks, %d matches, %d corrections, %d resets; converged after %d checks; %.3f ms CPU per frame",
		r.ID, r.Snapshots, r.Mirrors, r.InputTicks, r.Matches, r.Corrections, r.Resets, r.Checks, r.FrameMs)
	require.True(t, r.Converged, r.ConvergeError)
	require.Greater(t, r.Snapshots, 60)
	require.Greater(t, r.Matches, uint64(30), "the page's predictions match the server's states")
	require.Equal(t, uint64(1), r.Resets, "the predictor starts once, from the first state")
	require.LessOrEqual(t, r.Corrections, uint64(2), "nothing the page cannot predict happens to its body")
	var st struct{ inputTicks, matches uint64 }
	m.do(func() {
		ps := native.Player.Stats()
		st.inputTicks, st.matches = ps.InputTicks, ps.Matches
	})
	t.Logf("native player: %d input ticks, %d matches", st.inputTicks, st.matches)
	require.Greater(t, st.matches, uint64(30))
}

// A native client (QUIC) and a browser client (WebTransport in Chromium) watch the
// same match: both see every entity (no interest, neither owns one), so for every
// snapshot tick that the server coded against the same view for both (baseline,
// prediction views, no input extension), their bytes are the same: one codec on both
// transports. Both converge on the server's state.
func TestBrowserAndNativeGetTheSameBytes(t *testing.T) {
	m := newBrowserMatch(t, false)
	native := m.dialNative(nil)
	ctx, cancel := context.WithTimeout(m.browser, 2*time.Minute)
	defer cancel()
	m.open(ctx, "watch")
	m.waitPage(ctx, "3 s of snapshots", func(r pageReport) bool { return r.Snapshots >= 90 })
	var stop atomic.Bool
	r, stillAt := m.still(ctx, &stop)
	require.True(t, r.Converged, r.ConvergeError)
	require.Equal(t, browserMovers, r.Mirrors)
	var mine []replicationtest.TickRecord
	m.do(func() { mine = native.Recorder.Records() })

	byTick := map[uint32]replicationtest.TickRecord{}
	for _, rec := range mine {
		byTick[rec.Tick] = rec
	}
	common, same, bytes, moving, movingBytes := 0, 0, 0, 0, 0
	for _, p := range r.Records {
		n, ok := byTick[p.Tick]
		if !ok {
			continue
		}
		common++
		if n.View != p.View {
			continue
		}
		same++
		bytes += p.Bytes
		require.Equal(t, n.Digest, p.Digest, "tick %d, view %q: %d bytes to the page, %d to the native client", p.Tick, p.View, p.Bytes, n.Bytes)
		require.Equal(t, n.Bytes, p.Bytes)
		if p.Tick < stillAt { // records of the moving entities
			moving++
			movingBytes += p.Bytes
		}
	}
	t.Logf("%d ticks recorded by both, %d of them coded against the same view for both: byte-identical, %.0f bytes per tick (%d ticks while the movers moved: %.0f bytes per tick)",
		common, same, float64(bytes)/float64(max(same, 1)), moving, float64(movingBytes)/float64(max(moving, 1)))
	require.GreaterOrEqual(t, common, 60)
	require.GreaterOrEqual(t, same, common/2, "most ticks are coded against the same view for both")
	require.GreaterOrEqual(t, moving, 30, "ticks with the movers' records were compared")
}
