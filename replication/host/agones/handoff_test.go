package agones_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/replication/host"
	"github.com/archenet/archenet/replication/host/agones"
	"github.com/archenet/archenet/replication/host/agones/agonestest"
	"github.com/archenet/archenet/replication/schema"
	"github.com/archenet/archenet/transport/quic"
)

// TestAgonesHandoff, against the real sidecar: when the host drains (the
// pod is being replaced), the driver hands its match to another server
// (Config.Handoff: here a second host, which opens it from the checkpoint)
// instead of ending it; its players follow the drain notice and resume
// their seats there; the match here ends once they have gone, and the
// GameServer shuts down.
func TestAgonesHandoff(t *testing.T) {
	sc := agonestest.Start(t, scheduled)
	obs := observe(t, sc.URL)
	reg := registry()
	var hb *host.Host
	var cert *quic.DevCert
	d, err := agones.New(agones.Config{URL: sc.URL, HealthPeriod: 100 * time.Millisecond, MinBackoff: 20 * time.Millisecond, Logger: quiet,
		OpenMatch: func(h *host.Host, name string) error { return openGame(h, reg, name, nil) },
		Handoff: func(_ context.Context, name string, cp []byte) (string, error) {
			// (The game's backend: it would allocate another GameServer.)
			if _, err := hb.Open(name, host.MatchConfig{FrameRate: 30, Checkpoint: cp, Start: restoredGame(reg)}); err != nil {
				return "", err
			}
			return hb.Matches()[0].Listener().Addr().String(), nil
		}})
	require.NoError(t, err)
	var hc host.Config
	d.Configure(&hc)
	h, certA := quicHost(t, hc)
	cert = certA
	hb = quicHostWithCert(t, host.Config{}, cert)
	ran := make(chan error, 1)
	go func() { ran <- d.Run(context.Background(), h) }()
	until(t, "Ready", func() bool { return obs.last() == "Ready" })
	call(t, http.MethodPut, sc.URL+"/metadata/label", `{"key":"match","value":"duel"}`)
	call(t, http.MethodPost, sc.URL+"/allocate", `{}`)
	until(t, "Allocated and the match open", func() bool { _, ok := h.Match("duel"); return ok && obs.last() == "Allocated" })
	p1, p2 := dial(t, h, cert, reg, "duel"), dial(t, h, cert, reg, "duel")
	until(t, "two players", func() bool { return p1.c.Ready() && p2.c.Ready() }, p1, p2)
	ids := []replication.ClientID{p1.c.ID(), p2.c.ID()}

	h.Drain("the pod is replaced", time.Now().Add(time.Minute))
	follow := func(p *player) {
		if n, ok := p.c.Draining(); ok && n.Address != "" && p.c.Stats.Resumes == 0 {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			conn, err := quic.Dial(ctx, n.Address, &quic.Config{TLS: cert.ClientTLS(), Logger: quiet})
			require.NoError(t, err)
			t.Cleanup(func() { _ = conn.Close() })
			require.NoError(t, p.c.Resume(conn))
		}
	}
	until(t, "both players resumed on the other server", func() bool {
		follow(p1)
		follow(p2)
		return p1.c.Stats.Resumes == 1 && p2.c.Stats.Resumes == 1 && p1.c.Ready() && p2.c.Ready()
	}, p1, p2)
	until(t, "Shutdown", func() bool { return obs.last() == "Shutdown" }, p1, p2)
	require.NoError(t, <-ran)
	require.Equal(t, ids, []replication.ClientID{p1.c.ID(), p2.c.ID()}, "the same seats")
	st := d.Stats()
	require.Equal(t, uint64(1), st.Handoffs)
	require.Zero(t, st.HandoffsFailed)
	mb, ok := hb.Match("duel")
	require.True(t, ok, "the match goes on on the other server")
	require.Equal(t, 2, mb.Stats().Clients+mb.Stats().Suspended)
}

// restoredGame starts a match from its checkpoint (host.Match.NewServer).
func restoredGame(reg *schema.Registry) func(m *host.Match) (host.Game, error) {
	return func(m *host.Match) (host.Game, error) {
		w := ecs.NewWorld()
		srv, _, err := m.NewServer(&w, replication.ServerConfig{Registry: reg, Limits: replication.ServerLimits{MaxClientsPerAddress: -1}, Logger: quiet})
		if err != nil {
			return nil, err
		}
		q := w.Query(ecs.All(ecs.ComponentID[components.Transform](&w)))
		n := q.Count()
		q.Close()
		if n != 1 {
			return nil, fmt.Errorf("restored %d entities, want 1", n)
		}
		return &game{srv: srv}, nil
	}
}

// quicHostWithCert is quicHost with a given certificate.
func quicHostWithCert(t *testing.T, cfg host.Config, cert *quic.DevCert) *host.Host {
	l, err := quic.Listen("127.0.0.1:0", &quic.Config{TLS: cert.ServerTLS(), MaxPendingPerAddress: -1, Logger: quiet})
	require.NoError(t, err)
	cfg.Logger = quiet
	h, err := host.New(l, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	return h
}
