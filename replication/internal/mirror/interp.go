package mirror

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"reflect"
	"time"
	"unsafe"

	arche "github.com/mlange-42/arche/ecs"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/interp"
	"github.com/archenet/archenet/replication/internal/entity"
	"github.com/archenet/archenet/replication/internal/receive"
	"github.com/archenet/archenet/replication/schema"
	"github.com/archenet/archenet/replication/timing"
)

// interpState is the interpolation of remote mirrors: the render clock,
// Transform → Visual buffers (Config.Interpolation), and in-place tracks
// of Config.InterpolatedComponents.
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
	// viewTick is the tick of the newest view pushed (viewSeen: one was).
	viewTick uint32
	viewSeen bool
}

// setupInterp checks the interpolation config and registers its components.
func (m *Mirrors) setupInterp() error {
	reg := m.cfg.Registry
	m.transPlan = reg.ByType(reflect.TypeFor[components.Transform]())
	m.predicted = reg.ByType(reflect.TypeFor[components.Predicted]())
	if m.cfg.Interpolation {
		if m.transPlan == nil {
			return errors.New("replication: Interpolation needs components.Transform in the registry")
		}
		m.idBuffer = arche.ComponentID[interp.Buffer](m.world)
		m.idVisual = arche.ComponentID[components.Visual](m.world)
	}
	for _, t := range m.cfg.InterpolatedComponents {
		p := reg.ByType(t)
		if p == nil {
			return fmt.Errorf("replication: InterpolatedComponents: %v is not in the registry", t)
		}
		if !p.Interpolable() {
			return fmt.Errorf("replication: InterpolatedComponents: %s has no field to interpolate (floats, angles, positions, quaternions)", p.Name)
		}
		m.trackMask |= 1 << p.ID
	}
	if m.trackMask != 0 {
		m.idTrack = arche.ComponentID[interp.Track](m.world)
		m.trackQuery = arche.All(m.idTrack, m.idNetID)
	}
	return nil
}

// Welcome takes the client's id and, with interpolation, creates the
// render clock on the server's schedule (its tick interval, the arrival
// estimator).
func (m *Mirrors) Welcome(self uint8, arrivals *timing.Arrivals) error {
	m.self = self
	if !m.cfg.Interpolation && m.trackMask == 0 {
		return nil
	}
	cc := m.cfg.InterpClock
	cc.TickInterval, cc.Arrivals = arrivals.Interval(), arrivals
	clk, err := interp.NewClock(cc)
	if err != nil {
		return err
	}
	m.clock, m.visuals = clk, nil
	return nil
}

// Clock returns the render clock (nil without interpolation or before the
// first Welcome).
func (m *Mirrors) Clock() *interp.Clock { return m.clock }

// remote reports whether a mirror is drawn from snapshots rather than
// predicted.
func (m *Mirrors) remote(e entity.Meta) bool {
	if m.clock == nil {
		return false
	}
	if m.cfg.Interpolate != nil {
		return m.cfg.Interpolate(e.Owner, e.Set)
	}
	return m.predicted == nil || e.Owner != m.self || m.self == 0 || e.Set&(1<<m.predicted.ID) == 0
}

func (m *Mirrors) buffered(e entity.Meta) bool {
	return m.cfg.Interpolation && e.Set&(1<<m.transPlan.ID) != 0 && m.remote(e)
}

func (m *Mirrors) tracked(e entity.Meta) bool { return e.Set&m.trackMask != 0 && m.remote(e) }

// spawnInterp appends the interpolation components of a new mirror to
// m.idBuf and reports whether its track needs initTrack.
func (m *Mirrors) spawnInterp(e entity.Meta) (track bool) {
	if m.buffered(e) {
		m.idBuf = append(m.idBuf, m.idBuffer, m.idVisual)
	}
	if m.tracked(e) {
		m.idBuf = append(m.idBuf, m.idTrack)
		return true
	}
	return false
}

// exchangeInterp adds to add and rem the interpolation components that a
// mirror changing its component set to set gains or loses, and reports
// whether its track needs initTrack after the exchange.
func (m *Mirrors) exchangeInterp(mr *mirror, set uint64, add, rem []arche.ID) ([]arche.ID, []arche.ID, bool) {
	if m.clock == nil || mr.predicted {
		return add, rem, false
	}
	meta := entity.Meta{Gen: mr.gen, Owner: mr.owner, Set: set}
	if had, has := m.cfg.Interpolation && m.world.Has(mr.entity, m.idBuffer), m.buffered(meta); has && !had {
		add = append(add, m.idBuffer, m.idVisual)
	} else if had && !has {
		rem = append(rem, m.idBuffer, m.idVisual)
	}
	had := m.trackMask != 0 && m.world.Has(mr.entity, m.idTrack)
	has := m.tracked(meta)
	switch {
	case has && !had:
		add = append(add, m.idTrack)
	case had && !has:
		rem = append(rem, m.idTrack)
	}
	// A track whose components changed starts over.
	return add, rem, has && (!had || set&m.trackMask != mr.set&m.trackMask)
}

// initTrack sizes a mirror's track for its interpolated components.
func (m *Mirrors) initTrack(mr *mirror) {
	n := 0
	for s := mr.set & m.trackMask; s != 0; s &= s - 1 {
		n += m.plans[bits.TrailingZeros64(s)].NumLanes()
	}
	(*interp.Track)(m.world.Get(mr.entity, m.idTrack)).Init(n)
}

// pushInterp feeds every interpolated mirror's state at the view's tick:
// its Transform to its buffer, its in-place components to its track. A
// mirror missing from the previous view pushed (the server left it out:
// its spawn brought its state, which had not changed since) held its
// newest state until then: that is pushed at the previous view's tick
// first, so its change is not interpolated from long before.
func (m *Mirrors) pushInterp(v *receive.View) {
	hold := m.viewSeen && int32(v.Tick-m.viewTick) > 0
	for i, slot := range v.Slots {
		mr := m.table.get(slot)
		if mr == nil || !mr.alive || mr.gen != v.Metas[i].Gen || mr.set != v.Metas[i].Set {
			continue
		}
		m.pushState(mr, v.Tick, v.EntityLanes(i), hold, m.viewTick)
	}
	if !m.viewSeen || int32(v.Tick-m.viewTick) > 0 {
		m.viewTick, m.viewSeen = v.Tick, true
	}
}

// pushState feeds mirror mr's state lanes (all of its components') at
// tick to its buffer and its track, if it has them; with hold, first its
// newest state again at holdAt if that is older (the mirror held it).
func (m *Mirrors) pushState(mr *mirror, tick uint32, lanes []uint64, hold bool, holdAt uint32) {
	if m.cfg.Interpolation && mr.set&(1<<m.transPlan.ID) != 0 && m.world.Has(mr.entity, m.idBuffer) {
		b := (*interp.Buffer)(m.world.Get(mr.entity, m.idBuffer))
		if newest, ok := b.Newest(); hold && ok && int32(holdAt-newest) > 0 {
			s := b.At(b.Len() - 1)
			b.Push(holdAt, s.Pos, s.Rot)
		}
		var tr components.Transform
		off := m.laneOffset(mr.set, m.transPlan.ID)
		schema.DequantizeValue(m.transPlan, lanes[off:off+m.transPlan.NumLanes()], &tr)
		b.Push(tick, tr.Pos, tr.Rot)
	}
	if mr.set&m.trackMask != 0 && m.world.Has(mr.entity, m.idTrack) {
		t := (*interp.Track)(m.world.Get(mr.entity, m.idTrack))
		if newest, ok := t.Newest(); hold && ok && int32(holdAt-newest) > 0 {
			a, _, _, _ := t.Sample(float64(newest), 0)
			m.trackBuf = append(m.trackBuf[:0], a...)
			t.Push(holdAt, m.trackBuf)
		}
		m.trackBuf = m.trackBuf[:0]
		off := 0
		for s := mr.set; s != 0; s &= s - 1 {
			id := bits.TrailingZeros64(s)
			n := m.plans[id].NumLanes()
			if m.trackMask&(1<<id) != 0 {
				m.trackBuf = append(m.trackBuf, lanes[off:off+n]...)
			}
			off += n
		}
		t.Push(tick, m.trackBuf)
	}
}

// laneOffset is the first lane of component id in an entity of set.
func (m *Mirrors) laneOffset(set uint64, id uint8) int {
	off := 0
	for s := set & (1<<id - 1); s != 0; s &= s - 1 {
		off += m.plans[bits.TrailingZeros64(s)].NumLanes()
	}
	return off
}

// Interpolate draws every interpolated mirror at the render clock's time:
// it advances the clock to now, writes the Visual of buffered mirrors and
// overwrites the in-place components of tracked ones. Nothing happens
// before the Welcome, nor is anything drawn before the clock is ready.
// Allocation-free.
func (m *Mirrors) Interpolate(now time.Time) {
	if m.clock == nil {
		return
	}
	m.clock.Advance(now)
	if m.cfg.Interpolation {
		if m.visuals == nil {
			m.visuals = interp.NewSystem(m.clock, m.cfg.MaxExtrapolation)
			m.visuals.Initialize(m.world)
		}
		m.visuals.Update(m.world)
	}
	m.trackStats = interp.Stats{}
	if m.trackMask == 0 || !m.clock.Ready() {
		return
	}
	tick, ext := m.clock.RenderTick(), m.extrapolationTicks()
	q := m.world.Query(&m.trackQuery)
	for q.Next() {
		tr := (*interp.Track)(q.Get(m.idTrack))
		a, b, f, mode := tr.Sample(tick, ext)
		if !m.countMode(mode) {
			continue
		}
		mr := m.table.get((*components.NetID)(q.Get(m.idNetID)).Index())
		if mr == nil || !mr.alive || mr.entity != q.Entity() {
			continue
		}
		off := 0
		for s := mr.set & m.trackMask; s != 0; s &= s - 1 {
			id := bits.TrailingZeros64(s)
			p := m.plans[id]
			n := p.NumLanes()
			if off+n > len(a) {
				break // a track sized for another set: it starts over at the next push
			}
			p.InterpolateBytes(a[off:off+n], b[off:off+n], f, unsafe.Slice((*byte)(q.Get(m.ids[id])), p.Size))
			off += n
		}
	}
}

// extrapolationTicks is Config.MaxExtrapolation in net ticks.
func (m *Mirrors) extrapolationTicks() float64 {
	d := m.cfg.MaxExtrapolation
	if d == 0 {
		d = interp.DefaultMaxExtrapolation
	}
	if d < 0 {
		return 0
	}
	return d.Seconds() / m.clock.TickInterval().Seconds()
}

// countMode counts a track's sample mode and reports whether it has a value.
func (m *Mirrors) countMode(mode interp.Mode) bool {
	switch mode {
	case interp.ModeInterpolating:
		m.trackStats.Interpolating++
	case interp.ModeExtrapolating:
		m.trackStats.Extrapolating++
	case interp.ModeHolding:
		m.trackStats.Holding++
	default:
		m.trackStats.Empty++
		return false
	}
	return true
}

// DrawnTick returns the net tick (fractional) of the world the interpolated
// mirrors were drawn at by the last Interpolate: the render tick, but no
// later than the newest snapshot's tick plus the extrapolation limit, past
// which they hold (a starved buffer: a stalled link, a late snapshot). ok
// is false before the render clock runs.
func (m *Mirrors) DrawnTick() (tick float64, ok bool) {
	if m.clock == nil || !m.clock.Ready() {
		return 0, false
	}
	tick = m.clock.RenderTick()
	if m.viewSeen {
		if past := math.Remainder(tick-float64(m.viewTick), 1<<32) - m.extrapolationTicks(); past > 0 {
			tick -= past
		}
	}
	return tick, true
}

// InterpolationStats returns the per-mode counts of the last Interpolate:
// buffered (Transform → Visual) and tracked (in-place) mirrors together.
func (m *Mirrors) InterpolationStats() interp.Stats {
	st := m.trackStats
	if m.visuals != nil {
		v := m.visuals.Stats()
		st.Interpolating += v.Interpolating
		st.Extrapolating += v.Extrapolating
		st.Holding += v.Holding
		st.Empty += v.Empty
	}
	return st
}
