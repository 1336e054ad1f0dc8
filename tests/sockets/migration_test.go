package sockets_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/tests/internal/loopback"
	"github.com/archenet/archenet/transport/netem"
	"github.com/archenet/archenet/transport/quic"
)

// Over QUIC loopback: mid-match, the client's address as the server sees
// it changes (a NAT rebinding: netem.Proxy.Rebind gives it a new source
// port, and the old binding is gone). quic-go validates the new path and
// moves the connection to it: the match goes on with no reconnect — the
// same client, the same connection, no disconnect on the server — and the
// client stays current.
func TestQUICAddressChangeKeepsTheSeat(t *testing.T) {
	r := loopback.NewQUIC(t, quic.Config{}, nil)
	r.Movers(50, 3)
	r.Game = func(int) {}
	proxy, err := netem.Listen(r.QUIC.Addr().String(), 1)
	require.NoError(t, err)
	defer proxy.Close()
	i := r.Dial(proxy.Addr().String(), "")
	r.Good = append(r.Good, i)
	c := r.Clients[i].Client
	r.Until("the client ready", 20*time.Second, c.Ready)
	id := c.ID()
	ids := r.Server.Clients()
	require.Equal(t, []replication.ClientID{id}, ids)
	before := r.Server.Conn(id).RemoteAddr().String()
	r.RunFor(time.Second, nil)

	moved, err := proxy.Rebind()
	require.NoError(t, err)
	require.Equal(t, 1, moved)
	r.Until("the server sees the new address", 10*time.Second, func() bool {
		conn := r.Server.Conn(id)
		return conn != nil && conn.RemoteAddr().String() != before
	})
	r.ResetLag()
	r.RunFor(2*time.Second, nil)
	require.NoError(t, c.Err())
	require.True(t, c.Ready())
	require.Equal(t, id, c.ID(), "the same seat")
	require.Equal(t, []replication.ClientID{id}, r.Server.Clients())
	require.Empty(t, r.Events(), "no disconnect on the server")
	lag, ok := r.ProbeLag(i)
	require.True(t, ok)
	require.LessOrEqual(t, lag, 3+int(r.LongestGap/(time.Second/30)), "current after the move (ticks behind)")
	t.Logf("client address %s → %s; worst probe lag after the move %d ticks", before, r.Server.Conn(id).RemoteAddr(), r.LagMax[i])
}
