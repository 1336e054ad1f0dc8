package sockets_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/tests/internal/loopback"
	"github.com/archenet/archenet/transport/quic"
	"github.com/stretchr/testify/require"
)

// A 200 ms Authenticator and ten joins in flight: the server keeps its rate.
func TestQUICSlowAuthenticator(t *testing.T) {
	r := loopback.NewQUIC(t, quic.Config{}, func(cfg *replication.ServerConfig) {
		cfg.Authenticator = func(ctx context.Context, _ net.Addr, token []byte) error {
			select {
			case <-time.After(200 * time.Millisecond):
			case <-ctx.Done():
				return ctx.Err()
			}
			if string(token) != "ok" {
				return fmt.Errorf("unknown token %q", token)
			}
			return nil
		}
	})
	r.Movers(200, 4)
	r.Good = append(r.Good, r.Dial(r.QUIC.Addr().String(), "ok"))
	r.Until("first client", 10*time.Second, func() bool { return r.Clients[0].Client.Ready() })
	from := len(r.Ticks)
	for range 10 {
		r.Dial(r.QUIC.Addr().String(), "ok")
		r.Step()
	}
	bad := r.Dial(r.QUIC.Addr().String(), "nope")
	r.Until("all joined", 10*time.Second, func() bool {
		for i, c := range r.Clients {
			if i != bad && !c.Client.Ready() {
				return false
			}
		}
		return r.Clients[bad].Client.State() == replication.StateClosed
	})
	r.RequireTicks(from, "ten joins through a 200 ms Authenticator")
	require.EqualError(t, r.Clients[bad].Client.Err(), `rejected by server: unknown token "nope"`)
	r.RequireKeptUp()
}
