package sockets_test

import (
	"context"
	"testing"
	"time"

	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/replication/host"
	"github.com/archenet/archenet/tests/internal/harness"
	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/quic"
	"github.com/archenet/archenet/transport/webtransport"
	"github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/require"
)

// TestHostQUICAndWebTransport: one host on a listener merged from QUIC and
// WebTransport admits both kinds of players, each to the match its Hello
// names.
func TestHostQUICAndWebTransport(t *testing.T) {
	t.Setenv("QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING", "true")
	cert, err := quic.GenerateDevCert(time.Hour)
	require.NoError(t, err)
	ql, err := quic.Listen("127.0.0.1:0", &quic.Config{TLS: cert.ServerTLS(), MaxPendingPerAddress: -1, Logger: harness.Quiet})
	require.NoError(t, err)
	certs, err := webtransport.NewSelfSigned(webtransport.SelfSignedConfig{})
	require.NoError(t, err)
	wl, err := webtransport.Listen("127.0.0.1:0", &webtransport.Config{TLS: certs.TLSConfig(), MaxPendingPerAddress: -1})
	require.NoError(t, err)
	h, err := host.New(transport.MergeListeners(ql, wl), host.Config{Logger: harness.Quiet})
	require.NoError(t, err)
	r := &hostRig{t: t, reg: harness.NewRegistry(), cert: cert, h: h, addr: ql.Addr().String(), games: map[string]*sceneGame{}, stop: make(chan struct{})}
	r.stepped.Add(1)
	go r.stepClients()
	defer func() {
		close(r.stop)
		r.stepped.Wait()
		_ = h.Close()
	}()
	r.open("native", 10, 1)
	r.open("browser", 20, 2)
	r.join("native", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := webtransport.Dial(ctx, wl.URL(""), &webtransport.Config{CertHashes: certs.Hashes()})
	require.NoError(t, err)
	defer conn.Close()
	w := ecs.NewWorld()
	c, err := replication.NewClient(&w, conn, replication.ClientConfig{Registry: r.reg, Match: "browser", Logger: harness.Quiet})
	require.NoError(t, err)
	r.mu.Lock()
	r.clients = append(r.clients, c)
	r.mu.Unlock()
	r.until("both players ready", 20*time.Second, func() bool { return r.ready.Load() == 2 })
	for name, want := range map[string]int{"native": 1, "browser": 1} {
		m, ok := h.Match(name)
		require.True(t, ok)
		require.Equal(t, want, m.Stats().Clients, name)
	}
	r.mu.Lock()
	require.Equal(t, 20, c.Mirrors(), "the WebTransport player mirrors the browser match's world")
	r.mu.Unlock()
}
