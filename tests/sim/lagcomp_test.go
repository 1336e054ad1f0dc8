package sim_test

import (
	"encoding/binary"
	"math"
	"testing"
	"time"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/interp"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/replication/lagcomp"
	"github.com/archenet/archenet/tests/internal/harness"
	"github.com/archenet/archenet/transport/sim"
	"github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/require"
)

// Lag compensation: a target moves at constant speed; a shooter with a
// 150 ms RTT (and, in a second run, 200 ms) and a 100 ms interpolation
// delay aims exactly at the target as drawn and reports its render tick with
// the shot. The claim is within the bound the server derives from the RTT
// it measured (lagcomp.Rewinds), and judged against the target's state at
// that tick (lagcomp.History) the shot hits; judged against the target's
// current state, it would have missed.
func TestLagCompensatedHit(t *testing.T) {
	for _, rtt := range []time.Duration{150 * time.Millisecond, 200 * time.Millisecond} {
		t.Run(rtt.String(), func(t *testing.T) { lagCompensatedHit(t, rtt) })
	}
}

// lagShot is a shot a client reported: where it aimed, its render tick
// (view) and the tick of the world it drew (drawn: Client.DrawnTick).
type lagShot struct{ x, z, view, drawn float64 }

// lagRig is a server and a client at a given RTT whose client sends a shot
// when told, and a history of what it was shown.
type lagRig struct {
	*harness.Harness
	cs      *harness.ClientSide
	hist    *lagcomp.History[components.Transform]
	pending *lagShot
	got     []lagShot
	at      []float64 // the server's tick when each shot arrived
}

func newLagRig(t *testing.T, rtt time.Duration) *lagRig {
	r := &lagRig{}
	oneWay := sim.Conditions{Latency: rtt / 2}
	r.Harness = harness.New(t, 0, sim.Link{Up: oneWay, Down: oneWay}, func(c *replication.ServerConfig) {
		c.Input = func(_ replication.ClientID, _ uint32, b []byte) error {
			if len(b) == 32 {
				f := func(i int) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:])) }
				r.got = append(r.got, lagShot{f(0), f(1), f(2), f(3)})
				r.at = append(r.at, float64(r.Server.Tick()))
			}
			return nil
		}
	})
	r.ClientConfig = func(c *replication.ClientConfig) {
		c.Interpolation = true
		c.InterpClock = interp.ClockConfig{MinDelay: 100 * time.Millisecond, MaxDelay: 100 * time.Millisecond}
		c.Input = func(dst []byte) []byte {
			if r.pending == nil {
				return dst
			}
			for _, v := range []float64{r.pending.x, r.pending.z, r.pending.view, r.pending.drawn} {
				dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(v))
			}
			return dst
		}
	}
	r.cs = r.AddClient()
	var err error
	r.hist, err = lagcomp.New[components.Transform](r.World, r.Registry, lagcomp.Config{Depth: 32})
	require.NoError(t, err)
	return r
}

// Step is a harness Step that records the history and interpolates.
func (r *lagRig) Step() {
	r.Harness.Step()
	r.hist.Record(r.Server.Tick())
	r.cs.Client.Interpolate()
}

func lagCompensatedHit(t *testing.T, rtt time.Duration) {
	const speed, hitRadius = 5.0, 0.5 // m/s, m
	r := newLagRig(t, rtt)
	target := r.Spawn(0, components.Vec3{X: -20})
	r.Game = func(int) { r.Pos(target).X += speed / harness.NetRate }
	rewinds, err := lagcomp.NewRewinds(lagcomp.Limits{NetRate: harness.NetRate})
	require.NoError(t, err)

	idVisual := ecs.ComponentID[components.Visual](r.cs.World)
	fired := false
	for tick := 0; tick < 150 && len(r.got) == 0; tick++ {
		r.Step()
		if tick < 90 || fired {
			continue
		}
		// Aim exactly at the target as drawn, and report the render tick.
		id, _ := r.Server.NetID(target)
		e, ok := r.cs.Client.Entity(id)
		require.True(t, ok)
		drawn := (*components.Visual)(r.cs.World.Get(e, idVisual)).Pos
		dt, ok := r.cs.Client.DrawnTick()
		require.True(t, ok)
		require.Equal(t, r.cs.Client.InterpClock().RenderTick(), dt, "with snapshots on time, the world is drawn at the render tick")
		r.pending = &lagShot{drawn.X, drawn.Z, r.cs.Client.InterpClock().RenderTick(), dt}
		fired = true
		t.Logf("shot at tick %d: target drawn at x=%.3f, on the server at x=%.3f (render delay %v)", tick, drawn.X, r.Pos(target).X, r.cs.Client.InterpClock().Delay())
	}
	require.NotEmpty(t, r.got, "the shot arrived")
	s := r.got[0]
	measured := r.Server.RTT(r.cs.Client.ID())
	judged := rewinds.Judge(r.cs.Client.ID(), r.at[0], s.view, measured)
	st := rewinds.Stats(r.cs.Client.ID())
	t.Logf("claimed rewind %v, bound %v (measured RTT %v)", st.LastClaim, st.LastBound, measured)
	require.Equal(t, s.view, judged, "an honest claim is within the bound the server measured")
	require.Zero(t, st.Clamped)
	view := r.hist.Clamp(judged)
	require.Equal(t, s.view, view, "an honest report is within the history")
	var then components.Transform
	require.True(t, r.hist.At(target, view, &then))
	missBy := math.Hypot(then.Pos.X-s.x, then.Pos.Z-s.z)
	nowBy := math.Hypot(r.Pos(target).X-s.x, r.Pos(target).Z-s.z)
	t.Logf("compensated: target %.4f m from the aim point; uncompensated: %.3f m", missBy, nowBy)
	require.Less(t, missBy, 0.01, "with compensation the shot hits (the state the shooter drew)")
	require.Greater(t, nowBy, hitRadius, "without compensation it would have missed")

	// A report from too far back is clamped to MaxRewind.
	newest, _ := r.hist.Newest()
	require.Equal(t, float64(newest)-r.hist.Config().MaxRewind, r.hist.Clamp(s.view-1000))
	require.Equal(t, float64(newest), r.hist.Clamp(float64(newest)+50), "not from the future")
	require.Equal(t, float64(newest)-r.hist.Config().MaxRewind, r.hist.Clamp(math.NaN()))
}

// A client at 20 ms RTT that claims to have seen the world a second ago is
// judged at the bound the server measured for it (RTT + interpolation delay
// + margin: 270 ms), not at its claim; the claim and the bound are in its
// statistics.
func TestLagCompensationBoundedByMeasuredRTT(t *testing.T) {
	r := newLagRig(t, 20*time.Millisecond)
	r.Spawn(0, components.Vec3{})
	rewinds, err := lagcomp.NewRewinds(lagcomp.Limits{NetRate: harness.NetRate})
	require.NoError(t, err)
	for range 60 {
		r.Step()
	}
	r.pending = &lagShot{view: float64(r.Server.Tick()) - harness.NetRate} // a second back
	for len(r.got) == 0 {
		r.Step()
	}
	id := r.cs.Client.ID()
	measured := r.Server.RTT(id)
	judged := rewinds.Judge(id, r.at[0], r.got[0].view, measured)
	st := rewinds.Stats(id)
	back := time.Duration((r.at[0] - judged) / harness.NetRate * float64(time.Second))
	t.Logf("measured RTT %v; claimed %v, bound %v, judged %v back", measured, st.LastClaim, st.LastBound, back)
	require.Equal(t, 20*time.Millisecond, measured)
	require.Equal(t, 270*time.Millisecond, st.LastBound)
	require.LessOrEqual(t, back, st.LastBound+time.Microsecond)
	require.GreaterOrEqual(t, st.LastClaim, time.Second)
	require.Equal(t, uint64(1), st.Clamped)
}

// A starved buffer: the shooter's snapshots stop coming (its uplink still
// carries its input), so its render clock runs on while the target, drawn
// up to 100 ms past the newest snapshot (ClientConfig.MaxExtrapolation),
// then stands where the shooter sees it. Reported at the tick of the world
// it drew (Client.DrawnTick, what input.Player reports) the shot hits;
// reported at the render tick it would be judged against where the target
// went meanwhile, and miss.
func TestLagCompensatedHitWhileStarved(t *testing.T) {
	const speed, hitRadius = 20.0, 0.5 // m/s, m
	r := newLagRig(t, 100*time.Millisecond)
	target := r.Spawn(0, components.Vec3{X: -40})
	r.Game = func(int) { r.Pos(target).X += speed / harness.NetRate }
	rewinds, err := lagcomp.NewRewinds(lagcomp.Limits{NetRate: harness.NetRate})
	require.NoError(t, err)
	for range 90 {
		r.Step()
	}
	up, down := r.cs.Conn.Conditions()
	starved := down
	starved.Loss = 1
	require.NoError(t, r.cs.Conn.SetConditions(up, starved))
	idVisual := ecs.ComponentID[components.Visual](r.cs.World)
	id, _ := r.Server.NetID(target)
	var render float64
	for ticks := 0; ; ticks++ {
		require.Less(t, ticks, 30, "the render clock passed the extrapolation limit")
		r.Step()
		drawn, ok := r.cs.Client.DrawnTick()
		require.True(t, ok)
		if render = r.cs.Client.InterpClock().RenderTick(); render-drawn >= 2 {
			e, ok := r.cs.Client.Entity(id)
			require.True(t, ok)
			pos := (*components.Visual)(r.cs.World.Get(e, idVisual)).Pos
			r.pending = &lagShot{pos.X, pos.Z, render, drawn}
			t.Logf("shot after %d starved ticks: render tick %.2f, drawn tick %.2f", ticks+1, render, drawn)
			break
		}
	}
	for range 10 {
		if len(r.got) > 0 {
			break
		}
		r.Step()
	}
	require.NotEmpty(t, r.got, "the shot arrived")
	s := r.got[0]
	judged := rewinds.Judge(r.cs.Client.ID(), r.at[0], s.drawn, r.Server.RTT(r.cs.Client.ID()))
	st := rewinds.Stats(r.cs.Client.ID())
	t.Logf("claimed rewind %v, bound %v", st.LastClaim, st.LastBound)
	require.Equal(t, s.drawn, judged, "the drawn tick is within the bound")
	var then components.Transform
	require.True(t, r.hist.At(target, r.hist.Clamp(judged), &then))
	hit := math.Hypot(then.Pos.X-s.x, then.Pos.Z-s.z)
	require.True(t, r.hist.At(target, r.hist.Clamp(s.view), &then))
	atRender := math.Hypot(then.Pos.X-s.x, then.Pos.Z-s.z)
	t.Logf("judged at the drawn tick: %.4f m from the aim point; at the render tick: %.3f m", hit, atRender)
	require.Less(t, hit, 0.01, "judged at the drawn tick, the shot hits")
	require.Greater(t, atRender, hitRadius, "judged at the render tick, it would have missed")
}
