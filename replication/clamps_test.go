package replication_test

import (
	"bytes"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/replication/schema"
	"github.com/archenet/archenet/transport/sim"
	"github.com/mlange-42/arche/ecs"
	"github.com/mlange-42/arche/generic"
	"github.com/stretchr/testify/require"
)

type clampHealth struct {
	HP float32 `net:"range=0:100,step=1"`
}

type clampStats struct {
	Speed float32 `net:"range=0:10,step=0.1"`
	Armor int16   `net:"range=0:50"`
}

// A server world holding values its fields cannot represent counts them per
// component type and field and warns, rate-limited per field, naming both.
func TestServerReportsClamps(t *testing.T) {
	reg := schema.NewRegistry()
	schema.MustRegister[components.Transform](reg)
	schema.MustRegister[clampHealth](reg, schema.WithName("Health"))
	schema.MustRegister[clampStats](reg, schema.WithName("Stats"))
	var logBuf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logBuf, nil))
	net := sim.NewNetwork(1, time.Unix(1000, 0))

	sw := ecs.NewWorld()
	server, err := replication.NewServer(&sw, net.Listen("game"), replication.ServerConfig{Registry: reg, Now: net.Now, Logger: log})
	require.NoError(t, err)
	spawner := generic.NewMap4[components.Replicated, components.Transform, clampHealth, clampStats](&sw)
	e := spawner.NewWith(&components.Replicated{},
		&components.Transform{Pos: components.Vec3{X: math.NaN()}, Rot: components.QuatIdentity()},
		&clampHealth{HP: 300}, &clampStats{Speed: float32(math.Inf(1)), Armor: 20})

	cw := ecs.NewWorld()
	conn, err := net.Dial("game", sim.Link{})
	require.NoError(t, err)
	client, err := replication.NewClient(&cw, conn, replication.ClientConfig{Registry: reg, Now: net.Now, Logger: log})
	require.NoError(t, err)
	tick := func() {
		server.Receive()
		server.Send()
		net.Advance(time.Second / 30)
		client.Receive()
		client.Send()
	}
	for range 5 {
		tick()
	}
	require.NoError(t, client.Err())

	byField := map[string]schema.ClampCount{}
	for _, c := range server.Clamps() {
		byField[c.Type+"."+c.Field] = c
	}
	require.Len(t, byField, 3, "%+v", server.Clamps())
	require.NotZero(t, byField["Health.HP"].OutOfRange)
	require.NotZero(t, byField["Transform.Pos.X"].NaN)
	require.NotZero(t, byField["Stats.Speed"].Inf)
	require.Zero(t, byField["Health.HP"].NaN+byField["Health.HP"].Inf)

	// Clients see the clamped values, the server keeps its own.
	id, _ := server.NetID(e)
	m, ok := client.Entity(id)
	require.True(t, ok)
	cHealth, sHealth := generic.NewMap[clampHealth](&cw), generic.NewMap[clampHealth](&sw)
	require.Equal(t, float32(100), cHealth.Get(m).HP)
	require.Equal(t, float32(300), sHealth.Get(e).HP)

	out := logBuf.String()
	warnings := func(s string) []string {
		var w []string
		for _, l := range strings.Split(s, "\n") {
			if strings.Contains(l, "value clamped by quantization") {
				w = append(w, l)
			}
		}
		return w
	}
	w := warnings(out)
	require.Len(t, w, 3, out)
	require.Contains(t, out, "component=Health field=HP kind=out-of-range")
	require.Contains(t, out, "component=Transform field=Pos.X kind=nan")
	require.Contains(t, out, "component=Stats field=Speed kind=inf")
	for _, l := range w {
		require.Contains(t, l, "level=WARN")
	}

	// More clamps within ClampWarnEvery are counted but not logged again
	// (the server quantizes a value again when its bytes change)…
	logBuf.Reset()
	before := server.Clamps()
	for i := range 30 {
		sHealth.Get(e).HP = float32(301 + i)
		tick()
	}
	require.Empty(t, warnings(logBuf.String()))
	after := server.Clamps()
	require.Equal(t, "Health", after[1].Type)
	require.Equal(t, before[1].OutOfRange+30, after[1].OutOfRange)

	// …and once it has passed, the growth is logged with its count.
	net.Advance(replication.ClampWarnEvery)
	tick()
	w = warnings(logBuf.String())
	require.Len(t, w, 3, logBuf.String())
	require.Contains(t, logBuf.String(), "component=Health field=HP kind=out-of-range count=30 total=31")

	// Values back in range stop the warnings.
	sStats, sTrans := generic.NewMap[clampStats](&sw), generic.NewMap[components.Transform](&sw)
	sHealth.Get(e).HP = 50
	sStats.Get(e).Speed = 1
	sTrans.Get(e).Pos.X = 1
	for range 3 {
		tick() // the last clamps of the previous tick may still be logged
	}
	logBuf.Reset()
	net.Advance(2 * replication.ClampWarnEvery)
	for range 3 {
		tick()
	}
	require.Empty(t, warnings(logBuf.String()))
}
