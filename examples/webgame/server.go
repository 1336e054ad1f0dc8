//go:build !js

package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	arche "github.com/mlange-42/arche/ecs"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/transport/browser"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "where to serve the page")
	flag.Parse()
	wasm, err := buildPage()
	if err == nil {
		err = run(*addr, wasm, func(url string) { fmt.Println("open", url, "in Chromium") }, nil, nil)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// run serves the game on addr until stop is closed (nil: forever); sent, if
// set, runs after each tick's Send (the test's live check records there).
func run(addr string, wasm []byte, ready func(url string), stop <-chan struct{}, sent func(*arche.World, *replication.Server)) error {
	web, err := browser.Serve(browser.Config{Addr: addr, Wasm: wasm})
	if err != nil {
		return err
	}
	defer web.Close()
	w := arche.NewWorld()
	srv, err := replication.NewServer(&w, web.Listener(), replication.ServerConfig{Registry: Registry()})
	if err != nil {
		return err
	}
	clicks, _ := replication.ServerMessages[Click](srv)
	dots := arche.NewBuilder(&w, arche.ComponentID[components.Replicated](&w), arche.ComponentID[Dot](&w))
	spawn := func(x, y float64) {
		*(*Dot)(w.Get(dots.New(), arche.ComponentID[Dot](&w))) = Dot{X: x, Y: y, VX: 90, VY: 60}
	}
	for i := range 8 {
		spawn(float64(40+70*i), float64(40+50*i))
	}
	ready(web.URL())
	for tick := time.NewTicker(time.Second / 30); ; {
		select {
		case <-stop:
			return srv.Close()
		case <-tick.C:
		}
		srv.Receive()
		for m := range clicks.Received() { // a dot where a player clicked
			spawn(m.Value.X, m.Value.Y)
		}
		for q := w.Query(arche.All(arche.ComponentID[Dot](&w))); q.Next(); {
			d := (*Dot)(q.Get(arche.ComponentID[Dot](&w)))
			d.X, d.Y = d.X+d.VX/30, d.Y+d.VY/30
			if d.X < 0 || d.X > W {
				d.VX = -d.VX
			}
			if d.Y < 0 || d.Y > H {
				d.VY = -d.VY
			}
		}
		srv.Send()
		if sent != nil {
			sent(&w, srv)
		}
	}
}

// buildPage builds this command for the browser (GOOS=js GOARCH=wasm).
func buildPage() ([]byte, error) {
	out := filepath.Join(os.TempDir(), "webgame.wasm")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, "./examples/webgame")
	cmd.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building the page (run from the repository root): %v\n%s", err, b)
	}
	return os.ReadFile(out)
}
