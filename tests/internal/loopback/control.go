//go:build !js

package loopback

import (
	"time"

	"github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/tests/internal/harness"
	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/quic"
)

// Control is a rig's control: a second server that replicates the rig's
// world (the same entities, the same game, the probe) over the same kind of
// transport to ControlClients well-behaved clients, stepped and timed in
// the same loop as the server under test. It is what the server under test
// is measured against: a loaded machine slows both alike.
type Control struct {
	Server  *replication.Server
	Clients []*harness.ClientSide
	Ticks   []time.Duration // its ticks' durations, index for index with Rig.Ticks
	LagMax  int             // its clients' worst probe lag since the last ResetLag, in ticks
}

// ControlClients is how many clients a Control serves.
const ControlClients = 2

// startQUICControl starts the rig's control over QUIC.
// Limits are the rigs' and the controls' server limits: no bound per
// address (every client is on 127.0.0.1), and liveness timeouts of a
// minute (see newRig).
var Limits = replication.ServerLimits{MaxClientsPerAddress: -1, JoinTimeout: time.Minute, ClientTimeout: time.Minute}

func (r *Rig) startQUICControl() {
	l, err := quic.Listen("127.0.0.1:0", &quic.Config{TLS: r.Cert.ServerTLS(), Logger: harness.Quiet})
	require.NoError(r.T, err)
	r.startControl(l, func() transport.Conn { return r.dialQUIC(l.Addr().String()) })
}

// startControl starts the rig's control on l, with clients dialled by dial,
// and steps the rig until they are ready.
func (r *Rig) startControl(l transport.Listener, dial func() transport.Conn) {
	srv, err := replication.NewServer(r.World, l, replication.ServerConfig{Registry: r.Registry, NetRate: harness.NetRate, Logger: harness.Quiet, Limits: Limits})
	require.NoError(r.T, err)
	r.T.Cleanup(func() { srv.Close() })
	c := &Control{Server: srv, Ticks: make([]time.Duration, len(r.Ticks))}
	for range ControlClients {
		w := ecs.NewWorld()
		cl, err := replication.NewClient(&w, dial(), replication.ClientConfig{Registry: r.Registry, Logger: harness.Quiet})
		require.NoError(r.T, err)
		c.Clients = append(c.Clients, &harness.ClientSide{World: &w, Client: cl})
	}
	r.Control = c
	r.Until("the control's clients ready", 20*time.Second, func() bool {
		for _, cs := range c.Clients {
			if !cs.Client.Ready() {
				return false
			}
		}
		return true
	})
}

// ResetLag starts a new window of LagMax, the control's too.
func (r *Rig) ResetLag() {
	r.LagMax = map[int]int{}
	r.Control.LagMax = 0
}

// RequireKeptUp checks the good clients' worst probe lag since the last
// ResetLag: at most MaxLag or twice the control's clients' worst, whichever
// is more (a machine too loaded for MaxLag delays the control's clients
// too).
func (r *Rig) RequireKeptUp() {
	r.T.Helper()
	bound := max(MaxLag, 2*r.Control.LagMax)
	for _, i := range r.Good {
		require.LessOrEqual(r.T, r.LagMax[i], bound, "client %d fell %d ticks behind; the control's clients at most %d in the same time", i, r.LagMax[i], r.Control.LagMax)
	}
}
