//go:build js && wasm

// Command pageclient is the page of archenet's browser tests (tests/browser_test.go):
// a pagegame client in headless Chromium, over transport/webtransport, with the same
// replication.Client and input.Player as the native clients of the same match.
//
// Query parameters: mode "play" (a predicted body, scripted input) or "watch" (a
// mirror only); transport=websocket plays over the WebSocket fallback at
// /archenet.ws (also taken when the browser has no WebTransport, or a
// WebTransport dial fails); messages=1 checks the match's game messages and pokes the server
// (pagegame.Client.Messages); resume=1 has the client keep its seat ticket in sessionStorage
// (replication.ClientConfig.KeepTicket) and, once reloaded, come back to that seat with it. It dials the session /endpoint.json names and plays a frame every
// 1/60 s. Once the test sets window.pageStop, the player lets go of its keys and the
// page fetches the server's state (/server.json, a replicationtest.State) every
// 100 ms and runs replicationtest.Converged on its own world against it. It publishes
// window.pageReport (JSON) every half second and when it converges: state, client
// id, snapshots and mirrors, the player's prediction counters, CPU per frame, the
// convergence result and, once converged, the snapshot ticks it recorded.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"syscall/js"
	"time"

	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/replication/replicationtest"
	"github.com/archenet/archenet/tests/internal/pagegame"
	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/browser"
)

// report is window.pageReport.
type report struct {
	Mode         string                       `json:"mode"`
	State        string                       `json:"state"` // connecting, playing, converged, error
	Error        string                       `json:"error,omitempty"`
	ID           int                          `json:"id"`
	Snapshots    int                          `json:"snapshots"`
	Mirrors      int                          `json:"mirrors"`
	Predicted    bool                         `json:"predicted"` // the player's body is predicted
	InputTicks   uint64                       `json:"inputTicks"`
	Matches      uint64                       `json:"matches"`
	Corrections  uint64                       `json:"corrections"`
	Resets       uint64                       `json:"resets"`
	Stalls       int                          `json:"stalls"`  // frames later than the input lead after the one before
	FrameMs      float64                      `json:"frameMs"` // mean CPU time of a frame
	Checks       int                          `json:"checks"`  // convergence checks run
	Converged    bool                         `json:"converged"`
	ConvergeErr  string                       `json:"convergeError,omitempty"`
	Records      []replicationtest.TickRecord `json:"records,omitempty"`
	Transport    map[string]any               `json:"transport,omitempty"`
	MessagesRecv uint64                       `json:"messagesReceived"`
	// Via is the transport the page plays over ("webtransport" or
	// "websocket").
	Via string `json:"via"`
	// With resume=1: the page came back with a saved ticket (Resumed), and
	// it saved one (Saved).
	Resumed bool `json:"resumed"`
	Saved   bool `json:"saved"`
	// With messages=1: the game messages it saw (pagegame.MessageStats).
	Msgs pagegame.MessageStats `json:"msgs"`
}

func main() {
	q, _ := url.ParseQuery(js.Global().Get("location").Get("search").String()[1:])
	r := &report{Mode: q.Get("mode"), State: "connecting"}
	publish(r)
	if err := play(r, q); err != nil {
		r.State, r.Error = "error", err.Error()
	}
	publish(r)
}

// ticketKey is where the page keeps its seat's ticket (sessionStorage).
const ticketKey = "archenet-ticket"

func publish(r *report) {
	b, _ := json.Marshal(r)
	js.Global().Set("pageReport", string(b))
}

func stopped() bool { return js.Global().Get("pageStop").Truthy() }

func play(r *report, q url.Values) error {
	conn, err := dial(r, q.Get("transport"))
	if err != nil {
		return err
	}
	defer conn.Close()
	var sample func(uint32, *pagegame.Body) pagegame.Move
	if r.Mode == "play" {
		sample = pagegame.Wander(7, stopped)
	}
	var tweak []func(*replication.ClientConfig)
	if q.Get("resume") == "1" {
		// The seat's ticket is kept in sessionStorage by the client itself
		// (ClientConfig.KeepTicket); the report says whether one was there.
		r.Resumed = js.Global().Get("sessionStorage").Call("getItem", ticketKey).Truthy()
		tweak = append(tweak, func(c *replication.ClientConfig) { c.KeepTicket = ticketKey })
	}
	c, err := pagegame.NewClient(conn, sample, 600, slog.New(slog.NewTextHandler(io.Discard, nil)), tweak...)
	if err != nil {
		return err
	}
	if q.Get("messages") == "1" {
		if err := c.Messages(); err != nil {
			return err
		}
	}
	c.Net.OnSnapshot(func(uint32, time.Time) { r.Snapshots++ })
	r.State = "playing"
	tk := time.NewTicker(time.Second / 60)
	defer tk.Stop()
	var cpu time.Duration
	frames := 0
	var nextCheck, last time.Time
	for range tk.C {
		t0 := time.Now()
		// A page starved of the processor (a busy machine) falls behind the
		// server: a gap longer than the input lead lets the server's states
		// overtake the prediction, which then restarts from them.
		if c.Player != nil && c.Player.Clock() != nil && !last.IsZero() && t0.Sub(last) > time.Duration((c.Player.Clock().Lead()+1)*float64(time.Second)/pagegame.SimRate) {
			r.Stalls++
		}
		last = t0
		if err := c.Frame(); err != nil {
			return err
		}
		cpu += time.Since(t0)
		frames++
		if stopped() && time.Now().After(nextCheck) {
			nextCheck = time.Now().Add(100 * time.Millisecond)
			if done := check(c, r); done {
				r.Records = c.Recorder.Records()
				fill(r, c, cpu, frames)
				return nil
			}
		}
		if frames%30 == 0 {
			fill(r, c, cpu, frames)
			r.Saved = q.Get("resume") == "1" && js.Global().Get("sessionStorage").Call("getItem", ticketKey).Truthy()
			publish(r)
		}
	}
	return nil
}

// dial connects over WebTransport, or over the WebSocket fallback at
// /archenet.ws (transport/browser.Dial): when asked to ("websocket"), when
// the browser has no WebTransport, or when a WebTransport dial fails
// within 5 s.
func dial(r *report, want string) (transport.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	conn, via, err := browser.Dial(ctx, &browser.DialOptions{Endpoint: "/endpoint.json", Transport: want})
	r.Via = via
	return conn, err
}

// check runs Converged against the server's state and reports whether it holds.
func check(c *pagegame.Client, r *report) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b, err := fetch(ctx, "/server.json")
	if err != nil {
		r.ConvergeErr = err.Error()
		return false
	}
	var s replicationtest.State
	if err := json.Unmarshal(b, &s); err != nil {
		r.ConvergeErr = "server state: " + err.Error()
		return false
	}
	r.Checks++
	err = c.Converged(s)
	r.Converged = err == nil
	r.ConvergeErr = ""
	if err != nil {
		r.ConvergeErr = err.Error()
	} else {
		r.State = "converged"
	}
	return r.Converged
}

func fill(r *report, c *pagegame.Client, cpu time.Duration, frames int) {
	r.ID = int(c.Net.ID())
	r.Mirrors = c.Net.Mirrors()
	if c.Player != nil {
		_, r.Predicted = c.Player.Entity()
		st := c.Player.Stats()
		r.InputTicks, r.Matches, r.Corrections, r.Resets = st.InputTicks, st.Matches, st.Corrections, st.Resets
	}
	r.FrameMs = float64(cpu) / float64(time.Millisecond) / float64(max(frames, 1))
	st := c.Recorder.Stats()
	r.MessagesRecv = st.MessagesReceived
	r.Msgs = c.Msgs
	r.Transport = map[string]any{
		"datagramsReceived": st.DatagramsReceived, "datagramsDropped": st.DatagramsDropped,
		"datagramBytesReceived": st.DatagramBytesReceived, "datagramsSent": st.DatagramsSent,
	}
}

// fetch GETs path from the page's server.
func fetch(ctx context.Context, path string) ([]byte, error) {
	type result struct {
		b   []byte
		err error
	}
	ch := make(chan result, 1)
	var then, fail, gotBody js.Func
	release := func() { then.Release(); fail.Release(); gotBody.Release() }
	fail = js.FuncOf(func(_ js.Value, args []js.Value) any {
		ch <- result{err: fmt.Errorf("fetch %s: %s", path, js.Global().Get("String").Invoke(args[0]).String())}
		return nil
	})
	gotBody = js.FuncOf(func(_ js.Value, args []js.Value) any {
		u := js.Global().Get("Uint8Array").New(args[0])
		b := make([]byte, u.Get("length").Int())
		js.CopyBytesToGo(b, u)
		ch <- result{b: b}
		return nil
	})
	then = js.FuncOf(func(_ js.Value, args []js.Value) any {
		rsp := args[0]
		if !rsp.Get("ok").Bool() {
			ch <- result{err: fmt.Errorf("fetch %s: HTTP %d", path, rsp.Get("status").Int())}
			return nil
		}
		rsp.Call("arrayBuffer").Call("then", gotBody, fail)
		return nil
	})
	js.Global().Call("fetch", path, map[string]any{"cache": "no-store"}).Call("then", then, fail)
	select {
	case r := <-ch:
		release()
		return r.b, r.err
	case <-ctx.Done():
		go func() { <-ch; release() }()
		return nil, ctx.Err()
	}
}
