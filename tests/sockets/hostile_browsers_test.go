package sockets_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/tests/internal/harness"
	"github.com/archenet/archenet/tests/internal/loopback"
	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/webtransport"
	"github.com/stretchr/testify/require"
)

// Hostile browser sessions (native Dial, as a page would, see also the Chromium test
// TestBrowserHostileSession) against a match of 200 moving, churning entities: one
// sends its Hello and then never reads its stream, one floods datagrams, one opens a
// second stream. The server keeps its rate (its ticks against its control's,
// loopback.Rig.RequireTicks), the two good players keep up, the non-reader is dropped for its backlog, the flooder with
// CodeFlood or, since its junk is not a client datagram, CodeProtocolError, and the
// stream opener with CodeProtocolError.
func TestWebTransportHostileBrowsers(t *testing.T) {
	// (The non-reader acks no snapshot: no JoinTimeout, so that its backlog drops it.)
	w := loopback.NewWebTransport(t, webtransport.Config{SendBacklogTimeout: 2 * time.Second, DatagramRateLimit: 500, DatagramBurst: 200},
		func(c *replication.ServerConfig) { c.Limits.JoinTimeout = -1 })
	ents := w.Movers(200, 5)
	for range 2 {
		w.Good = append(w.Good, w.Dial())
	}
	w.Until("clients ready", 10*time.Second, func() bool { return w.Clients[0].Client.Ready() && w.Clients[1].Client.Ready() })

	hello := transport.Hello{Version: replication.ProtocolVersion, ProtocolHash: w.Registry.Hash()}.Append(nil)
	// Reads nothing: its queue takes one message, then its stream stalls.
	mute := w.DialConn(webtransport.Config{MessageQueueLen: 1, MessageQueueBytes: 1})
	require.NoError(t, mute.SendMessage(hello))
	flood := w.DialConn(webtransport.Config{})
	require.NoError(t, flood.SendMessage(hello))
	streams := w.DialConn(webtransport.Config{})
	require.NoError(t, streams.SendMessage(hello))

	stopFlood := make(chan struct{})
	go func() {
		b := make([]byte, 1000)
		for {
			select {
			case <-stopFlood:
				return
			default:
			}
			if flood.SendDatagram(b) != nil {
				return
			}
			time.Sleep(200 * time.Microsecond)
		}
	}()
	defer close(stopFlood)
	st, err := streams.Session().OpenStream()
	require.NoError(t, err)
	_, err = st.Write([]byte{0}) // a stream is announced with its first byte
	require.NoError(t, err)

	rng := rand.New(rand.NewPCG(6, 6))
	w.Game = harness.SpawnChurn(w.Harness, ents, 20, rng)
	from := len(w.Ticks)
	w.RunFor(6*time.Second, nil)
	worst := w.RequireTicks(from, "three hostile browsers")
	t.Logf("figure: worst server tick %v with a non-reading, a flooding and a stream-opening browser; good clients' worst lag %d and %d ticks",
		worst.Round(10*time.Microsecond), w.LagMax[0], w.LagMax[1])
	w.RequireKeptUp()
	// The server ends the non-reader once its backlog is 2 s old, which
	// takes as much churn as fills its stream's window: on a busy machine
	// the 6 s above may run too few ticks for that, so the match goes on
	// until the hostile sessions have ended (or 30 s have passed).
	w.RunFor(30*time.Second, func() bool {
		for _, c := range []*webtransport.Conn{flood, streams, mute} {
			select {
			case <-c.Done():
			default:
				return false
			}
		}
		return true
	})
	code := func(c *webtransport.Conn) transport.CloseCode {
		select {
		case <-c.Done():
		case <-time.After(10 * time.Second):
			t.Fatalf("connection %v still open (flood %v, streams %v, mute %v; server events %v)", c.LocalAddr(), flood.Err(), streams.Err(), mute.Err(), w.Events())
		}
		var ce *transport.CloseError
		require.ErrorAs(t, c.Err(), &ce)
		return ce.Code
	}
	// Its junk datagrams fail replication's decoder before the flood limit trips
	// (TestBrowserFlood in transport/webtransport covers CodeFlood alone).
	fc := code(flood)
	require.True(t, fc == transport.CodeFlood || fc == transport.CodeProtocolError, "flooder: %v", flood.Err())
	require.Equal(t, transport.CodeProtocolError, code(streams), "stream opener: %v", streams.Err())
	require.Equal(t, transport.CodeSendBacklog, code(mute), "non-reader: %v", mute.Err())
	w.Game = nil
	w.Until("the non-reader counted as a backlog drop", 5*time.Second, func() bool { return w.Server.Stats.BacklogDrops == 1 })
	w.Until("convergence", 10*time.Second, func() bool { return w.Converged(0, nil) == nil && w.Converged(1, nil) == nil })
}
