package replication

import (
	"errors"
	"fmt"
	"math/bits"
	"reflect"

	arche "github.com/mlange-42/arche/ecs"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/ecs"
	"github.com/archenet/archenet/interp"
	"github.com/archenet/archenet/replication/internal/entity"
	"github.com/archenet/archenet/replication/internal/receive"
	"github.com/archenet/archenet/replication/schema"
)

// interpState is the client's interpolation of remote mirrors: the render
// clock, Transform → Visual buffers (ClientConfig.Interpolation), and
// in-place tracks of ClientConfig.InterpolatedComponents.
type interpState struct {
	clock *interp.Clock

	idBuffer, idVisual, idTrack arche.ID
	transPlan                   *schema.Plan
	predicted                   *schema.Plan // components.Predicted, if registered
	trackMask                   uint64       // plan ids interpolated in place
	trackQuery                  arche.Mask   // query of tracked mirrors (built once: no per-frame boxing)
	trackBuf                    []uint64
	visuals                     *interp.System // Transform → Visual, created at the first frame
	trackStats                  interp.Stats
}

// setupInterp checks the interpolation config and registers its components.
func (c *Client) setupInterp() error {
	reg := c.cfg.Registry
	c.transPlan = reg.ByType(reflect.TypeFor[components.Transform]())
	c.predicted = reg.ByType(reflect.TypeFor[components.Predicted]())
	if c.cfg.Interpolation {
		if c.transPlan == nil {
			return errors.New("replication: Interpolation needs components.Transform in the registry")
		}
		c.idBuffer = arche.ComponentID[interp.Buffer](c.world)
		c.idVisual = arche.ComponentID[components.Visual](c.world)
	}
	for _, t := range c.cfg.InterpolatedComponents {
		p := reg.ByType(t)
		if p == nil {
			return fmt.Errorf("replication: InterpolatedComponents: %v is not in the registry", t)
		}
		if !p.Interpolable() {
			return fmt.Errorf("replication: InterpolatedComponents: %s has no field to interpolate (floats, angles, positions, quaternions)", p.Name)
		}
		c.trackMask |= 1 << p.ID
	}
	if c.trackMask != 0 {
		c.idTrack = arche.ComponentID[interp.Track](c.world)
		c.trackQuery = arche.All(c.idTrack, c.idNetID)
	}
	return nil
}

// startInterp creates the render clock at the Welcome (it needs the
// server's tick interval).
func (c *Client) startInterp() error {
	if !c.cfg.Interpolation && c.trackMask == 0 {
		return nil
	}
	cc := c.cfg.InterpClock
	cc.TickInterval, cc.Arrivals = c.arrivals.Interval(), &c.arrivals
	clk, err := interp.NewClock(cc)
	if err != nil {
		return err
	}
	c.clock, c.visuals = clk, nil
	return nil
}

// InterpClock returns the render clock of interpolated mirrors (nil without
// interpolation or before the Welcome). [Client.InterpolationSystem]
// advances it.
func (c *Client) InterpClock() *interp.Clock { return c.clock }

// remote reports whether a mirror is drawn from snapshots rather than
// predicted.
func (c *Client) remote(m entity.Meta) bool {
	if c.clock == nil {
		return false
	}
	if c.cfg.Interpolate != nil {
		return c.cfg.Interpolate(m.Owner, m.Set)
	}
	return c.predicted == nil || m.Owner != c.id || c.id == 0 || m.Set&(1<<c.predicted.ID) == 0
}

func (c *Client) buffered(m entity.Meta) bool {
	return c.cfg.Interpolation && m.Set&(1<<c.transPlan.ID) != 0 && c.remote(m)
}

func (c *Client) tracked(m entity.Meta) bool { return m.Set&c.trackMask != 0 && c.remote(m) }

// spawnInterp appends the interpolation components of a new mirror to
// c.idBuf and reports whether its track needs initTrack.
func (c *Client) spawnInterp(m entity.Meta) (track bool) {
	if c.buffered(m) {
		c.idBuf = append(c.idBuf, c.idBuffer, c.idVisual)
	}
	if c.tracked(m) {
		c.idBuf = append(c.idBuf, c.idTrack)
		return true
	}
	return false
}

// exchangeInterp adds to add and rem the interpolation components that a
// mirror changing its component set to set gains or loses, and reports
// whether its track needs initTrack after the exchange.
func (c *Client) exchangeInterp(m *mirror, set uint64, add, rem []arche.ID) ([]arche.ID, []arche.ID, bool) {
	if c.clock == nil || m.predicted {
		return add, rem, false
	}
	meta := entity.Meta{Gen: m.gen, Owner: m.owner, Set: set}
	if had, has := c.cfg.Interpolation && c.world.Has(m.entity, c.idBuffer), c.buffered(meta); has && !had {
		add = append(add, c.idBuffer, c.idVisual)
	} else if had && !has {
		rem = append(rem, c.idBuffer, c.idVisual)
	}
	had := c.trackMask != 0 && c.world.Has(m.entity, c.idTrack)
	has := c.tracked(meta)
	switch {
	case has && !had:
		add = append(add, c.idTrack)
	case had && !has:
		rem = append(rem, c.idTrack)
	}
	// A track whose components changed starts over.
	return add, rem, has && (!had || set&c.trackMask != m.set&c.trackMask)
}

// initTrack sizes a mirror's track for its interpolated components.
func (c *Client) initTrack(m *mirror) {
	n := 0
	for s := m.set & c.trackMask; s != 0; s &= s - 1 {
		n += c.plans[bits.TrailingZeros64(s)].NumLanes()
	}
	(*interp.Track)(c.world.Get(m.entity, c.idTrack)).Init(n)
}

// pushInterp feeds every interpolated mirror's state at the view's tick:
// its Transform to its buffer, its in-place components to its track.
func (c *Client) pushInterp(v *receive.View) {
	if v == nil {
		return
	}
	var tr components.Transform
	for i, slot := range v.Slots {
		m := c.mirrors.get(slot)
		if m == nil || !m.alive || m.gen != v.Metas[i].Gen || m.set != v.Metas[i].Set {
			continue
		}
		lanes := v.EntityLanes(i)
		if c.cfg.Interpolation && m.set&(1<<c.transPlan.ID) != 0 && c.world.Has(m.entity, c.idBuffer) {
			off := c.laneOffset(m.set, c.transPlan.ID)
			c.transPlan.Dequantize(lanes[off:off+c.transPlan.NumLanes()], unsafePointer(&tr))
			(*interp.Buffer)(c.world.Get(m.entity, c.idBuffer)).Push(v.Tick, tr.Pos, tr.Rot)
		}
		if m.set&c.trackMask != 0 && c.world.Has(m.entity, c.idTrack) {
			c.trackBuf = c.trackBuf[:0]
			off := 0
			for s := m.set; s != 0; s &= s - 1 {
				id := bits.TrailingZeros64(s)
				n := c.plans[id].NumLanes()
				if c.trackMask&(1<<id) != 0 {
					c.trackBuf = append(c.trackBuf, lanes[off:off+n]...)
				}
				off += n
			}
			(*interp.Track)(c.world.Get(m.entity, c.idTrack)).Push(v.Tick, c.trackBuf)
		}
	}
}

// laneOffset is the first lane of component id in an entity of set.
func (c *Client) laneOffset(set uint64, id uint8) int {
	off := 0
	for s := set & (1<<id - 1); s != 0; s &= s - 1 {
		off += c.plans[bits.TrailingZeros64(s)].NumLanes()
	}
	return off
}

// Interpolate draws every interpolated mirror at the render clock's time:
// it advances the clock to the client's clock (ClientConfig.Now), writes the
// Visual of buffered mirrors (Interpolation) and overwrites the in-place
// components of tracked ones (InterpolatedComponents). Nothing happens
// before the Welcome, nor is anything drawn before the clock is ready.
// Call it once per rendered frame after Receive, or add
// [Client.InterpolationSystem]. Allocation-free.
func (c *Client) Interpolate() {
	now := c.cfg.Now()
	c.watch.note(systemInterpolate, now)
	c.checkSystems(now)
	if c.clock == nil {
		return
	}
	c.clock.Advance(now)
	if c.cfg.Interpolation {
		if c.visuals == nil {
			c.visuals = interp.NewSystem(c.clock, c.cfg.MaxExtrapolation)
			c.visuals.Initialize(c.world)
		}
		c.visuals.Update(c.world)
	}
	c.trackStats = interp.Stats{}
	if c.trackMask == 0 || !c.clock.Ready() {
		return
	}
	tick, ext := c.clock.RenderTick(), c.extrapolationTicks()
	q := c.world.Query(&c.trackQuery)
	for q.Next() {
		tr := (*interp.Track)(q.Get(c.idTrack))
		a, b, f, mode := tr.Sample(tick, ext)
		if !c.countMode(mode) {
			continue
		}
		m := c.mirrors.get((*components.NetID)(q.Get(c.idNetID)).Index())
		if m == nil || !m.alive || m.entity != q.Entity() {
			continue
		}
		off := 0
		for s := m.set & c.trackMask; s != 0; s &= s - 1 {
			id := bits.TrailingZeros64(s)
			p := c.plans[id]
			n := p.NumLanes()
			if off+n > len(a) {
				break // a track sized for another set: it starts over at the next push
			}
			p.Interpolate(a[off:off+n], b[off:off+n], f, q.Get(c.ids[id]))
			off += n
		}
	}
}

// extrapolationTicks is ClientConfig.MaxExtrapolation in net ticks.
func (c *Client) extrapolationTicks() float64 {
	d := c.cfg.MaxExtrapolation
	if d == 0 {
		d = interp.DefaultMaxExtrapolation
	}
	if d < 0 {
		return 0
	}
	return d.Seconds() / c.clock.TickInterval().Seconds()
}

// countMode counts a track's sample mode and reports whether it has a value.
func (c *Client) countMode(mode interp.Mode) bool {
	switch mode {
	case interp.ModeInterpolating:
		c.trackStats.Interpolating++
	case interp.ModeExtrapolating:
		c.trackStats.Extrapolating++
	case interp.ModeHolding:
		c.trackStats.Holding++
	default:
		c.trackStats.Empty++
		return false
	}
	return true
}

// InterpolationSystem returns an ecs.System running [Client.Interpolate]
// each update: add it to the client's frame loop after the Receive system.
// It can be added at once; it does nothing until the Welcome.
func (c *Client) InterpolationSystem() ecs.System {
	return ecs.Func(func(*arche.World) { c.Interpolate() })
}

// InterpolationStats returns the per-mode counts of the last Interpolate:
// buffered (Transform → Visual) and tracked (in-place) mirrors together.
func (c *Client) InterpolationStats() interp.Stats {
	st := c.trackStats
	if c.visuals != nil {
		v := c.visuals.Stats()
		st.Interpolating += v.Interpolating
		st.Extrapolating += v.Extrapolating
		st.Holding += v.Holding
		st.Empty += v.Empty
	}
	return st
}
