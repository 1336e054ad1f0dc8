// Package acceptance tests the arenaview command as a person would see it:
// it builds the command, plays it under Xvfb and checks the screenshots.
// It is a package of its own because Ebitengine needs an X display from
// the moment it is linked in (its init fails without DISPLAY): these tests
// start the display themselves, and skip when Xvfb is missing.
package acceptance

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/archenet/archenet/examples/arenaview/palette"
)

var update = flag.Bool("update", false, "rewrite ../screenshot.png (the README's) from the scripted run")

// Screenshot frames of the scripted run. The script holds KeyForward
// (toward the pointer) with the pointer right of the own avatar for frames
// 0–199, above it for 200–399 (main.script).
const (
	shotA, shotB, shotC = 30, 180, 380
	exitAfter           = 400
)

// TestScriptedPlayUnderXvfb starts the graphical client under Xvfb against
// its in-process server (24 NPCs, 3 bots, QUIC on loopback), plays the
// input script and checks three screenshots: the own avatar moved right,
// then up (the pointer's path to the aim and the screen mapping), and
// NPCs, the bots' avatars, projectiles (own predicted ones too) and the
// debug view's server-state outlines are drawn.
func TestScriptedPlayUnderXvfb(t *testing.T) {
	xvfb, err := exec.LookPath("xvfb-run")
	if err != nil {
		t.Skip("xvfb-run not installed (Debian: apt-get install xvfb xauth)")
	}
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	bin := filepath.Join(out, "arenaview")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/archenet/archenet/examples/arenaview")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	cmd := exec.CommandContext(ctx, xvfb, "-a", "-s", "-screen 0 1024x768x24",
		bin, "-script", "-overlay", "-debug",
		"-screenshot-at", fmt.Sprintf("%d,%d,%d", shotA, shotB, shotC), "-out", out,
		"-exit-after", fmt.Sprint(exitAfter))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err = cmd.Run()
	t.Logf("client ran %v\nstdout:\n%s\nstderr:\n%s", time.Since(start).Round(time.Millisecond), stdout.String(), stderr.String())
	if err != nil {
		t.Fatalf("client: %v", err)
	}

	var cs []counts
	for _, f := range []int{shotA, shotB, shotC} {
		c := census(loadPNG(t, filepath.Join(out, fmt.Sprintf("frame-%d.png", f))))
		t.Logf("frame %d: %+v", f, c)
		cs = append(cs, c)
	}

	// The own avatar (a disc of radius 1 m = 7 px) is in every shot and
	// moved right, then up: 150 or 200 frames (2.5 or 3.3 s at 60 TPS,
	// longer if the machine is slow) at up to 6 m/s is 100 px or more.
	for _, c := range cs {
		if c.own.n < 60 {
			t.Fatalf("own avatar not drawn: %d pixels of its colour", c.own.n)
		}
	}
	dx, dy := cs[1].own.x-cs[0].own.x, cs[1].own.y-cs[0].own.y
	t.Logf("own avatar moved (%.1f, %.1f) px from frame %d to %d", dx, dy, shotA, shotB)
	if dx < 40 || math.Abs(dy) > dx/3 {
		t.Errorf("own avatar moved (%.1f, %.1f) px between frames %d and %d; want > 40 px to the right, nearly horizontal", dx, dy, shotA, shotB)
	}
	dx, dy = cs[2].own.x-cs[1].own.x, cs[2].own.y-cs[1].own.y
	t.Logf("own avatar moved (%.1f, %.1f) px from frame %d to %d", dx, dy, shotB, shotC)
	if dy > -40 || math.Abs(dx) > -dy/2 {
		t.Errorf("own avatar moved (%.1f, %.1f) px between frames %d and %d; want > 40 px up, nearly vertical", dx, dy, shotB, shotC)
	}
	// Remote entities: 24 NPCs (interpolated) and 3 bot avatars.
	for _, c := range cs {
		if c.npc.n < 24*40 {
			t.Errorf("NPCs: %d pixels of their colour, want ≥ %d (24 discs)", c.npc.n, 24*40)
		}
		if c.remote.n < 3*60 {
			t.Errorf("bot avatars: %d pixels of their colour, want ≥ %d (3 discs)", c.remote.n, 3*60)
		}
		if c.debug.n < 100 {
			t.Errorf("debug view: %d pixels of the server-state outline colour, want ≥ 100", c.debug.n)
		}
	}
	// Projectiles: NPCs fire every 40–100 ticks, the script most of the
	// time (own shots are predicted, drawn the frame they are fired).
	var shots, own int
	for _, c := range cs {
		shots += c.shot.n
		own += c.ownShot.n
	}
	if shots < 20 {
		t.Errorf("other projectiles: %d pixels in all, want some", shots)
	}
	if own < 10 {
		t.Errorf("own projectiles: %d pixels in all, want some", own)
	}
	if *update && !t.Failed() {
		src, err := os.ReadFile(filepath.Join(out, fmt.Sprintf("frame-%d.png", shotB)))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("..", "screenshot.png"), src, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func loadPNG(t *testing.T, name string) image.Image {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return img
}

// blob is the pixels of one colour: count and centroid.
type blob struct {
	n    int
	x, y float64
}

type counts struct {
	own, remote, npc, shot, ownShot, debug blob
}

// census counts the pixels of each entity colour (within a small
// tolerance: antialiased edges blend, interiors are exact).
func census(img image.Image) counts {
	var c counts
	classes := []struct {
		col color.RGBA
		b   *blob
	}{
		{palette.Own, &c.own}, {palette.Remote, &c.remote}, {palette.NPC, &c.npc},
		{palette.Shot, &c.shot}, {palette.OwnShot, &c.ownShot}, {palette.Debug, &c.debug},
	}
	r := img.Bounds()
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			p := color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)
			for _, k := range classes {
				if near(p, k.col) {
					k.b.n++
					k.b.x += float64(x)
					k.b.y += float64(y)
					break
				}
			}
		}
	}
	for _, k := range classes {
		if k.b.n > 0 {
			k.b.x /= float64(k.b.n)
			k.b.y /= float64(k.b.n)
		}
	}
	return c
}

func near(a, b color.RGBA) bool {
	d := func(x, y uint8) bool { return max(x, y)-min(x, y) <= 8 }
	return d(a.R, b.R) && d(a.G, b.G) && d(a.B, b.B)
}
