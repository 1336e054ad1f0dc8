package tests

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/mlange-42/arche/ecs"
	quicgo "github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	wt "github.com/quic-go/webtransport-go"
	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/netem"
	"github.com/archenet/archenet/transport/quic"
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
	return newMixedRig(t, lcfg, false, tweak)
}

// newMixedRig is newWTRig, with a QUIC listener beside the WebTransport one
// (transport.MergeListeners) if withQUIC: quicRig.dial then joins native players.
func newMixedRig(t *testing.T, lcfg webtransport.Config, withQUIC bool, tweak func(*replication.ServerConfig)) *wtRig {
	t.Setenv("QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING", "true")
	certs, err := webtransport.NewSelfSigned(webtransport.SelfSignedConfig{})
	require.NoError(t, err)
	lcfg.TLS = certs.TLSConfig()
	lcfg.Logger = quiet
	l, err := webtransport.Listen("127.0.0.1:0", &lcfg)
	require.NoError(t, err)
	r := &quicRig{harness: &harness{t: t, reg: newRegistry()}, lagMax: map[int]int{}, active: map[int]bool{}}
	var ln transport.Listener = l
	if withQUIC {
		r.cert, err = quic.GenerateDevCert(time.Hour)
		require.NoError(t, err)
		r.l, err = quic.Listen("127.0.0.1:0", &quic.Config{TLS: r.cert.ServerTLS(), Logger: quiet})
		require.NoError(t, err)
		ln = transport.MergeListeners(r.l, l)
	}
	sw := ecs.NewWorld()
	r.sw = &sw
	cfg := replication.ServerConfig{Registry: r.reg, NetRate: netRate, Logger: quiet, MaxClientsPerAddress: -1,
		OnDisconnect: func(_ replication.ClientID, err error) {
			r.mu.Lock()
			r.events = append(r.events, err)
			r.mu.Unlock()
		}}
	if tweak != nil {
		tweak(&cfg)
	}
	srv, err := replication.NewServer(r.sw, ln, cfg)
	require.NoError(t, err)
	r.srv = srv
	t.Cleanup(func() { srv.Close() })
	r.probe = r.spawn(0, components.Vec3{})
	(*components.Replicated)(r.sw.Get(r.probe, ecs.ComponentID[components.Replicated](r.sw))).Priority = 1e6
	return &wtRig{quicRig: r, l: l, certs: certs}
}

// requireKeptUp checks the good clients' worst probe lag against maxLag: a
// timing bound, so, as requireTicks does, it only reports under the race
// detector (.ci/run runs these tests without it too).
func (w *wtRig) requireKeptUp() {
	w.t.Helper()
	for _, i := range w.good {
		if raceEnabled {
			if w.lagMax[i] > maxLag {
				w.t.Logf("client %d fell %d ticks behind (bound %d, not enforced under the race detector)", i, w.lagMax[i], maxLag)
			}
			continue
		}
		require.LessOrEqual(w.t, w.lagMax[i], maxLag, "client %d fell behind", i)
	}
}

// dialConn opens a session with cfg (the hashes added).
func (w *wtRig) dialConn(cfg webtransport.Config) *webtransport.Conn {
	return w.dialConnVia(w.l.URL(""), cfg)
}

// dialConnVia opens a session to url (the listener's, or a proxy's).
func (w *wtRig) dialConnVia(url string, cfg webtransport.Config) *webtransport.Conn {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg.CertHashes = w.certs.Hashes()
	cfg.Logger = quiet
	c, err := webtransport.Dial(ctx, url, &cfg)
	require.NoError(w.t, err)
	w.t.Cleanup(func() { _ = c.Close() })
	return c
}

// rawSession opens a session with webtransport-go directly (qcfg its QUIC settings),
// bypassing Dial and Conn, so a test can misbehave: the message stream is open and
// its preamble written.
func (w *wtRig) rawSession(qcfg *quicgo.Config) (*wt.Session, *wt.Stream) {
	t := w.t
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	tr := &quicgo.Transport{Conn: udp}
	t.Cleanup(func() { tr.Close(); udp.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	qcfg.EnableDatagrams, qcfg.EnableStreamResetPartialDelivery = true, true
	tlsConf := &tls.Config{InsecureSkipVerify: true, NextProtos: []string{http3.NextProtoH3}} // (a misbehaving peer)
	qc, err := tr.Dial(ctx, w.l.Addr(), tlsConf, qcfg)
	require.NoError(t, err)
	t.Cleanup(func() { qc.CloseWithError(0, "") })
	cc, err := (&wt.Transport{}).NewClientConn(qc)
	require.NoError(t, err)
	_, sess, err := cc.Dial(ctx, w.l.URL(""), nil)
	require.NoError(t, err)
	st, err := sess.OpenStreamSync(ctx)
	require.NoError(t, err)
	_, err = st.Write([]byte{0xA1})
	require.NoError(t, err)
	return sess, st
}

// dial connects a well-behaved replication client.
func (w *wtRig) dial() int { return w.dialVia(w.l.URL("")) }

// dialVia connects a well-behaved replication client to url.
func (w *wtRig) dialVia(url string) int {
	conn := w.dialConnVia(url, webtransport.Config{})
	wd := ecs.NewWorld()
	c, err := replication.NewClient(&wd, conn, replication.ClientConfig{Registry: w.reg, Logger: quiet, Timeout: w.clientTimeout})
	require.NoError(w.t, err)
	w.clients = append(w.clients, &clientSide{w: &wd, c: c})
	i := len(w.clients) - 1
	w.active[i] = true
	return i
}

// A browser session that never reads its stream (its Conn takes one message and
// then stalls the stream) while the server spawns and despawns 20 entities a tick:
// the server keeps its rate, the other players keep up, and the reader-less session
// is dropped within a bounded time for its backlog (ServerStats.BacklogDrops), with
// a reason the peer receives. TestQUICNonReadingClient's counterpart.
func TestWebTransportNonReadingClient(t *testing.T) {
	// (The non-reader sends no datagram either: the JoinTimeout would drop it
	// for that first.)
	w := newWTRig(t, webtransport.Config{SendBacklogTimeout: 2 * time.Second}, func(c *replication.ServerConfig) { c.JoinTimeout = -1 })
	ents := w.movers(200, 1)
	for range 2 {
		w.good = append(w.good, w.dial())
	}
	w.until("clients ready", 10*time.Second, func() bool { return w.clients[0].c.Ready() && w.clients[1].c.Ready() })
	// A 1 KiB receive window on its stream, as a page that stopped reading fills.
	sess, st := w.rawSession(&quicgo.Config{InitialStreamReceiveWindow: 1024, MaxStreamReceiveWindow: 1024})
	hello := transport.Hello{Version: replication.ProtocolVersion, ProtocolHash: w.reg.Hash()}.Append(nil)
	_, err := st.Write(append(binary.AppendUvarint(nil, uint64(len(hello))), hello...))
	require.NoError(t, err)

	rng := rand.New(rand.NewPCG(2, 2))
	w.game = spawnChurn(w.harness, ents, 20, rng)
	from := len(w.ticks)
	start := time.Now()
	var dropped time.Duration
	w.runFor(6*time.Second, func() bool {
		if dropped == 0 && w.srv.Stats.BacklogDrops == 1 {
			dropped = time.Since(start)
		}
		return false
	})
	w.requireTicks(from, "non-reading browser session")
	t.Logf("non-reading session dropped %v after its Hello; good clients' worst probe lag %d and %d ticks",
		dropped.Round(time.Millisecond), w.lagMax[0], w.lagMax[1])
	require.NotZero(t, dropped, "the non-reading session was not dropped for its backlog; disconnects: %v", w.events)
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
	w.requireKeptUp()
	w.game = nil
	w.until("convergence", 10*time.Second, func() bool { return w.converged(0, nil) == nil && w.converged(1, nil) == nil })
}

// Ten browser sessions whose path goes dead without a close (a tab killed, a
// laptop lid shut) while two others play: the server keeps its rate, the players
// see no extra lag, and the dead sessions are dropped by ClientTimeout (3 s), each
// with CodeTimeout. TestQUICDeadAndSilentPeers' counterpart.
func TestWebTransportDeadPeers(t *testing.T) {
	const timeout = 3 * time.Second
	w := newWTRig(t, webtransport.Config{}, func(c *replication.ServerConfig) { c.ClientTimeout = timeout })
	ents := w.movers(200, 3)
	for range 2 {
		w.good = append(w.good, w.dial())
	}
	path, err := netem.Listen(w.l.Addr().String(), 1)
	require.NoError(t, err)
	defer path.Close()
	impaired := netem.Conditions{Latency: 25 * time.Millisecond, Loss: 0.02}
	path.SetConditions(impaired, impaired)
	url := "https://" + path.Addr().String() + webtransport.DefaultPath
	var dead []int
	for range 10 {
		dead = append(dead, w.dialVia(url))
	}
	w.until("clients ready", 20*time.Second, func() bool {
		for _, c := range w.clients {
			if !c.c.Ready() {
				return false
			}
		}
		return true
	})
	w.game = func(int) {
		for _, e := range ents {
			w.pos(e).X += 0.1
		}
	}
	w.runFor(time.Second, nil)

	from := len(w.ticks)
	path.SetDown(true) // for good: no close will ever arrive
	for _, i := range dead {
		w.active[i] = false
	}
	cut := time.Now()
	var gone time.Duration
	timeouts := func() int {
		w.mu.Lock()
		defer w.mu.Unlock()
		n := 0
		for _, err := range w.events {
			var ce *transport.CloseError
			if errors.As(err, &ce) && ce.Code == transport.CodeTimeout {
				n++
			}
		}
		return n
	}
	w.until("the dead sessions dropped", timeout+5*time.Second, func() bool {
		if timeouts() == len(dead) {
			gone = time.Since(cut)
			return true
		}
		return false
	})
	w.runFor(time.Second, nil)
	w.requireTicks(from, "10 dead browser sessions")
	t.Logf("10 dead sessions dropped %v after their path went silent (ClientTimeout %v); disconnects %v; good clients' worst probe lag %d and %d ticks",
		gone.Round(time.Millisecond), timeout, len(w.events), w.lagMax[0], w.lagMax[1])
	require.Greater(t, gone, timeout-tickDt, "not before ClientTimeout")
	require.Len(t, w.srv.Clients(), 2)
	w.requireKeptUp()
	w.game = nil
	w.until("convergence", 10*time.Second, func() bool { return w.converged(0, nil) == nil && w.converged(1, nil) == nil })
}

// Hostile browser sessions (native Dial, as a page would, see also the Chromium test
// TestBrowserHostileSession) against a match of 200 moving, churning entities: one
// sends its Hello and then never reads its stream, one floods datagrams, one opens a
// second stream. The server keeps its rate (every tick under 2× the interval), the two
// good players keep up, the non-reader is dropped for its backlog, the flooder with
// CodeFlood or, since its junk is not a client datagram, CodeProtocolError, and the
// stream opener with CodeProtocolError.
func TestWebTransportHostileBrowsers(t *testing.T) {
	// (The non-reader acks no snapshot: no JoinTimeout, so that its backlog drops it.)
	w := newWTRig(t, webtransport.Config{SendBacklogTimeout: 2 * time.Second, DatagramRateLimit: 500, DatagramBurst: 200},
		func(c *replication.ServerConfig) { c.JoinTimeout = -1 })
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
	w.requireKeptUp()
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
	w.until("the non-reader counted as a backlog drop", 5*time.Second, func() bool { return w.srv.Stats.BacklogDrops == 1 })
	w.until("convergence", 10*time.Second, func() bool { return w.converged(0, nil) == nil && w.converged(1, nil) == nil })
}
