package browser_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/archenet/archenet/replication/replicationtest"
	"github.com/archenet/archenet/tests/internal/harness"
	"github.com/archenet/archenet/tests/internal/pagegame"
	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/quic"
	"github.com/archenet/archenet/transport/websocket"
	"github.com/archenet/archenet/transport/webtransport"
	"github.com/archenet/archenet/transport/webtransport/webtransporttest"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
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
	sl      *websocket.Listener // mounted at /archenet.ws on the page's server
	page    string              // the page's URL
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
	return newMatch(t, pagegame.ServerOptions{Movers: browserMovers, Players: players})
}

// newMatch is newBrowserMatch for a match of options o (its Listener and
// Logger set here).
func newMatch(t *testing.T, o pagegame.ServerOptions) *browserMatch {
	t.Setenv("QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING", "true")
	browser := webtransporttest.Chromium(t)
	wasm := webtransporttest.BuildWasm(t, "", "../internal/pageclient")
	m := &browserMatch{t: t, browser: browser, calls: make(chan func()), quit: make(chan struct{}), done: make(chan struct{})}
	var err error
	m.cert, err = quic.GenerateDevCert(time.Hour)
	require.NoError(t, err)
	m.ql, err = quic.Listen("127.0.0.1:0", &quic.Config{TLS: m.cert.ServerTLS(), Logger: harness.Quiet})
	require.NoError(t, err)
	certs, err := webtransport.NewSelfSigned(webtransport.SelfSignedConfig{})
	require.NoError(t, err)
	m.wl, err = webtransporttest.Listen(&webtransport.Config{TLS: certs.TLSConfig(), Logger: harness.Quiet})
	require.NoError(t, err)
	m.sl, err = websocket.NewListener(&websocket.Config{Logger: harness.Quiet})
	require.NoError(t, err)
	o.Listener, o.Logger = transport.MergeListeners(m.ql, m.wl, m.sl), harness.Quiet
	m.srv, err = pagegame.NewServer(o)
	require.NoError(t, err)

	mux := http.NewServeMux()
	mux.Handle("/endpoint.json", webtransport.EndpointHandler(m.wl.URL, certs.Hashes))
	mux.Handle("/archenet.ws", m.sl)
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
	return m.dialNativeWith(sample, false)
}

// dialNativeWith is dialNative; with messages, the client checks the
// match's messages and pokes (pagegame.Client.Messages).
func (m *browserMatch) dialNativeWith(sample func(uint32, *pagegame.Body) pagegame.Move, messages bool) *pagegame.Client {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := quic.Dial(ctx, m.ql.Addr().String(), &quic.Config{TLS: m.cert.ClientTLS(), Logger: harness.Quiet})
	require.NoError(m.t, err)
	m.t.Cleanup(func() { _ = conn.Close() })
	c, err := pagegame.NewClient(conn, sample, 600, harness.Quiet)
	require.NoError(m.t, err)
	if messages {
		require.NoError(m.t, c.Messages())
	}
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
	Stalls        int                          `json:"stalls"`
	FrameMs       float64                      `json:"frameMs"`
	Checks        int                          `json:"checks"`
	Converged     bool                         `json:"converged"`
	ConvergeError string                       `json:"convergeError"`
	Records       []replicationtest.TickRecord `json:"records"`
	Transport     map[string]float64           `json:"transport"`
	Msgs          pagegame.MessageStats        `json:"msgs"`
	Via           string                       `json:"via"`
	Resumed       bool                         `json:"resumed"`
	Saved         bool                         `json:"saved"`
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
		page, err := chromedp.Run(ctx, chromedp.Evaluate[struct {
			Report string `json:"report"`
			Exited bool   `json:"exited"`
		}](`({report: window.pageReport || "{}", exited: !!window.goExited})`))
		require.NoError(m.t, err)
		s := page.Report
		r = pageReport{}
		require.NoError(m.t, json.Unmarshal([]byte(s), &r))
		require.NotEqual(m.t, "error", r.State, "the page failed: %s", r.Error)
		if cond(r) {
			return r
		}
		require.False(m.t, page.Exited, "%s: the page's program ended (its console is logged below); page: %s", what, s)
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
