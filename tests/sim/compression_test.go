package sim_test

import (
	"testing"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/tests/internal/harness"
	"github.com/archenet/archenet/transport/sim"
	"github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/require"
)

// compressionScene spawns 200 entities in rows (similar full records, which
// zstd shrinks) and moves some.
func compressionScene(h *harness.Harness) {
	var ents []ecs.Entity
	for i := range 200 {
		ents = append(ents, h.Spawn(0, components.Vec3{X: float64(i % 20), Z: float64(i / 20)}))
	}
	h.Game = func(tick int) {
		for i, e := range ents {
			if (i+tick)%4 == 0 {
				h.Pos(e).Y += 0.1
			}
		}
	}
}

// TestCompressionNegotiated: a server with Compression tells its clients in
// the Welcome; they decode its compressed datagrams and converge. With a
// dictionary, a client given the same one converges and a client with none
// is refused with ErrDictionary.
func TestCompressionNegotiated(t *testing.T) {
	// Sample datagrams for a dictionary, from an uncompressed server.
	var samples [][]byte
	h := harness.New(t, 1, sim.Link{}, nil)
	h.Net.SetTrace(func(ev sim.TraceEvent) {
		if ev.From == "server" && !ev.Reliable && ev.Kind == sim.TraceDeliver {
			samples = append(samples, append([]byte(nil), ev.Data...))
		}
	})
	compressionScene(h)
	h.Run(60)
	dict, err := replication.TrainDictionary(samples)
	require.NoError(t, err)

	for _, tc := range []struct {
		name                   string
		serverDict, clientDict []byte
	}{
		{"no dictionary", nil, nil},
		{"dictionary", dict, dict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := harness.New(t, 0, sim.Link{}, func(c *replication.ServerConfig) {
				c.Compression, c.CompressionDictionary = true, tc.serverDict
			})
			h.ClientConfig = func(c *replication.ClientConfig) { c.CompressionDictionary = tc.clientDict }
			h.AddClient()
			h.AddClient()
			compressionScene(h)
			h.Run(10)
			require.NotZero(t, h.Server.Stats.Compressed, "the initial full records shrink")
			h.RequireConverged(nil)
			t.Logf("%d of %d datagrams compressed, %d bytes", h.Server.Stats.Compressed, h.Server.Stats.SnapshotDatagrams, h.Server.Stats.SnapshotBytes)
		})
	}
	t.Run("other dictionary", func(t *testing.T) {
		h := harness.New(t, 0, sim.Link{}, func(c *replication.ServerConfig) {
			c.Compression, c.CompressionDictionary = true, dict
		})
		cs := h.AddClient()
		h.Run(3)
		require.ErrorIs(t, cs.Client.Err(), replication.ErrDictionary)
	})
}
