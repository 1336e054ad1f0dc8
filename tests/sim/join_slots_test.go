package sim_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/tests/internal/harness"
	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/sim"
	"github.com/stretchr/testify/require"
)

// vanisher is a peer that connects from one host as fast as it can, says a
// valid Hello on each connection and then nothing at all (it joins and
// vanishes, without a close).
type vanisher struct {
	h     *harness.Harness
	host  string
	conns []*sim.Conn
}

func (v *vanisher) join(n int) {
	hello := transport.Hello{Version: replication.ProtocolVersion, ProtocolHash: v.h.Registry.Hash()}.Append(nil)
	for range n {
		c, err := v.h.Net.DialFrom("server", fmt.Sprintf("%s:%d", v.host, 1000+len(v.conns)), sim.Link{})
		require.NoError(v.h.T, err)
		require.NoError(v.h.T, c.SendMessage(hello))
		v.conns = append(v.conns, c)
	}
}

// rejects returns the reasons of the Rejects the vanisher's connections got.
func (v *vanisher) rejects() map[string]int {
	reasons := map[string]int{}
	for _, c := range v.conns {
		for {
			m, ok := c.PollMessage()
			if !ok {
				break
			}
			if rj, err := transport.ParseReject(m); err == nil {
				reasons[rj.Reason]++
			}
		}
	}
	return reasons
}

// One source joining and vanishing as fast as it can (four connections a
// tick, 480 in 4 s) holds at most MaxClientsPerAddress slots with the
// defaults (64 slots, 8 per address), is told which limit it hit, and a
// player from another address joins at once; the vanished peers' slots are
// reclaimed by the JoinTimeout (2 s), not the 10 s ClientTimeout.
func TestOneSourceCannotTakeEverySlot(t *testing.T) {
	h := harness.New(t, 0, sim.Link{}, nil)
	h.Spawn(0, components.Vec3{})
	v := &vanisher{h: h, host: "198.51.100.7"}
	var player *harness.ClientSide
	var joined time.Duration
	most := 0
	for tick := range 120 {
		v.join(4)
		if tick == 30 {
			player = h.AddClientFrom("203.0.113.9:4000")
		}
		h.Step()
		if player != nil && joined == 0 && player.Client.Ready() {
			joined = time.Duration(tick-30) * harness.TickDt
		}
		most = max(most, len(h.Server.Clients())-btoi(player != nil && player.Client.Ready()))
	}
	reasons := v.rejects()
	t.Logf("vanisher held at most %d slots; the player was ready %v after it dialled; rejects: %v", most, joined, reasons)
	require.NotNil(t, player)
	require.True(t, player.Client.Ready(), "the player from another address got in")
	require.LessOrEqual(t, joined, 2*time.Second)
	require.LessOrEqual(t, most, replication.DefaultMaxClientsPerAddress)
	require.NotEmpty(t, reasons)
	for reason := range reasons {
		require.Contains(t, reason, "too many clients from one address: 8 clients from 198.51.100.7 (ServerConfig.Limits.MaxClientsPerAddress)")
	}
	require.GreaterOrEqual(t, h.Server.Stats.Disconnected, 8, "vanished peers were dropped by the JoinTimeout (2 s), not the ClientTimeout (10 s)")
}

// With the per-address limit off (LAN play), peers that joined and
// vanished give their slots back within the JoinTimeout: a player refused
// as "server full" gets in on its next try, 2 s later.
func TestVanishedPeersSlotsReclaimed(t *testing.T) {
	h := harness.New(t, 0, sim.Link{}, func(cfg *replication.ServerConfig) {
		cfg.Limits.MaxClients = 16
		cfg.Limits.MaxClientsPerAddress = -1
	})
	h.Spawn(0, components.Vec3{})
	v := &vanisher{h: h, host: "198.51.100.7"}
	v.join(16)
	h.Run(2)
	require.Len(t, h.Server.Clients(), 16)
	early := h.AddClientFrom("203.0.113.9:4000")
	h.Run(3)
	require.Equal(t, replication.StateClosed, early.Client.State())
	require.ErrorContains(t, early.Client.Err(), "rejected by server: server full: 16 of 16 slots taken (ServerConfig.Limits.MaxClients)")

	start := h.Net.Now()
	for len(h.Server.Clients()) > 0 {
		require.Less(t, h.Net.Now().Sub(start), 3*time.Second, "the vanished peers' slots were not reclaimed")
		h.Step()
	}
	t.Logf("16 vanished peers dropped %v after the server was full", h.Net.Now().Sub(start))
	late := h.AddClientFrom("203.0.113.9:4001")
	h.Run(5)
	require.True(t, late.Client.Ready(), fmt.Sprint(late.Client.Err()))
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// 64 sources joining and vanishing at 60 joins a second keep the 64 slots
// taken by joins that will never finish; a real player who arrives while
// every slot is taken is ready within 2 s, on its first try: a join that has acknowledged nothing
// in a quarter of the JoinTimeout gives its slot to the newest client while
// the server is full. The players already in keep their slots.
func TestChurningSourcesCannotLockPlayersOut(t *testing.T) {
	h := harness.New(t, 0, sim.Link{}, nil)
	h.Spawn(0, components.Vec3{})
	early := h.AddClientFrom("203.0.113.1:4000")
	h.Run(10)
	require.True(t, early.Client.Ready())
	vs := make([]*vanisher, 64)
	for i := range vs {
		vs[i] = &vanisher{h: h, host: fmt.Sprintf("198.51.100.%d", i+1)}
	}
	joins := 0
	churn := func(ticks int) {
		for range ticks {
			// 60 joins a second at the harness's 30 Hz: two a tick, from
			// the sources in turn.
			for range 2 {
				vs[joins%len(vs)].join(1)
				joins++
			}
			h.Step()
		}
	}
	churn(3 * harness.NetRate)
	// The player dials when every slot is taken.
	for len(h.Server.Clients()) < 64 {
		require.Less(t, joins, 1000, "the churn does not fill the server")
		churn(1)
	}
	late := h.AddClientFrom("203.0.113.9:4000")
	start := h.Net.Now()
	for !late.Client.Ready() {
		require.Less(t, h.Net.Now().Sub(start), 2*time.Second, "the player was not let in: %v", late.Client.Err())
		churn(1)
	}
	t.Logf("%d joins from 64 sources: a player ready %v after it dialled; %d joins evicted", joins, h.Net.Now().Sub(start), h.Server.Stats.JoinsEvicted)
	churn(2 * harness.NetRate)
	require.True(t, late.Client.Ready(), "%v", late.Client.Err())
	require.True(t, early.Client.Ready(), "%v", early.Client.Err())
	require.Positive(t, h.Server.Stats.JoinsEvicted)
}

// With an Authenticator, a full server's stale join gives its slot only to a
// client that authenticated: a Hello with a bad token is refused by the
// Authenticator and evicts nobody; a good one then gets in, evicting one.
func TestOnlyAuthenticatedClientsEvictStaleJoins(t *testing.T) {
	h := harness.New(t, 0, sim.Link{}, func(cfg *replication.ServerConfig) {
		cfg.Limits.MaxClients = 8
		cfg.Limits.MaxClientsPerAddress = -1
		cfg.Authenticator = func(_ context.Context, _ net.Addr, token []byte) error {
			if string(token) == "bad" {
				return errors.New("bad token")
			}
			return nil
		}
	})
	h.Spawn(0, components.Vec3{})
	v := &vanisher{h: h, host: "198.51.100.7"}
	v.join(8)
	until := func(what string, cond func() bool) {
		for start := h.Net.Now(); !cond(); h.Step() {
			require.Less(t, h.Net.Now().Sub(start), 2*time.Second, what)
			runtime.Gosched() // (the Authenticator's goroutines)
		}
	}
	until("the vanishers admitted", func() bool { return len(h.Server.Clients()) == 8 })
	h.Run(harness.NetRate) // a second: every join is stale
	h.ClientConfig = func(cfg *replication.ClientConfig) { cfg.Token = []byte("bad") }
	bad := h.AddClientFrom("203.0.113.9:4000")
	until("the bad token refused", func() bool { return bad.Client.State() == replication.StateClosed })
	require.ErrorContains(t, bad.Client.Err(), "bad token")
	require.Zero(t, h.Server.Stats.JoinsEvicted, "a bad token evicted a join")
	require.Len(t, h.Server.Clients(), 8)
	h.ClientConfig = func(cfg *replication.ClientConfig) { cfg.Token = []byte("good") }
	good := h.AddClientFrom("203.0.113.9:4001")
	until("the good player ready", good.Client.Ready)
	require.Equal(t, 1, h.Server.Stats.JoinsEvicted)
}

// A full server with one stale join promises its slot to one authenticating
// client only: of two good players who dial together, one gets in and the
// other is refused as "server full" before its token costs an
// Authenticator call.
func TestOneStaleJoinIsPromisedOnce(t *testing.T) {
	var calls atomic.Int32
	h := harness.New(t, 0, sim.Link{}, func(cfg *replication.ServerConfig) {
		cfg.Limits.MaxClients = 2
		cfg.Limits.MaxClientsPerAddress = -1
		cfg.Authenticator = func(context.Context, net.Addr, []byte) error { calls.Add(1); return nil }
	})
	h.Spawn(0, components.Vec3{})
	early := h.AddClientFrom("203.0.113.1:4000")
	v := &vanisher{h: h, host: "198.51.100.7"}
	v.join(1)
	stepUntil(t, h, "both admitted", func() bool { return early.Client.Ready() && len(h.Server.Clients()) == 2 })
	h.Run(harness.NetRate) // a second: the vanisher's join is stale
	calls.Store(0)
	a := h.AddClientFrom("203.0.113.9:4000")
	b := h.AddClientFrom("203.0.113.9:4001")
	stepUntil(t, h, "one player ready, one refused", func() bool {
		return (a.Client.Ready() || b.Client.Ready()) && (a.Client.State() == replication.StateClosed || b.Client.State() == replication.StateClosed)
	})
	refused := a
	if a.Client.Ready() {
		refused = b
	}
	require.ErrorContains(t, refused.Client.Err(), "server full")
	require.Equal(t, int32(1), calls.Load(), "the Authenticator ran for the client with no slot to give")
	require.Equal(t, 1, h.Server.Stats.JoinsEvicted)
	require.True(t, early.Client.Ready())
}
