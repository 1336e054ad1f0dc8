// Command arenaview is a graphical client of the arena example
// (examples/arena/game) built with Ebitengine: a person plays one avatar
// against NPCs and bot clients.
//
//	cd examples/arenaview && go run .                      server (NPCs + 3 bots) in this process, over QUIC on loopback
//	cd examples/arenaview && go run . -connect 127.0.0.1:4433 -cert /tmp/archenet-arena
//
// The second form joins a server started with
// `go run ./examples/arena -mode server` (from the repository root), trusting
// the development certificate it wrote to -cert.
//
// Controls: the mouse aims (the avatar turns toward the pointer); W/↑ moves
// toward the pointer, S/↓ away from it, A/← and D/→ strafe; the left mouse
// button or Space fires. F1 or Tab toggles the network overlay, F2 the
// debug view (the newest server state of every entity, drawn as an outline
// beside the smoothed pose), Esc quits.
//
// The own avatar is predicted (input.Player) and its corrections smoothed,
// remote avatars, NPCs and other players' projectiles are interpolated
// (components.Visual), and the own projectiles are predicted from the tick
// they are fired.
//
// For tests and screenshots, -script replaces the keyboard and mouse with
// a fixed input sequence and -screenshot-at / -out / -exit-after write PNGs
// of given frames and quit (frames count from the first one that draws the
// own avatar):
//
//	xvfb-run -a -s '-screen 0 1024x768x24' go run . -script -overlay -screenshot-at 30,180 -out /tmp/shots -exit-after 200
//
// The acceptance test (package acceptance) runs that under Xvfb and checks
// the screenshots; `go test ./acceptance -run Scripted -update` rewrites
// screenshot.png, the README's picture, from its run.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/archenet/archenet/examples/arena/game"
)

type options struct {
	connect, cert, out string
	npcs, bots         int
	seed               uint64
	insecure, verbose  bool
	script             bool
	overlay, debug     bool
	shots              []int
	exitAfter          int
	timeout            time.Duration
	width, height      int
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	var shots string
	fs := flag.NewFlagSet("arenaview", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.connect, "connect", "", "server UDP address to join (empty: start a server with NPCs and bots in this process)")
	fs.StringVar(&o.cert, "cert", filepath.Join(os.TempDir(), "archenet-arena"), "-connect: directory of the server's development certificate (cert.pem, key.pem), as written by examples/arena -mode server")
	fs.BoolVar(&o.insecure, "insecure", false, "-connect: accept ANY server certificate (dangerous; prefer -cert)")
	fs.IntVar(&o.npcs, "npcs", 24, "NPCs of the in-process server")
	fs.IntVar(&o.bots, "bots", 3, "bot clients of the in-process server")
	fs.Uint64Var(&o.seed, "seed", 1, "random seed of the in-process server's NPCs and bots")
	fs.BoolVar(&o.script, "script", false, "play a fixed input script instead of the keyboard and mouse (tests, screenshots)")
	fs.BoolVar(&o.overlay, "overlay", false, "start with the network overlay shown (F1/Tab toggles it)")
	fs.BoolVar(&o.debug, "debug", false, "start with the debug view shown (F2 toggles it)")
	fs.StringVar(&shots, "screenshot-at", "", "comma-separated frames to save as PNG (frame 0 is the first that draws the own avatar)")
	fs.StringVar(&o.out, "out", ".", "directory of the screenshots (frame-N.png)")
	fs.IntVar(&o.exitAfter, "exit-after", 0, "quit after this many frames (0: run until the window closes)")
	fs.DurationVar(&o.timeout, "connect-timeout", 10*time.Second, "fail if the own avatar is not drawn within this time")
	fs.IntVar(&o.width, "width", 720, "window width in pixels")
	fs.IntVar(&o.height, "height", 720, "window height in pixels")
	fs.BoolVar(&o.verbose, "v", false, "log connection events")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	for _, f := range strings.Split(shots, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 {
			return o, fmt.Errorf("-screenshot-at %q: want frame numbers", shots)
		}
		o.shots = append(o.shots, n)
	}
	if o.npcs < 0 || o.bots < 0 || o.bots > 200 {
		return o, errors.New("-npcs and -bots must be ≥ 0 (-bots ≤ 200)")
	}
	if o.width < 200 || o.height < 200 {
		return o, errors.New("-width and -height must be at least 200")
	}
	return o, nil
}

// session is what the view runs each frame: the in-process server (nil
// with -connect), its bot clients, and the player's client.
type session struct {
	server localServer
	bots   []*game.Bot
	player *game.Bot
	input  *controls
	addr   string
}

// localServer is the in-process server (a *game.ServerGame), an interface so
// that the page, which has none, links no server code.
type localServer interface {
	Frame(now time.Time)
	Close()
}

func (s *session) close() {
	if s.player != nil {
		s.player.Close()
	}
	for _, b := range s.bots {
		b.Close()
	}
	if s.server != nil {
		s.server.Close()
	}
}

// frame steps the server, the bots and the player's client at now, on the
// caller's goroutine (the worlds are not safe for concurrent use).
func (s *session) frame(now time.Time) error {
	if s.server != nil {
		s.server.Frame(now)
	}
	for i, b := range s.bots {
		if err := b.Frame(now); err != nil {
			return fmt.Errorf("bot %d: %w", i+1, err)
		}
	}
	return s.player.Frame(now)
}
