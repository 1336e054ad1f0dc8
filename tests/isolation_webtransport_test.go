package tests

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/webtransport"
)

// wtRig is quicRig's real-time server loop with browser sessions: a replication
// server over a webtransport Listener, clients dialled natively with the pinned
// certificate hashes, as pages are.
type wtRig struct {
	*quicRig
	l     *webtransport.Listener
	certs *webtransport.SelfSigned
}

func newWTRig(t *testing.T, lcfg webtransport.Config, tweak func(*replication.ServerConfig)) *wtRig {
	t.Setenv("QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING", "true")
	certs, err := webtransport.NewSelfSigned(webtransport.SelfSignedConfig{})
	require.NoError(t, err)
	lcfg.TLS = certs.TLSConfig()
	lcfg.Logger = quiet
	l, err := webtransport.Listen("127.0.0.1:0", &lcfg)
	require.NoError(t, err)
	r := &quicRig{harness: &harness{t: t, reg: newRegistry()}, lagMax: map[int]int{}, active: map[int]bool{}}
	sw := ecs.NewWorld()
	r.sw = &sw
	cfg := replication.ServerConfig{Registry: r.reg, NetRate: netRate, Logger: quiet,
		OnDisconnect: func(_ replication.ClientID, err error) {
			r.mu.Lock()
			r.events = append(r.events, err)
			r.mu.Unlock()
		}}
	if tweak != nil {
		tweak(&cfg)
	}
	srv, err := replication.NewServer(r.sw, l, cfg)
	require.NoError(t, err)
	r.srv = srv
	t.Cleanup(func() { srv.Close() })
	r.probe = r.spawn(0, components.Vec3{})
	(*components.Replicated)(r.sw.Get(r.probe, ecs.ComponentID[components.Replicated](r.sw))).Priority = 1e6
	return &wtRig{quicRig: r, l: l, certs: certs}
}

// dialConn opens a session with cfg (the hashes added).
func (w *wtRig) dialConn(cfg webtransport.Config) *webtransport.Conn {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg.CertHashes = w.certs.Hashes()
	cfg.Logger = quiet
	c, err := webtransport.Dial(ctx, w.l.URL(""), &cfg)
	require.NoError(w.t, err)
	w.t.Cleanup(func() { _ = c.Close() })
	return c
}

// dial connects a well-behaved replication client.
func (w *wtRig) dial() int {
	conn := w.dialConn(webtransport.Config{})
	wd := ecs.NewWorld()
	c, err := replication.NewClient(&wd, conn, replication.ClientConfig{Registry: w.reg, Logger: quiet})
	require.NoError(w.t, err)
	w.clients = append(w.clients, &clientSide{w: &wd, c: c})
	i := len(w.clients) - 1
	w.active[i] = true
	return i
}

// Hostile browsers against a match of 200 moving, churning entities: one sends its
// Hello and then never reads its stream, one floods datagrams, one opens a second
// stream. The server keeps its rate (every tick under 2× the interval), the two good
// players keep up, the non-reader is dropped for its backlog, the flooder with
// CodeFlood or, for junk, CodeProtocolError, and the stream opener with CodeProtocolError.
func TestWebTransportHostileBrowsers(t *testing.T) {
	w := newWTRig(t, webtransport.Config{SendBacklogTimeout: 2 * time.Second, DatagramRateLimit: 500, DatagramBurst: 200}, nil)
	ents := w.movers(200, 5)
	for range 2 {
		w.good = append(w.good, w.dial())
	}
	w.until("clients ready", 10*time.Second, func() bool { return w.clients[0].c.Ready() && w.clients[1].c.Ready() })

	hello := transport.Hello{Version: replication.ProtocolVersion, ProtocolHash: w.reg.Hash()}.Append(nil)
	// Reads nothing: its queue takes one message, then its stream stalls.
	mute := w.dialConn(webtransport.Config{MessageQueueLen: 1, MessageQueueBytes: 1})
	require.NoError(t, mute.SendMessage(hello))
	flood := w.dialConn(webtransport.Config{})
	require.NoError(t, flood.SendMessage(hello))
	streams := w.dialConn(webtransport.Config{})
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
	w.game = spawnChurn(w.harness, ents, 20, rng)
	from := len(w.ticks)
	w.runFor(6*time.Second, nil)
	worst := w.requireTicks(from, "three hostile browsers")
	t.Logf("figure: worst server tick %v with a non-reading, a flooding and a stream-opening browser; good clients' worst lag %d and %d ticks",
		worst.Round(10*time.Microsecond), w.lagMax[0], w.lagMax[1])
	for _, i := range w.good {
		require.LessOrEqual(t, w.lagMax[i], maxLag, "client %d fell behind", i)
	}
	code := func(c *webtransport.Conn) transport.CloseCode {
		select {
		case <-c.Done():
		case <-time.After(10 * time.Second):
			t.Fatalf("connection %v still open (flood %v, streams %v, mute %v; server events %v)", c.LocalAddr(), flood.Err(), streams.Err(), mute.Err(), w.events)
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
	w.game = nil
	w.until("convergence", 10*time.Second, func() bool { return w.converged(0, nil) == nil && w.converged(1, nil) == nil })
}
