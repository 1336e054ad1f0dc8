package sockets_test

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/tests/internal/harness"
	"github.com/archenet/archenet/tests/internal/loopback"
	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/quic"
	"github.com/archenet/archenet/transport/webtransport"
	quicgo "github.com/quic-go/quic-go"
	wt "github.com/quic-go/webtransport-go"
	"github.com/stretchr/testify/require"
)

// A client that never reads its stream (a 1 KiB receive window) while the
// server spawns and despawns 20 entities a tick: the server keeps its rate,
// the other clients keep up, and the reader-less client is dropped within a
// bounded time with a reason that names the backlog.
func TestQUICNonReadingClient(t *testing.T) {
	// (The non-reader sends no datagram either: the JoinTimeout would drop
	// it first.)
	r := loopback.NewQUIC(t, quic.Config{SendBacklogTimeout: 2 * time.Second}, func(c *replication.ServerConfig) { c.Limits.JoinTimeout = -1 })
	ents := r.Movers(200, 1)
	for range 2 {
		r.Good = append(r.Good, r.Dial(r.QUIC.Addr().String(), ""))
	}
	r.Until("clients ready", 10*time.Second, func() bool { return r.Clients[0].Client.Ready() && r.Clients[1].Client.Ready() })

	tr := newRawTransport(t)
	qc, st := rawQUIC(t, tr, r.QUIC.Addr(), r.Cert, &quicgo.Config{InitialStreamReceiveWindow: 1024, MaxStreamReceiveWindow: 1024})
	hello := transport.Hello{Version: replication.ProtocolVersion, ProtocolHash: r.Registry.Hash()}.Append(nil)
	_, err := st.Write(append(binary.AppendUvarint(nil, uint64(len(hello))), hello...))
	require.NoError(t, err)

	rng := rand.New(rand.NewPCG(2, 2))
	r.Game = harness.SpawnChurn(r.Harness, ents, 20, rng)
	from := len(r.Ticks)
	start := time.Now()
	var dropped time.Duration
	r.RunFor(6*time.Second, func() bool {
		if dropped == 0 && r.Server.Stats.BacklogDrops == 1 {
			dropped = time.Since(start)
		}
		return false
	})
	r.RequireTicks(from, "non-reading client")
	t.Logf("non-reading client dropped %v after its Hello; good clients' worst probe lag %d and %d ticks",
		dropped.Round(time.Millisecond), r.LagMax[0], r.LagMax[1])
	require.NotZero(t, dropped, "the non-reading client was not dropped; disconnects: %v", r.Events())
	require.Less(t, dropped, 5*time.Second)
	select {
	case <-qc.Context().Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the non-reading client's connection is still open")
	}
	var app *quicgo.ApplicationError
	require.ErrorAs(t, context.Cause(qc.Context()), &app)
	require.Equal(t, quicgo.ApplicationErrorCode(transport.CodeSendBacklog), app.ErrorCode)
	require.Contains(t, app.ErrorMessage, "peer not reading")
	r.RequireKeptUp()
	// The churn stops; the good clients converge.
	r.Game = nil
	r.Until("convergence", 10*time.Second, func() bool { return r.Converged(0, nil) == nil && r.Converged(1, nil) == nil })
}

// A browser session that never reads its stream (its Conn takes one message and
// then stalls the stream) while the server spawns and despawns 20 entities a tick:
// the server keeps its rate, the other players keep up, and the reader-less session
// is dropped within a bounded time for its backlog (ServerStats.BacklogDrops), with
// a reason the peer receives. TestQUICNonReadingClient's counterpart.
func TestWebTransportNonReadingClient(t *testing.T) {
	// (The non-reader sends no datagram either: the JoinTimeout would drop it
	// for that first.)
	w := loopback.NewWebTransport(t, webtransport.Config{SendBacklogTimeout: 2 * time.Second}, func(c *replication.ServerConfig) { c.Limits.JoinTimeout = -1 })
	ents := w.Movers(200, 1)
	for range 2 {
		w.Good = append(w.Good, w.Dial())
	}
	w.Until("clients ready", 10*time.Second, func() bool { return w.Clients[0].Client.Ready() && w.Clients[1].Client.Ready() })
	// A 1 KiB receive window on its stream, as a page that stopped reading fills.
	sess, st := w.RawSession(&quicgo.Config{InitialStreamReceiveWindow: 1024, MaxStreamReceiveWindow: 1024})
	hello := transport.Hello{Version: replication.ProtocolVersion, ProtocolHash: w.Registry.Hash()}.Append(nil)
	_, err := st.Write(append(binary.AppendUvarint(nil, uint64(len(hello))), hello...))
	require.NoError(t, err)

	rng := rand.New(rand.NewPCG(2, 2))
	w.Game = harness.SpawnChurn(w.Harness, ents, 20, rng)
	from := len(w.Ticks)
	start := time.Now()
	var dropped time.Duration
	w.RunFor(6*time.Second, func() bool {
		if dropped == 0 && w.Server.Stats.BacklogDrops == 1 {
			dropped = time.Since(start)
		}
		return false
	})
	w.RequireTicks(from, "non-reading browser session")
	t.Logf("non-reading session dropped %v after its Hello; good clients' worst probe lag %d and %d ticks",
		dropped.Round(time.Millisecond), w.LagMax[0], w.LagMax[1])
	require.NotZero(t, dropped, "the non-reading session was not dropped for its backlog; disconnects: %v", w.Events())
	require.Less(t, dropped, 5*time.Second)
	select {
	case <-sess.Context().Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the non-reading session is still open")
	}
	_, err = sess.AcceptStream(context.Background())
	var se *wt.SessionError
	require.ErrorAs(t, err, &se)
	require.Equal(t, wt.SessionErrorCode(transport.CodeSendBacklog), se.ErrorCode)
	require.True(t, se.Remote)
	require.Contains(t, se.Message, "peer not reading")
	w.RequireKeptUp()
	w.Game = nil
	w.Until("convergence", 10*time.Second, func() bool { return w.Converged(0, nil) == nil && w.Converged(1, nil) == nil })
}
