package replication

import (
	arche "github.com/mlange-42/arche/ecs"

	"github.com/archenet/archenet/ecs"
	"github.com/archenet/archenet/interp"
	"github.com/archenet/archenet/replication/internal/watch"
)

// InterpClock returns the render clock of interpolated mirrors (nil without
// interpolation or before the Welcome). [Client.InterpolationSystem]
// advances it.
func (c *Client) InterpClock() *interp.Clock { return c.mirrors.Clock() }

// DrawnTick returns the net tick (fractional) of the world the last
// [Client.Interpolate] drew the interpolated mirrors at: the render clock's
// tick ([interp.Clock.RenderTick]), but no later than the newest snapshot's
// tick plus ClientConfig.MaxExtrapolation, past which they hold where they
// were. That is the tick to report with an input for the server's lag
// compensation (input.Player does): when snapshots stop coming for a
// while, the render clock runs on while the mirrors stand still, and a shot
// judged at the render tick would be judged against where its target went
// since, not where the player saw it. ok is false before the render clock
// runs (no interpolation, or before the first snapshots).
func (c *Client) DrawnTick() (tick float64, ok bool) { return c.mirrors.DrawnTick() }

// Interpolate draws every interpolated mirror at the render clock's time:
// it advances the clock to the client's clock (ClientConfig.Now), writes the
// Visual of buffered mirrors (Interpolation) and overwrites the in-place
// components of tracked ones (InterpolatedComponents). Nothing happens
// before the Welcome, nor is anything drawn before the clock is ready.
// Call it once per rendered frame after Receive, or add
// [Client.InterpolationSystem]. Allocation-free.
func (c *Client) Interpolate() {
	now := c.cfg.Now()
	c.watch.Note(watch.Interpolate, now)
	c.checkSystems(now)
	c.mirrors.Interpolate(now)
	c.refsToMirrors() // (a reference interpolation stepped to another entity)
}

// InterpolationSystem returns an ecs.System running [Client.Interpolate]
// each update: add it to the client's frame loop after the Receive system.
// It can be added at once; it does nothing until the Welcome.
func (c *Client) InterpolationSystem() ecs.System {
	return ecs.Func(func(*arche.World) { c.Interpolate() })
}

// InterpolationStats returns the per-mode counts of the last Interpolate:
// buffered (Transform → Visual) and tracked (in-place) mirrors together.
func (c *Client) InterpolationStats() interp.Stats { return c.mirrors.InterpolationStats() }
