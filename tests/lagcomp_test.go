package tests

import (
	"encoding/binary"
	"math"
	"testing"
	"time"

	"github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/interp"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/replication/lagcomp"
	"github.com/archenet/archenet/transport/sim"
)

// Lag compensation: a target moves at constant speed; a shooter with a
// 150 ms RTT and a 100 ms interpolation delay aims exactly at the target as
// drawn and reports its render tick with the shot. Judged against the
// target's state at that tick (lagcomp.History), the shot hits; judged
// against the target's current state, it would have missed.
func TestLagCompensatedHit(t *testing.T) {
	const speed, hitRadius = 5.0, 0.5 // m/s, m
	type shot struct{ x, z, view float64 }
	var pending *shot
	var got []shot
	oneWay := sim.Conditions{Latency: 75 * time.Millisecond}
	h := newHarness(t, 0, sim.Link{Up: oneWay, Down: oneWay}, func(c *replication.ServerConfig) {
		c.Input = func(_ replication.ClientID, _ uint32, b []byte) error {
			if len(b) == 24 {
				f := func(i int) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:])) }
				got = append(got, shot{f(0), f(1), f(2)})
			}
			return nil
		}
	})
	h.clientCfg = func(c *replication.ClientConfig) {
		c.Interpolation = true
		c.InterpClock = interp.ClockConfig{MinDelay: 100 * time.Millisecond, MaxDelay: 100 * time.Millisecond}
		c.Input = func(dst []byte) []byte {
			if pending == nil {
				return dst
			}
			for _, v := range []float64{pending.x, pending.z, pending.view} {
				dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(v))
			}
			return dst
		}
	}
	cs := h.addClient()
	hist, err := lagcomp.New[components.Transform](h.sw, h.reg, lagcomp.Config{Depth: 32})
	require.NoError(t, err)
	target := h.spawn(0, components.Vec3{X: -20})
	h.game = func(int) { h.pos(target).X += speed / netRate }

	idVisual := ecs.ComponentID[components.Visual](cs.w)
	fired := false
	for tick := 0; tick < 150 && len(got) == 0; tick++ {
		h.step()
		hist.Record(h.srv.Tick())
		cs.c.Interpolate()
		if tick < 90 || fired {
			continue
		}
		// Aim exactly at the target as drawn, and report the render tick.
		id, _ := h.srv.NetID(target)
		e, ok := cs.c.Entity(id)
		require.True(t, ok)
		drawn := (*components.Visual)(cs.w.Get(e, idVisual)).Pos
		pending = &shot{drawn.X, drawn.Z, cs.c.InterpClock().RenderTick()}
		fired = true
		t.Logf("shot at tick %d: target drawn at x=%.3f, on the server at x=%.3f (render delay %v)", tick, drawn.X, h.pos(target).X, cs.c.InterpClock().Delay())
	}
	require.NotEmpty(t, got, "the shot arrived")
	s := got[0]
	view := hist.Clamp(s.view)
	require.Equal(t, s.view, view, "an honest report is within the rewind bound")
	var then components.Transform
	require.True(t, hist.At(target, view, &then))
	missBy := math.Hypot(then.Pos.X-s.x, then.Pos.Z-s.z)
	nowBy := math.Hypot(h.pos(target).X-s.x, h.pos(target).Z-s.z)
	t.Logf("compensated: target %.4f m from the aim point; uncompensated: %.3f m", missBy, nowBy)
	require.Less(t, missBy, 0.01, "with compensation the shot hits (the state the shooter drew)")
	require.Greater(t, nowBy, hitRadius, "without compensation it would have missed")

	// A report from too far back is clamped to MaxRewind.
	newest, _ := hist.Newest()
	require.Equal(t, float64(newest)-hist.Config().MaxRewind, hist.Clamp(s.view-1000))
	require.Equal(t, float64(newest), hist.Clamp(float64(newest)+50), "not from the future")
	require.Equal(t, float64(newest)-hist.Config().MaxRewind, hist.Clamp(math.NaN()))
}
