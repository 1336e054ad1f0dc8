package sim_test

import (
	"testing"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/tests/internal/harness"
	"github.com/archenet/archenet/transport/sim"
	"github.com/stretchr/testify/require"
)

// A server of one match refuses a client that names another match, and the
// client's error says which it named and which the server hosts; a client
// that names the server's match, or none, joins. A server whose match has
// no name refuses every client that names one.
func TestHelloNamingAnotherMatchRefused(t *testing.T) {
	for _, tc := range []struct {
		server, client string
		refusal        string // "": joins
	}{
		{"arena", "arena", ""},
		{"arena", "", ""},
		{"arena", "duel", `rejected by server: no such match here: the Hello names match "duel", and this server hosts "arena" (ServerConfig.Match)`},
		{"", "", ""},
		{"", "arena", `rejected by server: no such match here: the Hello names match "arena", and this server hosts one unnamed match`},
	} {
		t.Run(tc.server+"/"+tc.client, func(t *testing.T) {
			h := harness.New(t, 0, sim.Link{}, func(cfg *replication.ServerConfig) { cfg.Match = tc.server })
			h.Spawn(0, components.Vec3{})
			h.ClientConfig = func(cfg *replication.ClientConfig) { cfg.Match = tc.client }
			c := h.AddClient()
			h.Run(10)
			if tc.refusal == "" {
				require.True(t, c.Client.Ready(), "%v", c.Client.Err())
				return
			}
			require.Equal(t, replication.StateClosed, c.Client.State())
			require.ErrorContains(t, c.Client.Err(), tc.refusal)
			require.Empty(t, h.Server.Clients())
			require.Equal(t, 1, h.Server.Stats.Rejected)
		})
	}
}
