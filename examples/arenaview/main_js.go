//go:build js && wasm

package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"syscall/js"
	"time"

	"github.com/hajimehoshi/ebiten/v2"

	"github.com/archenet/archenet/examples/arena/game"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/browser"
)

// main is the browser build: the page (served by examples/arena -web) runs it; it
// fetches the server's endpoint document, opens a WebTransport session with the
// certificate hashes it lists, and plays one avatar with the same client code as the
// native build (game.Bot: replication.Client, input.Player). Query parameters: script,
// overlay, debug (as the flags -script, -overlay, -debug) and endpoint (the document's
// path, default /archenet.json).
//
// It publishes its state for people and tests in window.archenet: state
// ("connecting", "playing", "error"), error, startMs, connectedMs and firstSnapshotMs
// (performance.now(), milliseconds since the page started loading, when the WebAssembly
// client started, when its session was open, and when the first snapshot was decoded;
// welcomeMs when the server's Welcome was taken; the client runs until its first
// snapshot before Ebitengine starts; firstUpdateMs is Ebitengine's first game update,
// after its start), frames,
// updateMs and drawMs (mean CPU time of an Update, one 60 Hz tick of the client, and of a
// Draw), and the connection's counters.
func main() {
	o, _ := parseFlags(nil, io.Discard)
	q, _ := url.ParseQuery(js.Global().Get("location").Get("search").String()[min(1, len(js.Global().Get("location").Get("search").String())):])
	o.script, o.overlay, o.debug = q.Has("script"), q.Has("overlay"), q.Has("debug")
	endpoint := q.Get("endpoint")
	if endpoint == "" {
		endpoint = "/archenet.json"
	}
	p := newPage()
	p.set("startMs", now()) // the WebAssembly module is compiled and its runtime started
	p.set("state", "connecting")
	conn, err := dial(p, endpoint, q.Get("transport"), o.timeout)
	if err != nil {
		p.fail(err)
		return
	}
	p.set("connectedMs", now())
	s := &session{input: &controls{}, addr: conn.RemoteAddr().String()}
	if s.player, err = game.NewBot(game.BotOptions{Conn: conn, Control: s.input.control}); err != nil {
		_ = conn.Close()
		p.fail(err)
		return
	}
	// The session opens before Ebitengine starts: a page is one thread, and
	// Ebitengine's start would hold up the dial's steps.
	g := &browserGame{view: newView(o, s), page: p, conn: conn}
	first := true
	s.player.Client().OnSnapshot(func(uint32, time.Time) {
		if first {
			first = false
			p.set("firstSnapshotMs", now())
		}
	})
	// Run the client until its first snapshot (or for 3 s) before Ebitengine
	// starts: its first frames compile shaders for some 400 ms, during which
	// no update would take the state that has arrived.
	for deadline := time.Now().Add(3 * time.Second); first && time.Now().Before(deadline); time.Sleep(time.Second / 60) {
		welcomed := s.player.Client().State() != replication.StateConnecting
		if err := s.player.Frame(time.Now()); err != nil {
			s.close()
			p.fail(err)
			return
		}
		if !welcomed && s.player.Client().State() != replication.StateConnecting {
			p.set("welcomeMs", now())
		}
	}
	p.set("state", "playing")
	p.set("server", s.addr)
	err = ebiten.RunGame(g)
	if err == nil {
		err = g.view.err
	}
	_, _ = consoleWriter{}.Write([]byte(g.view.summary()))
	s.close()
	if err != nil {
		p.fail(err)
	}
}

// dial connects over WebTransport, or over the WebSocket fallback at
// /archenet.ws (transport/browser.Dial: when asked to with
// transport=websocket, when the browser has no WebTransport, or when the
// WebTransport dial fails within 5 s). The page publishes which ("via").
func dial(p page, endpoint, want string, timeout time.Duration) (transport.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	conn, via, err := browser.Dial(ctx, &browser.DialOptions{Endpoint: endpoint, Transport: want})
	p.set("via", via)
	return conn, err
}

// browserGame is the view with its CPU time per frame measured and published.
type browserGame struct {
	*view
	page               page
	conn               transport.Conn
	frames, updates    int
	drawCPU, updateCPU time.Duration
}

func (g *browserGame) Update() error {
	if g.updates == 0 {
		g.page.set("firstUpdateMs", now())
	}
	t0 := time.Now()
	err := g.view.Update()
	g.updateCPU += time.Since(t0)
	g.updates++
	return err
}

func (g *browserGame) Draw(screen *ebiten.Image) {
	t0 := time.Now()
	g.view.Draw(screen)
	g.drawCPU += time.Since(t0)
	g.frames++
	if g.frames%30 == 0 {
		st := g.conn.Stats()
		g.page.set("frames", g.frames)
		ms := func(d time.Duration, n int) float64 {
			return float64(d) / float64(time.Millisecond) / float64(max(n, 1))
		}
		g.page.set("updateMs", ms(g.updateCPU, g.updates)) // per 60 Hz tick: input, client, prediction
		g.page.set("drawMs", ms(g.drawCPU, g.frames))      // per drawn frame
		g.page.set("datagramsReceived", st.DatagramsReceived)
		g.page.set("datagramsDropped", st.DatagramsDropped)
		g.page.set("bytesIn", st.DatagramBytesReceived+st.MessageBytesReceived)
		g.page.set("mirrors", g.s.player.Client().Mirrors())
		g.page.set("avatarFrames", g.view.frame)
		g.page.set("secondsPlaying", time.Since(g.view.start).Seconds())
	}
}

// now is performance.now(): milliseconds since the page started loading.
func now() float64 { return js.Global().Get("performance").Call("now").Float() }

// page is window.archenet, and the status line of the page (#status).
type page struct{ obj js.Value }

func newPage() page {
	obj := js.Global().Get("Object").New()
	js.Global().Set("archenet", obj)
	return page{obj}
}

func (p page) set(k string, v any) {
	switch x := v.(type) {
	case uint64:
		v = float64(x)
	}
	p.obj.Set(k, v)
	if k == "state" {
		if el := js.Global().Get("document").Call("getElementById", "status"); el.Truthy() {
			el.Set("textContent", fmt.Sprint(v))
		}
	}
}

// fail shows err in the page.
func (p page) fail(err error) {
	p.obj.Set("error", err.Error())
	p.set("state", "error")
	if el := js.Global().Get("document").Call("getElementById", "status"); el.Truthy() {
		el.Set("textContent", "could not play: "+err.Error())
		el.Get("classList").Call("add", "error")
	}
	js.Global().Get("console").Call("error", err.Error())
}

// consoleWriter writes log lines to the browser console.
type consoleWriter struct{}

func (consoleWriter) Write(b []byte) (int, error) {
	js.Global().Get("console").Call("warn", string(b))
	return len(b), nil
}
