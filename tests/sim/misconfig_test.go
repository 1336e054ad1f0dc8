package sim_test

import (
	"bytes"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/ecs"
	"github.com/archenet/archenet/input"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/replication/schema"
	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/sim"
	arche "github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/require"
)

// disc is a small game's replicated 2D state; nudge its input.
type disc struct {
	X float64 `net:"range=-100:100,step=0.01"`
	Z float64 `net:"range=-100:100,step=0.01"`
}

type nudge struct {
	DX int8 `net:"range=-1:1"`
}

func stepDisc(d *disc, in *nudge, dt float64) { d.X += float64(in.DX) * dt }

// wiring is a server and one client of the disc game over the simulated
// network, with every one of the client's systems but those left out.
type wiring struct {
	net     *sim.Network
	srv     *replication.Server
	cl      *replication.Client
	sSched  *ecs.Scheduler
	cSched  *ecs.Scheduler
	log     *bytes.Buffer // the client's log
	srvLog  *bytes.Buffer
	dropped []error
	errs    []error // the client's OnError
}

func newWiring(t *testing.T, omit string) *wiring {
	t.Helper()
	reg := schema.NewRegistry()
	schema.MustRegister[disc](reg)
	schema.MustRegister[components.Predicted](reg)
	w := &wiring{net: sim.NewNetwork(9, time.Unix(5000, 0)), log: &bytes.Buffer{}, srvLog: &bytes.Buffer{}}
	sw := arche.NewWorld()
	auth, err := input.NewAuthority(&sw, input.AuthorityConfig[disc, nudge]{Registry: reg, Step: stepDisc})
	require.NoError(t, err)
	cfg := replication.ServerConfig{Registry: reg, NetRate: 30, NetDivisor: 2, Now: w.net.Now,
		Tick:         func() uint32 { return w.sSched.Info().NetTick },
		Logger:       slog.New(slog.NewTextHandler(w.srvLog, nil)),
		OnDisconnect: func(_ replication.ClientID, err error) { w.dropped = append(w.dropped, err) }}
	require.NoError(t, auth.Configure(&cfg))
	w.srv, err = replication.NewServer(&sw, w.net.Listen("server"), cfg)
	require.NoError(t, err)
	w.sSched, err = ecs.New(&sw, ecs.Config{TickRate: 60, NetDivisor: 2})
	require.NoError(t, err)
	w.sSched.AddNetSystem(w.srv.ReceiveSystem())
	w.sSched.AddSystem(auth.System())
	w.sSched.AddSystem(auth.RoundSystem())
	w.sSched.AddNetSystem(w.srv.SendSystem())
	idRep, idDisc, idPred := arche.ComponentID[components.Replicated](&sw), arche.ComponentID[disc](&sw), arche.ComponentID[components.Predicted](&sw)
	idOwner := arche.ComponentID[components.Owner](&sw)
	sw.NewEntity(idRep, idDisc) // a remote disc
	me := sw.NewEntity(idRep, idDisc, idPred, idOwner)
	(*components.Owner)(sw.Get(me, idOwner)).Client = 1

	conn, err := w.net.Dial("server", sim.Link{})
	require.NoError(t, err)
	cw := arche.NewWorld()
	w.cl, err = replication.NewClient(&cw, conn, replication.ClientConfig{Registry: reg, Now: w.net.Now,
		Logger:                 slog.New(slog.NewTextHandler(w.log, &slog.HandlerOptions{Level: slog.LevelWarn})),
		InterpolatedComponents: []reflect.Type{reflect.TypeFor[disc]()},
		OnError:                func(err error) { w.errs = append(w.errs, err) }})
	require.NoError(t, err)
	w.cSched, err = ecs.New(&cw, ecs.Config{TickRate: 120})
	require.NoError(t, err)
	if omit != "receive" {
		w.cSched.AddSystem(w.cl.ReceiveSystem())
	}
	if omit != "send" { // ("send": a client without its Player, and no SendSystem)
		player, err := input.NewPlayer(w.cl, input.PlayerConfig[disc, nudge]{Step: stepDisc, Now: w.net.Now,
			Sample: func(uint32, *disc) nudge { return nudge{DX: 1} }})
		require.NoError(t, err)
		if omit != "predict" {
			w.cSched.AddSystem(player.System())
		}
	}
	if omit != "interpolate" {
		w.cSched.AddSystem(w.cl.InterpolationSystem())
	}
	if omit == "predict" {
		w.cSched.AddSystem(w.cl.SendSystem()) // (a client without its Player's system sends itself)
	}
	return w
}

// run steps both worlds in simulated time until the client's log holds
// want, for at most limit; it returns when that was.
func (w *wiring) run(t *testing.T, limit time.Duration, want func() bool) time.Duration {
	t.Helper()
	const frame = time.Second / 120
	for at := time.Duration(0); at <= limit; at += frame {
		w.net.Advance(frame)
		w.sSched.Advance(frame)
		w.cSched.Advance(frame)
		if want() {
			return at
		}
	}
	return -1
}

// Each piece of the client's wiring that is missing is named by the client
// within 5 s, in a warning on its logger.
func TestMisconfiguredClientSaysWhich(t *testing.T) {
	for _, tc := range []struct {
		omit, want string
	}{
		{"receive", "Client.Receive has not run: the client sees nothing from the server, stays connecting and is dropped (add Client.ReceiveSystem"},
		{"interpolate", "Client.Interpolate has not run: remote entities show raw snapshots, and the client reports no view with its inputs (lag compensation off) (add Client.InterpolationSystem"},
		{"predict", "input.Player.Update has not run: the client's own entity is not predicted and no input is sent (add Player.System"},
	} {
		t.Run(tc.omit, func(t *testing.T) {
			w := newWiring(t, tc.omit)
			at := w.run(t, 5*time.Second, func() bool { return strings.Contains(w.log.String(), tc.want) })
			require.GreaterOrEqual(t, at, time.Duration(0), "no warning naming the missing system within 5 s; the client's log:\n%s", w.log.String())
			t.Logf("warned %v after the start: %s", at, firstLine(w.log.String()))
			require.Equal(t, 1, strings.Count(w.log.String(), tc.want), "warned once, not every frame")
		})
	}
}

// A client that neither sends (no Player system, no SendSystem) is named
// on the client, and the server drops it with a reason naming the input
// helper's system; the client's close is logged at ERROR and offered to
// its OnError hook.
func TestMisconfiguredClientNeverSends(t *testing.T) {
	w := newWiring(t, "send")
	want := "Client.Send has not run since the Welcome: the server hears no acks or input from this client and drops it (add Client.SendSystem last, or run input.Player.System, which sends)"
	at := w.run(t, 5*time.Second, func() bool { return strings.Contains(w.log.String(), want) })
	require.GreaterOrEqual(t, at, time.Duration(0), "the client's log:\n%s", w.log.String())
	t.Logf("warned %v after the start", at)
	at = w.run(t, 5*time.Second, func() bool { return len(w.dropped) > 0 && w.cl.State() == replication.StateClosed })
	require.GreaterOrEqual(t, at, time.Duration(0))
	var ce *transport.CloseError
	require.True(t, errors.As(w.dropped[0], &ce))
	require.Contains(t, ce.Reason, "is it running Client.Receive and input.Player.System (or Client.Send)?")
	require.Len(t, w.errs, 1, "OnError saw the close")
	require.Equal(t, w.cl.Err(), w.errs[0])
	require.Contains(t, w.log.String(), "level=ERROR msg=\"archenet: disconnected\"")
}

// A well-wired client warns about nothing.
func TestWellWiredClientIsQuiet(t *testing.T) {
	w := newWiring(t, "")
	w.run(t, 5*time.Second, func() bool { return false })
	require.True(t, w.cl.Ready())
	require.Empty(t, w.log.String())
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
