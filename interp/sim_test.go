package interp_test

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	arche "github.com/mlange-42/arche/ecs"
	"github.com/mlange-42/arche/generic"
	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/interp"
)

// epoch is local time zero; server time zero (tick 0) is sent at epoch.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// link simulates snapshots of one moving entity sent every tick interval over
// a network with fixed latency, uniform jitter and random loss, all driven by
// a seeded random source.
type link struct {
	rng      *rand.Rand
	interval time.Duration
	latency  time.Duration
	jitter   time.Duration // arrival = send + latency ± jitter (uniform)
	loss     float64
	nextTick uint32
	inFlight []packet
	sent     []bool // by tick: true if not lost
}

type packet struct {
	tick    uint32
	arrival time.Time
}

func newLink(seed uint64, interval, latency, jitter time.Duration, loss float64) *link {
	return &link{rng: rand.New(rand.NewPCG(seed, 0x5eed)), interval: interval, latency: latency, jitter: jitter, loss: loss}
}

// deliver sends every tick due by now and returns the packets arrived by
// now, in arrival order (so reordering happens when jitter exceeds the
// interval).
func (l *link) deliver(now time.Time) []packet {
	for {
		send := epoch.Add(time.Duration(l.nextTick) * l.interval)
		if send.After(now) {
			break
		}
		lost := l.rng.Float64() < l.loss
		j := time.Duration((2*l.rng.Float64() - 1) * float64(l.jitter))
		l.sent = append(l.sent, !lost)
		if !lost {
			l.inFlight = append(l.inFlight, packet{l.nextTick, send.Add(l.latency + j)})
		}
		l.nextTick++
	}
	sort.Slice(l.inFlight, func(i, j int) bool { return l.inFlight[i].arrival.Before(l.inFlight[j].arrival) })
	n := 0
	for n < len(l.inFlight) && !l.inFlight[n].arrival.After(now) {
		n++
	}
	out := append([]packet(nil), l.inFlight[:n]...)
	l.inFlight = l.inFlight[n:]
	return out
}

// longestLossRun returns the longest run of consecutive lost ticks.
func (l *link) longestLossRun() int {
	run, best := 0, 0
	for _, ok := range l.sent {
		if ok {
			run = 0
			continue
		}
		run++
		best = max(best, run)
	}
	return best
}

// circle is the true path: radius R metres at Omega rad/s in the XZ plane,
// facing its heading (yaw = Omega·t about +Y).
const (
	circleR     = 10.0
	circleOmega = 1.0
)

func truePos(t float64) components.Vec3 {
	return components.Vec3{X: circleR * math.Cos(circleOmega*t), Z: circleR * math.Sin(circleOmega*t)}
}

func trueRot(t float64) components.Quat {
	return components.QuatAxisAngle(components.Vec3{Y: 1}, circleOmega*t)
}

// client is one rendering client with one interpolated entity.
type client struct {
	world  *arche.World
	clock  *interp.Clock
	sys    *interp.System
	entity arche.Entity
	buf    *generic.Map2[interp.Buffer, components.Visual]
}

func newClient(t testing.TB, cfg interp.ClockConfig) *client {
	t.Helper()
	w := arche.NewWorld()
	clk, err := interp.NewClock(cfg)
	require.NoError(t, err)
	m := generic.NewMap2[interp.Buffer, components.Visual](&w)
	c := &client{world: &w, clock: clk, sys: interp.NewSystem(clk, 0), buf: &m}
	c.entity = m.New()
	c.sys.Initialize(&w)
	return c
}

// frame receives packets, advances the clock to now and runs the system.
func (c *client) frame(now time.Time, pkts []packet, interval time.Duration) components.Visual {
	buf, vis := c.buf.Get(c.entity)
	for _, p := range pkts {
		st := (time.Duration(p.tick) * interval).Seconds()
		buf.Push(p.tick, truePos(st), trueRot(st))
		c.clock.Observe(p.tick, p.arrival)
	}
	c.clock.Advance(now)
	c.sys.Update(c.world)
	return *vis
}
