package main

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/hajimehoshi/ebiten/v2"
	"github.com/hajimehoshi/ebiten/v2/vector"
	"github.com/mlange-42/arche/ecs"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/examples/arena/game"
	"github.com/archenet/archenet/examples/arenaview/palette"
)

// Sizes in metres.
const (
	bodyRadius  = 1.0
	npcRadius   = 0.9
	shotRadius  = 0.35
	flashTime   = 250 * time.Millisecond
	flashRadius = 1.6
)

// view is the ebiten.Game: it steps the session in Update and draws the
// player's world in Draw (both on ebiten's game goroutine).
type view struct {
	o    options
	s    *session
	w    *ecs.World
	err  error
	font *debugFont // the overlay's text

	idTrans, idVisual, idNetID, idAvatar, idProj ecs.ID

	start time.Time
	ready bool
	frame int // frames since the own avatar was first drawn
	// The pointer on screen: the mouse's, or the script's.
	pointerX, pointerY float32
	script             scripted // (-script)
	overlay            bool
	debug              bool
	pending            []int    // screenshots to take in the next Draw
	saved              []string // screenshot files written

	prevShots map[ecs.Entity]shotInfo
	flashes   map[ecs.Entity]time.Time // avatars hit, until when they flash
	sparks    []spark
	hits      int

	rates  rates
	canvas *ebiten.Image
	pixels []byte
}

type shotInfo struct {
	pos     components.Vec3
	shooter uint8
}

type spark struct {
	pos   components.Vec3
	until time.Time
}

func newView(o options, s *session) *view {
	w := s.player.World()
	return &view{
		o: o, s: s, w: w, font: newDebugFont(),
		script:    scripted{leg: -1},
		idTrans:   ecs.ComponentID[components.Transform](w),
		idVisual:  ecs.ComponentID[components.Visual](w),
		idNetID:   ecs.ComponentID[components.NetID](w),
		idAvatar:  ecs.ComponentID[game.Avatar](w),
		idProj:    ecs.ComponentID[game.Projectile](w),
		overlay:   o.overlay,
		debug:     o.debug,
		prevShots: map[ecs.Entity]shotInfo{},
		flashes:   map[ecs.Entity]time.Time{},
	}
}

// Layout keeps a fixed logical screen: the window scales it.
func (v *view) Layout(int, int) (int, int) { return v.o.width, v.o.height }

// Update reads the input, steps the server, bots and the player's client,
// and notes hits, screenshots and the end.
func (v *view) Update() error {
	now := time.Now()
	if v.start.IsZero() {
		v.start = now
	}
	overlay, debug, quit := toggles()
	if quit {
		return ebiten.Termination
	}
	v.overlay = v.overlay != overlay
	v.debug = v.debug != debug
	var keys uint8
	var fire bool
	if v.o.script {
		if e, ok := v.s.player.Player().Entity(); ok {
			x, y := v.toScreen(v.drawnPos(e))
			var dx, dy float32
			keys, fire, dx, dy = v.script.next(v.frame, x, y)
			v.pointerX, v.pointerY = x+dx, y+dy
		} else {
			keys, fire = 0, false // the script starts with the avatar
		}
	} else {
		keys, fire = keyboard()
		cx, cy := ebiten.CursorPosition()
		v.pointerX, v.pointerY = float32(cx), float32(cy)
	}
	x, z := v.toWorld(float64(v.pointerX), float64(v.pointerY))
	v.s.input.set(keys, fire, x, z)
	if err := v.s.frame(now); err != nil {
		v.err = err
		return ebiten.Termination
	}
	v.rates.update(now, v.s.player)
	v.trackShots(now)

	if _, ok := v.s.player.Player().Entity(); !ok {
		if now.Sub(v.start) > v.o.timeout {
			v.err = fmt.Errorf("own avatar not received within %v (client state %v)", v.o.timeout, v.s.player.Client().State())
			return ebiten.Termination
		}
		return nil
	}
	if v.ready {
		v.frame++
	} else {
		v.ready = true
	}
	if slices.Contains(v.o.shots, v.frame) {
		v.pending = append(v.pending, v.frame)
	}
	if v.o.exitAfter > 0 && v.frame >= v.o.exitAfter && len(v.pending) == 0 {
		return ebiten.Termination
	}
	return nil
}

// trackShots notes projectiles that vanished next to an avatar other than
// their shooter's: hits (the server pushes the avatar; the client sees the
// projectile's despawn), shown as a flash.
func (v *view) trackShots(now time.Time) {
	for e, s := range v.prevShots {
		if v.w.Alive(e) {
			continue
		}
		delete(v.prevShots, e)
		if av, ok := v.avatarNear(s.pos, s.shooter); ok {
			v.flashes[av] = now.Add(flashTime)
			v.sparks = append(v.sparks, spark{pos: s.pos, until: now.Add(flashTime)})
			v.hits++
		}
	}
	q := v.w.Query(ecs.All(v.idProj, v.idTrans))
	for q.Next() {
		p := (*game.Projectile)(q.Get(v.idProj))
		v.prevShots[q.Entity()] = shotInfo{pos: v.drawnPos(q.Entity()), shooter: p.Shooter}
	}
	for e, until := range v.flashes {
		if now.After(until) || !v.w.Alive(e) {
			delete(v.flashes, e)
		}
	}
	v.sparks = slices.DeleteFunc(v.sparks, func(s spark) bool { return now.After(s.until) })
}

// avatarNear returns the avatar (not the shooter's) within hit distance of
// p as drawn, with some slack for interpolation.
func (v *view) avatarNear(p components.Vec3, shooter uint8) (ecs.Entity, bool) {
	const reach = game.HitRadius + 0.6
	q := v.w.Query(ecs.All(v.idAvatar, v.idNetID))
	for q.Next() {
		e := q.Entity()
		if shooter != 0 && (*components.NetID)(q.Get(v.idNetID)).Owner() == shooter {
			continue
		}
		a := v.drawnPos(e)
		if dx, dz := a.X-p.X, a.Z-p.Z; dx*dx+dz*dz < reach*reach {
			q.Close()
			return e, true
		}
	}
	return ecs.Entity{}, false
}

// own reports whether e is the player's avatar.
func (v *view) own(e ecs.Entity) bool {
	me, ok := v.s.player.Player().Entity()
	return ok && e == me
}

// drawnPos is where e is drawn: the smoothed prediction for the own avatar,
// the predicted Transform for own projectiles, the interpolated Visual for
// everything else (its Transform until it has one).
func (v *view) drawnPos(e ecs.Entity) components.Vec3 {
	return v.drawnPose(e).Pos
}

func (v *view) drawnPose(e ecs.Entity) components.Visual {
	if v.own(e) {
		return v.s.player.Player().Visual()
	}
	tr := (*components.Transform)(v.w.Get(e, v.idTrans))
	if v.w.Has(e, v.idProj) && (*game.Projectile)(v.w.Get(e, v.idProj)).Shooter == v.s.player.Client().ID() {
		return components.Visual{Pos: tr.Pos, Rot: tr.Rot}
	}
	if v.w.Has(e, v.idVisual) {
		return *(*components.Visual)(v.w.Get(e, v.idVisual))
	}
	return components.Visual{Pos: tr.Pos, Rot: tr.Rot}
}

// scale is the pixels per metre; the arena fills the shorter side.
func (v *view) scale() float64 {
	return (float64(min(v.o.width, v.o.height)) - 20) / (2 * game.ArenaHalf)
}

// toScreen maps the x/z plane to the screen: x to the right, z up.
func (v *view) toScreen(p components.Vec3) (float32, float32) {
	s := v.scale()
	return float32(float64(v.o.width)/2 + p.X*s), float32(float64(v.o.height)/2 - p.Z*s)
}

func (v *view) toWorld(x, y float64) (float64, float64) {
	s := v.scale()
	return (x - float64(v.o.width)/2) / s, (float64(v.o.height)/2 - y) / s
}

// heading is the unit vector on the x/z plane a rotation faces (the arena's
// yawRot(yaw) turns +x to (cos yaw, sin yaw)).
func heading(q components.Quat) (float64, float64) {
	d := q.Rotate(components.Vec3{X: 1})
	n := math.Hypot(d.X, d.Z)
	if n == 0 {
		return 1, 0
	}
	return d.X / n, d.Z / n
}

// Draw draws the arena into the canvas (read back for screenshots) and the
// canvas to the screen.
func (v *view) Draw(screen *ebiten.Image) {
	if v.canvas == nil {
		v.canvas = ebiten.NewImage(v.o.width, v.o.height)
	}
	c := v.canvas
	v.drawArena(c)
	v.drawEntities(c)
	if v.overlay {
		v.drawOverlay(c)
	}
	screen.DrawImage(c, nil)
	for _, f := range v.pending {
		if err := v.screenshot(c, f); err != nil && v.err == nil {
			v.err = err
		}
	}
	v.pending = v.pending[:0]
}

func (v *view) drawArena(c *ebiten.Image) {
	c.Fill(palette.Background)
	s := float32(v.scale())
	x0, y0 := v.toScreen(components.Vec3{X: -game.ArenaHalf, Z: game.ArenaHalf})
	side := float32(2*game.ArenaHalf) * s
	vector.DrawFilledRect(c, x0, y0, side, side, palette.Floor, false)
	for m := 10; m < 2*game.ArenaHalf; m += 10 {
		o := float32(m) * s
		vector.StrokeLine(c, x0+o, y0, x0+o, y0+side, 1, palette.Grid, false)
		vector.StrokeLine(c, x0, y0+o, x0+side, y0+o, 1, palette.Grid, false)
	}
	vector.StrokeRect(c, x0, y0, side, side, 2, palette.Wall, false)
}

func (v *view) drawEntities(c *ebiten.Image) {
	now := time.Now()
	me := v.s.player.Client().ID()
	s := v.scale()
	px := func(m float64, least float32) float32 { return max(float32(m*s), least) }
	body := func(p components.Visual, r float32, fill color.Color) {
		x, y := v.toScreen(p.Pos)
		vector.DrawFilledCircle(c, x, y, r, fill, true)
		hx, hz := heading(p.Rot)
		vector.StrokeLine(c, x, y, x+float32(hx)*r, y-float32(hz)*r, 2, palette.Heading, true)
	}
	// Debug view: the newest server state each mirror holds (Transform;
	// for own projectiles the prediction) as an outline, joined to the
	// drawn pose.
	if v.debug {
		q := v.w.Query(ecs.All(v.idTrans))
		for q.Next() {
			e := q.Entity()
			raw := (*components.Transform)(q.Get(v.idTrans)).Pos
			x, y := v.toScreen(raw)
			dx, dy := v.toScreen(v.drawnPos(e))
			r := px(bodyRadius, 4)
			if v.w.Has(e, v.idProj) {
				r = px(shotRadius, 3)
			}
			vector.StrokeLine(c, x, y, dx, dy, 1, palette.Debug, true)
			vector.StrokeCircle(c, x, y, r+1, 1.5, palette.Debug, true)
		}
	}
	var ownShots, shots, remote []ecs.Entity
	q := v.w.Query(ecs.All(v.idTrans))
	for q.Next() {
		e := q.Entity()
		switch {
		case v.own(e):
		case v.w.Has(e, v.idProj):
			if (*game.Projectile)(v.w.Get(e, v.idProj)).Shooter == me {
				ownShots = append(ownShots, e)
			} else {
				shots = append(shots, e)
			}
		case v.w.Has(e, v.idAvatar):
			remote = append(remote, e)
		default: // NPC
			body(v.drawnPose(e), px(npcRadius, 3), palette.NPC)
		}
	}
	for _, e := range remote {
		body(v.drawnPose(e), px(bodyRadius, 4), palette.Remote)
	}
	if e, ok := v.s.player.Player().Entity(); ok {
		p := v.drawnPose(e)
		x, y := v.toScreen(p.Pos)
		vector.StrokeLine(c, x, y, v.pointerX, v.pointerY, 1, palette.Aim, true)
		body(p, px(bodyRadius, 4), palette.Own)
	}
	for _, e := range shots {
		x, y := v.toScreen(v.drawnPos(e))
		vector.DrawFilledCircle(c, x, y, px(shotRadius, 2.5), palette.Shot, true)
	}
	for _, e := range ownShots {
		x, y := v.toScreen(v.drawnPos(e))
		vector.DrawFilledCircle(c, x, y, px(shotRadius, 2.5), palette.OwnShot, true)
	}
	// Hits: a ring around the avatar hit and a burst where the projectile
	// ended.
	for e := range v.flashes {
		x, y := v.toScreen(v.drawnPos(e))
		vector.StrokeCircle(c, x, y, px(flashRadius, 8), 3, palette.Flash, true)
	}
	for _, sp := range v.sparks {
		left := float64(sp.until.Sub(now)) / float64(flashTime)
		x, y := v.toScreen(sp.pos)
		vector.StrokeCircle(c, x, y, float32(2+(1-left)*10), 2, palette.Flash, true)
	}
}

func (v *view) drawOverlay(c *ebiten.Image) {
	r := v.rates
	cl := v.s.player.Client()
	st := cl.InterpolationStats()
	var delay, target, jitter time.Duration
	if clk := cl.InterpClock(); clk != nil {
		delay, target, jitter = clk.Delay(), clk.TargetDelay(), clk.Jitter()
	}
	text := fmt.Sprintf(
		"archenet arena  client %d  (F1/Tab overlay, F2 debug)\n"+
			"down %6.1f KB/s   up %5.1f KB/s\n"+
			"rtt  %6.1f ms     loss %4.1f %%\n"+
			"render delay %5.1f ms (target %.1f, jitter %.1f)\n"+
			"corrections %5.1f /s\n"+
			"entities %d  (interp %d, extrap %d, hold %d)\n"+
			"hits seen %d",
		cl.ID(), r.down, r.up,
		ms(cl.RTT()), 100*cl.Arrivals().Loss(),
		ms(delay), ms(target), ms(jitter), r.corrections,
		cl.Mirrors(), st.Interpolating, st.Extrapolating, st.Holding, v.hits)
	if v.debug {
		text += "\ndebug: outline = newest server state"
	}
	vector.DrawFilledRect(c, 8, 8, 350, 128, palette.OverlayBg, false)
	v.font.drawAt(c, text, 14, 12)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// screenshot writes the canvas to out/frame-N.png.
func (v *view) screenshot(c *ebiten.Image, frame int) error {
	b := c.Bounds()
	if len(v.pixels) != 4*b.Dx()*b.Dy() {
		v.pixels = make([]byte, 4*b.Dx()*b.Dy())
	}
	c.ReadPixels(v.pixels)
	// The canvas is opaque, so its premultiplied pixels are plain RGBA.
	img := &image.RGBA{Pix: v.pixels, Stride: 4 * b.Dx(), Rect: image.Rect(0, 0, b.Dx(), b.Dy())}
	if err := os.MkdirAll(v.o.out, 0o755); err != nil {
		return err
	}
	name := filepath.Join(v.o.out, fmt.Sprintf("frame-%d.png", frame))
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	enc := png.Encoder{CompressionLevel: png.BestCompression}
	if err := enc.Encode(f, img); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	v.saved = append(v.saved, name)
	return nil
}

// summary is printed on exit.
func (v *view) summary() string {
	st := v.s.player.Stats()
	return fmt.Sprintf("frames %d, corrections %d, exact matches %d, hits seen %d, entities %d",
		v.frame, st.Corrections, st.Matches, v.hits, v.s.player.Client().Mirrors())
}

// rates are the overlay's per-second figures over the last full second.
type rates struct {
	at            time.Time
	in, out, corr uint64
	down, up      float64 // KB/s
	corrections   float64 // per second
	initialized   bool
}

func (r *rates) update(now time.Time, b *game.Bot) {
	cl := b.Client()
	in, out, corr := cl.Stats.BytesIn, cl.Stats.BytesOut, b.Stats().Corrections
	if !r.initialized {
		r.at, r.in, r.out, r.corr, r.initialized = now, in, out, corr, true
		return
	}
	dt := now.Sub(r.at).Seconds()
	if dt < 1 {
		return
	}
	r.down = float64(in-r.in) / 1024 / dt
	r.up = float64(out-r.out) / 1024 / dt
	r.corrections = float64(corr-r.corr) / dt
	r.at, r.in, r.out, r.corr = now, in, out, corr
}
