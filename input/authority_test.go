package input_test

import (
	"errors"
	"testing"
	"time"

	arche "github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/input"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/replication/schema"
	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/sim"
)

// Misuse is refused at setup, loudly.
func TestHelpersRefuseMisuse(t *testing.T) {
	reg := schema.NewRegistry()
	w := arche.NewWorld()
	_, err := input.NewAuthority(&w, input.AuthorityConfig[Walker, Stick]{Registry: reg, Step: walk})
	require.ErrorIs(t, err, input.ErrInvalidConfig, "Walker is not registered")
	require.ErrorContains(t, err, "Walker is not in the registry")
	schema.MustRegister[Walker](reg)
	_, err = input.NewAuthority(&w, input.AuthorityConfig[Walker, Stick]{Registry: reg})
	require.ErrorIs(t, err, input.ErrInvalidConfig, "no step")
	a, err := input.NewAuthority(&w, input.AuthorityConfig[Walker, Stick]{Registry: reg, Step: walk})
	require.NoError(t, err)
	cfg := replication.ServerConfig{Input: func(replication.ClientID, uint32, []byte) error { return nil }}
	require.ErrorIs(t, a.Configure(&cfg), input.ErrInvalidConfig, "input hooks already set")

	network := sim.NewNetwork(1, time.Unix(0, 0))
	network.Listen("server")
	conn, err := network.Dial("server", sim.Link{})
	require.NoError(t, err)
	cw := arche.NewWorld()
	cl, err := replication.NewClient(&cw, conn, replication.ClientConfig{Registry: schema.NewRegistry(), Logger: quiet})
	require.NoError(t, err)
	_, err = input.NewPlayer(cl, input.PlayerConfig[Walker, Stick]{Step: walk, Sample: func(uint32, *Walker) Stick { return Stick{} }})
	require.ErrorContains(t, err, "not in the client's registry")
	_, err = input.NewPlayer(cl, input.PlayerConfig[Walker, Stick]{Step: walk})
	require.ErrorIs(t, err, input.ErrInvalidConfig, "no Sample")
}

// Configure after NewServer would configure nothing (the server copied its
// config): it fails, and an authority that was never configured panics at
// its first step beside an open server rather than never stepping.
func TestAuthorityConfigureOrder(t *testing.T) {
	reg := schema.NewRegistry()
	schema.MustRegister[Walker](reg)
	network := sim.NewNetwork(1, time.Unix(0, 0))
	sw := arche.NewWorld()
	a, err := input.NewAuthority(&sw, input.AuthorityConfig[Walker, Stick]{Registry: reg, Step: walk})
	require.NoError(t, err)
	a.Step() // no server yet: nothing to check
	cfg := replication.ServerConfig{Registry: reg, Now: network.Now, Logger: quiet}
	srv, err := replication.NewServer(&sw, network.Listen("server"), cfg)
	require.NoError(t, err)
	err = a.Configure(&cfg)
	require.ErrorIs(t, err, input.ErrInvalidConfig)
	require.ErrorContains(t, err, "Configure after replication.NewServer")
	require.Nil(t, cfg.Input, "the config is left alone")
	require.PanicsWithValue(t, "input: this Authority's Configure was not called on the ServerConfig of the world's replication.Server (call it before NewServer): its entities would never get their owners' input", a.Step)
	require.NoError(t, srv.Close())
	a.Step() // the server is gone
}

// A client whose input section does not decode is dropped with a reason
// naming the input; its entity stops stepping, the log is gone.
func TestAuthorityDropsMalformedInput(t *testing.T) {
	reg := schema.NewRegistry()
	schema.MustRegister[Walker](reg)
	network := sim.NewNetwork(1, time.Unix(0, 0))
	sw := arche.NewWorld()
	a, err := input.NewAuthority(&sw, input.AuthorityConfig[Walker, Stick]{Registry: reg, Step: walk})
	require.NoError(t, err)
	var reason error
	cfg := replication.ServerConfig{Registry: reg, Now: network.Now, Logger: quiet,
		OnDisconnect: func(_ replication.ClientID, r error) { reason = r }}
	require.NoError(t, a.Configure(&cfg))
	srv, err := replication.NewServer(&sw, network.Listen("server"), cfg)
	require.NoError(t, err)
	conn, err := network.Dial("server", sim.Link{})
	require.NoError(t, err)
	cw := arche.NewWorld()
	cl, err := replication.NewClient(&cw, conn, replication.ClientConfig{Registry: reg, Now: network.Now, Logger: quiet,
		Input: func(dst []byte) []byte { return append(dst, 0xff, 0xff, 0xff, 0xff, 0xff) }}) // not an input section
	require.NoError(t, err)
	for i := 0; i < 30 && reason == nil; i++ {
		srv.Receive()
		srv.Send()
		network.Advance(time.Second / 30)
		cl.Receive()
		cl.Send()
	}
	var ce *transport.CloseError
	require.True(t, errors.As(reason, &ce), "dropped: %v", reason)
	require.Equal(t, transport.CodeProtocolError, ce.Code)
	require.Contains(t, ce.Reason, "input: ")
	_, open := a.ClientStats(1)
	require.False(t, open, "its log is closed")
	require.Equal(t, uint64(1), a.Stats().Dropped)
}

// Stepping and rounding the owned entities allocates nothing per tick.
func TestAuthorityNoAllocs(t *testing.T) {
	reg := schema.NewRegistry()
	schema.MustRegister[Walker](reg)
	w := arche.NewWorld()
	steps := 0
	a, err := input.NewAuthority(&w, input.AuthorityConfig[Walker, Stick]{Registry: reg, Step: walk,
		OnStep: func(arche.Entity, *Walker, *Walker, *Stick) { steps++ }})
	require.NoError(t, err)
	cfg := replication.ServerConfig{}
	require.NoError(t, a.Configure(&cfg))
	cfg.OnConnect(1) // opens client 1's log
	e := w.NewEntity(arche.ComponentID[Walker](&w), arche.ComponentID[components.Owner](&w))
	(*components.Owner)(w.Get(e, arche.ComponentID[components.Owner](&w))).Client = 1
	require.Zero(t, testing.AllocsPerRun(50, a.Round), "round")
	require.Zero(t, testing.AllocsPerRun(50, a.Step), "step")
	require.Equal(t, uint64(51), a.Stats().Steps)
	require.Equal(t, 51, steps)
}
