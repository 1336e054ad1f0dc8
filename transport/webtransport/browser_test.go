//go:build !js

package webtransport_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/webtransport"
	"github.com/archenet/archenet/transport/webtransport/webtransporttest"
)

// browserEnv is a WebTransport listener, a page server of its origin (or of another
// one, refused), and headless Chromium running internal/wasmprobe.
type browserEnv struct {
	*env
	page *httptest.Server
	ctx  context.Context
}

func newBrowserEnv(t *testing.T, cfg webtransport.Config) *browserEnv {
	return newBrowserEnvOrigin(t, cfg, true)
}

// newBrowserEnvOrigin is newBrowserEnv with the page served from the session's
// origin (its port on TCP), or from another one the listener does not allow.
func newBrowserEnvOrigin(t *testing.T, cfg webtransport.Config, sameOrigin bool) *browserEnv {
	ctx := webtransporttest.Chromium(t)
	probePath := webtransporttest.BuildWasm(t, "", "./internal/wasmprobe")
	b := &browserEnv{ctx: ctx}
	mux := http.NewServeMux()
	b.env = newEnvWith(t, cfg, webtransporttest.Listen)
	if sameOrigin {
		b.page = webtransporttest.PageServer(t, b.l.Addr().(*net.UDPAddr).Port, webtransporttest.WasmHandler(t, probePath, mux))
	} else {
		b.page = httptest.NewServer(webtransporttest.WasmHandler(t, probePath, mux))
		t.Cleanup(b.page.Close)
	}
	mux.Handle("/endpoint.json", webtransport.EndpointHandler(b.l.URL, b.certs.Hashes))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, webtransporttest.RunPage) })
	return b
}

// run loads the probe page with query q and returns its JSON report.
func (b *browserEnv) run(t *testing.T, q url.Values) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 90*time.Second)
	defer cancel()
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(b.page.URL+"/?"+q.Encode())))
	s, err := chromedp.Run(ctx, chromedp.Poll[string]("window.probeResult", chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(80*time.Second)))
	require.NoError(t, err, "waiting for the probe's report")
	var res map[string]any
	require.NoError(t, json.Unmarshal([]byte(s), &res))
	t.Logf("probe report: %s", s)
	require.Nil(t, res["error"], "the probe failed")
	return res
}

// The browser end of a connection (js/wasm Dial in Chromium) against the native
// Listener: messages in order (one of 1 MiB), datagrams both ways at 60 Hz on
// loopback without loss, the 1200-byte limit (or the browser's own, if
// smaller), and the server's close code and reason.
func TestBrowserEcho(t *testing.T) {
	b := newBrowserEnv(t, webtransport.Config{})
	type tally struct {
		received int
		err      error
	}
	served := make(chan tally, 1)
	go func() {
		served <- serveProbe(b.l)
	}()
	res := b.run(t, url.Values{"mode": {"echo"}})
	got := <-served
	require.NoError(t, got.err)
	require.EqualValues(t, 1<<20, res["bigBytes"])
	require.EqualValues(t, 180, res["datagramsReceived"], "server → browser datagrams lost at 60 Hz on loopback")
	require.Equal(t, 180, got.received, "browser → server datagrams lost at 60 Hz on loopback")
	// The browser sends at most MaxDatagramPayload, or its own
	// maxDatagramSize if smaller (1215 in Chromium 156, 1024 in 148).
	maxDg, _ := res["maxDatagramSize"].(float64)
	require.LessOrEqual(t, maxDg, float64(webtransport.MaxDatagramPayload))
	require.GreaterOrEqual(t, maxDg, 1000.0)
	require.Contains(t, res["tooLarge"], fmt.Sprintf("exceeds the maximum payload of %d bytes", int(maxDg)))
	// The server's close code and reason reach the page (the close capsule is
	// written without webtransport-go's STOP_SENDING, see closeSession).
	require.EqualValues(t, transport.CodeApplication+5, res["closeCode"], "page: %v", res["closed"])
	require.Equal(t, "bye", res["closeReason"])
	require.Equal(t, true, res["closeRemote"])
	// Chromium 156 has no WebTransport.getStats(): the page cannot know the RTT
	// (Stats.RTT stays 0, input.TickSync then relies on the server's feedback).
	if res["hasGetStats"] == true {
		require.Greater(t, res["rttMs"], 0.0, "the browser has getStats: RTT is known")
	}
	t.Logf("figures: dial %v ms, datagram loss 0/180 each way at 60 Hz; getStats: %v, RTT %.2f ms", res["dialMs"], res["hasGetStats"], res["rttMs"])
}

// serveProbe plays the server's side of the probe's echo script.
func serveProbe(l *webtransport.Listener) (t struct {
	received int
	err      error
}) {
	ctx, cancel := context.WithTimeout(context.Background(), 80*time.Second)
	defer cancel()
	c, err := l.Accept(ctx)
	if err != nil {
		t.err = err
		return
	}
	defer c.Close()
	if m, err := c.ReceiveMessage(ctx); err != nil || string(m) != "hello probe" {
		t.err = fmt.Errorf("hello: %q %v", m, err)
		return
	}
	// A Welcome first: until it, the server queues only a few datagrams.
	if t.err = c.SendMessage(transport.Welcome{ClientID: 1}.Append(nil)); t.err != nil {
		return
	}
	for i := range 50 {
		if t.err = c.SendMessage(fmt.Appendf(nil, "m%d", i)); t.err != nil {
			return
		}
	}
	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = byte(i % 251)
	}
	if t.err = c.SendMessage(big); t.err != nil {
		return
	}
	tk := time.NewTicker(time.Second / 60)
	dg := make([]byte, webtransport.MaxDatagramPayload)
	for i := range 180 {
		<-tk.C
		binary.BigEndian.PutUint32(dg, uint32(i))
		if t.err = c.SendDatagram(dg); t.err != nil {
			return
		}
	}
	tk.Stop()
	time.Sleep(200 * time.Millisecond) // the last datagrams before the message that ends them
	if t.err = c.SendMessage([]byte("dg-done")); t.err != nil {
		return
	}
	seen := map[uint32]bool{}
	for {
		m, err := c.ReceiveMessage(ctx)
		if err != nil {
			t.err = err
			return
		}
		for {
			d, ok := c.PollDatagram()
			if !ok {
				break
			}
			seen[binary.BigEndian.Uint32(d)] = true
		}
		if string(m) == "dg-done" {
			break
		}
	}
	t.received = len(seen)
	t.err = c.CloseWithReason(transport.CodeApplication+5, "bye")
	return
}

// A page pinned to a hash the server's certificate does not have (a page older
// than the server's rotation) gets an error that says so and what to do.
func TestBrowserStaleHash(t *testing.T) {
	b := newBrowserEnv(t, webtransport.Config{})
	other, err := webtransport.NewSelfSigned(webtransport.SelfSignedConfig{})
	require.NoError(t, err)
	res := b.run(t, url.Values{"mode": {"stale"}, "url": {b.l.URL("")}, "hash": {other.Hashes()[0].String()}})
	msg, _ := res["dialError"].(string)
	require.Contains(t, msg, "opening the session")
	require.Contains(t, msg, "not one of the 1 pinned hashes")
	require.Contains(t, msg, "reload the page")
	require.NotContains(t, msg, "origin", "the page is of the session's origin")
}

// A page that floods datagrams is closed with CodeFlood, and the page sees the code.
func TestBrowserFlood(t *testing.T) {
	b := newBrowserEnv(t, webtransport.Config{DatagramRateLimit: 300, DatagramBurst: 100})
	accepted := make(chan transport.Conn, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		c, _ := b.l.Accept(ctx)
		accepted <- c
	}()
	res := b.run(t, url.Values{"mode": {"flood"}})
	c := <-accepted
	require.NotNil(t, c)
	<-c.Done()
	var ce *transport.CloseError
	require.ErrorAs(t, c.Err(), &ce)
	require.Equal(t, transport.CodeFlood, ce.Code, "server side: %v", c.Err())
	require.EqualValues(t, transport.CodeFlood, res["closeCode"], "the page sees why: %v", res["closed"])
	require.Equal(t, "datagram flood: more than 300 datagrams/s (burst 100)", res["closeReason"])
	require.Greater(t, res["sent"], float64(300))
}

// A page from an origin the server does not allow gets an error that names that
// cause; the server refused the session with 403 before any session state existed.
func TestBrowserRefusedOrigin(t *testing.T) {
	b := newBrowserEnvOrigin(t, webtransport.Config{}, false)
	res := b.run(t, url.Values{"mode": {"origin"}})
	msg, _ := res["dialError"].(string)
	t.Logf("the page shows: %s", msg)
	require.Contains(t, msg, "opening the session")
	require.Contains(t, msg, "the server refused this page's origin "+b.page.URL+" (another origin than the session's: the server must list it in its webtransport.Config.AllowedOrigins)")
	_, ok := b.l.PollAccept()
	require.False(t, ok)
}

// A page that closes its session with a code and a reason: the server sees both,
// from the peer.
func TestBrowserCloseReachesServer(t *testing.T) {
	b := newBrowserEnv(t, webtransport.Config{})
	accepted := make(chan transport.Conn, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		c, err := b.l.Accept(ctx)
		if err == nil {
			_, _ = c.ReceiveMessage(ctx)
			_ = c.SendMessage(transport.Welcome{ClientID: 1}.Append(nil))
		}
		accepted <- c
	}()
	b.run(t, url.Values{"mode": {"bye"}})
	c := <-accepted
	require.NotNil(t, c)
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the server's connection is still open")
	}
	var ce *transport.CloseError
	require.ErrorAs(t, c.Err(), &ce)
	require.Equal(t, transport.CloseError{Code: transport.CodeApplication + 7, Reason: "page left", Remote: true}, *ce)
}
