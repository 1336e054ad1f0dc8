package tests

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	quicgo "github.com/quic-go/quic-go"
	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/netem"
	"github.com/archenet/archenet/transport/quic"
	"github.com/mlange-42/arche/ecs"
)

// quicRig runs a replication server over real QUIC on 127.0.0.1 at the net
// rate in real time, with clients stepped in the same loop, and records how
// long each server tick (Receive, game, Send) took: the figure the isolation
// tests bound. While a game runs, a probe entity (top priority) moves by
// 1 m every tick, so how far a client's mirror of it lags tells in ticks how
// current that client is.
type quicRig struct {
	*harness
	cert  *quic.DevCert
	l     *quic.Listener
	ticks []time.Duration
	probe ecs.Entity
	// clientTimeout is ClientConfig.Timeout of dialled clients (0: default).
	clientTimeout time.Duration
	worst         time.Duration
	lagMax        map[int]int // client index → worst probe lag seen, in ticks
	good          []int       // clients whose lag is tracked
	active        map[int]bool
	mu            sync.Mutex
	events        []error // OnDisconnect reasons
}

func newQUICRig(t *testing.T, lcfg quic.Config, tweak func(*replication.ServerConfig)) *quicRig {
	t.Setenv("QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING", "true")
	cert, err := quic.GenerateDevCert(time.Hour)
	require.NoError(t, err)
	lcfg.TLS = cert.ServerTLS()
	lcfg.Logger = quiet
	l, err := quic.Listen("127.0.0.1:0", &lcfg)
	require.NoError(t, err)
	r := &quicRig{harness: &harness{t: t, reg: newRegistry()}, cert: cert, l: l, lagMax: map[int]int{}, active: map[int]bool{}}
	sw := ecs.NewWorld()
	r.sw = &sw
	// (Every client of these tests connects from 127.0.0.1.)
	cfg := replication.ServerConfig{Registry: r.reg, NetRate: netRate, Logger: quiet, MaxClientsPerAddress: -1,
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
	// The probe goes first whenever a budget cannot carry every change, so
	// its lag measures delivery, not the choice of what to send.
	(*components.Replicated)(r.sw.Get(r.probe, ecs.ComponentID[components.Replicated](r.sw))).Priority = 1e6
	return r
}

// dial connects a replication client to addr (the server's, or a proxy's).
func (r *quicRig) dial(addr string, token string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := quic.Dial(ctx, addr, &quic.Config{TLS: r.cert.ClientTLS(), Logger: quiet})
	require.NoError(r.t, err)
	w := ecs.NewWorld()
	c, err := replication.NewClient(&w, conn, replication.ClientConfig{Registry: r.reg, Logger: quiet, Token: []byte(token), Timeout: r.clientTimeout})
	require.NoError(r.t, err)
	r.clients = append(r.clients, &clientSide{w: &w, c: c})
	i := len(r.clients) - 1
	r.active[i] = true
	r.t.Cleanup(func() { _ = conn.Close() })
	return i
}

// step runs one net tick: the timed server tick, then every active client.
func (r *quicRig) step() {
	r.tick++
	start := time.Now()
	r.srv.Receive()
	if r.game != nil {
		r.pos(r.probe).X = float64(r.tick)
		r.game(r.tick)
	}
	r.srv.Send()
	d := time.Since(start)
	r.ticks = append(r.ticks, d)
	r.worst = max(r.worst, d)
	for i, c := range r.clients {
		if r.active[i] {
			c.c.Receive()
			c.c.Send()
		}
	}
	for _, i := range r.good {
		if lag, ok := r.probeLag(i); ok {
			r.lagMax[i] = max(r.lagMax[i], lag)
		}
	}
}

// probeLag is how many ticks client i's mirror of the probe is behind.
func (r *quicRig) probeLag(i int) (int, bool) {
	id, ok := r.srv.NetID(r.probe)
	if !ok {
		return 0, false
	}
	cs := r.clients[i]
	e, ok := cs.c.Entity(id)
	if !ok {
		return 0, false
	}
	x := (*components.Transform)(cs.w.Get(e, ecs.ComponentID[components.Transform](cs.w))).Pos.X
	sx := r.pos(r.probe).X
	return int(sx - x + 0.5), true
}

// runFor steps at the net rate, in real time, for d (or until stop holds).
func (r *quicRig) runFor(d time.Duration, stop func() bool) {
	tk := time.NewTicker(tickDt)
	defer tk.Stop()
	for end := time.Now().Add(d); time.Now().Before(end); {
		<-tk.C
		r.step()
		if stop != nil && stop() {
			return
		}
	}
}

// until steps until cond holds, failing after limit.
func (r *quicRig) until(what string, limit time.Duration, cond func() bool) {
	r.t.Helper()
	r.runFor(limit, cond)
	require.True(r.t, cond(), "%s: not within %v", what, limit)
}

// worstTick reports and returns the worst server tick since from.
func (r *quicRig) worstTick(from int, label string) time.Duration {
	var worst time.Duration
	for _, d := range r.ticks[from:] {
		worst = max(worst, d)
	}
	r.t.Helper()
	r.t.Logf("%s: worst server tick %v over %d ticks (interval %v)", label, worst.Round(10*time.Microsecond), len(r.ticks)-from, tickDt)
	return worst
}

// requireTicks checks every server tick since from took at most twice the
// tick interval, and reports the worst. Under the race detector it reports
// the ticks over the bound without failing (instrumented quic-go on a loaded
// 2-core machine stalls a tick past 100 ms now and then, on main's code as
// on this); .ci/run runs the isolation tests without it too, where the
// bound holds.
func (r *quicRig) requireTicks(from int, label string) time.Duration {
	r.t.Helper()
	var worst time.Duration
	over := 0
	for _, d := range r.ticks[from:] {
		worst = max(worst, d)
		if d > 2*tickDt {
			over++
		}
	}
	r.t.Logf("%s: worst server tick %v over %d ticks (interval %v), %d over 2× the interval", label, worst.Round(10*time.Microsecond), len(r.ticks)-from, tickDt, over)
	if !raceEnabled {
		require.Zero(r.t, over, "%s: %d ticks over 2× the tick interval (worst %v)", label, over, worst)
	}
	return worst
}

// movers spawns n entities that move every tick.
func (r *quicRig) movers(n int, seed uint64) []ecs.Entity {
	rng := rand.New(rand.NewPCG(seed, seed))
	ents := make([]ecs.Entity, n)
	for i := range ents {
		ents[i] = r.spawn(0, components.Vec3{X: rng.Float64() * 100, Z: rng.Float64() * 100})
	}
	return ents
}

// maxLag bounds how many ticks a well-behaved client on loopback may lag
// (0.5 s): generous for a loaded machine, far below the seconds-long stalls
// the tests guard against.
const maxLag = 15

// rawQUIC opens a quic-go connection to addr that speaks archenet's stream
// preamble and nothing else unless told: a peer the test makes misbehave.
func rawQUIC(t *testing.T, tr *quicgo.Transport, addr net.Addr, cert *quic.DevCert, qcfg *quicgo.Config) (*quicgo.Conn, *quicgo.Stream) {
	t.Helper()
	tlsConf := cert.ClientTLS()
	tlsConf.NextProtos = []string{quic.ALPN}
	tlsConf.ServerName = "127.0.0.1"
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	qcfg.EnableDatagrams = true
	qc, err := tr.Dial(ctx, addr, tlsConf, qcfg)
	require.NoError(t, err)
	st, err := qc.OpenStreamSync(ctx)
	require.NoError(t, err)
	_, err = st.Write([]byte{0xA1})
	require.NoError(t, err)
	return qc, st
}

func newRawTransport(t *testing.T) *quicgo.Transport {
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	tr := &quicgo.Transport{Conn: udp}
	t.Cleanup(func() { tr.Close(); udp.Close() })
	return tr
}

// A client that never reads its stream (a 1 KiB receive window) while the
// server spawns and despawns 20 entities a tick: the server keeps its rate,
// the other clients keep up, and the reader-less client is dropped within a
// bounded time with a reason that names the backlog.
func TestQUICNonReadingClient(t *testing.T) {
	// (The non-reader sends no datagram either: the JoinTimeout would drop
	// it first.)
	r := newQUICRig(t, quic.Config{SendBacklogTimeout: 2 * time.Second}, func(c *replication.ServerConfig) { c.JoinTimeout = -1 })
	ents := r.movers(200, 1)
	for range 2 {
		r.good = append(r.good, r.dial(r.l.Addr().String(), ""))
	}
	r.until("clients ready", 10*time.Second, func() bool { return r.clients[0].c.Ready() && r.clients[1].c.Ready() })

	tr := newRawTransport(t)
	qc, st := rawQUIC(t, tr, r.l.Addr(), r.cert, &quicgo.Config{InitialStreamReceiveWindow: 1024, MaxStreamReceiveWindow: 1024})
	hello := transport.Hello{Version: replication.ProtocolVersion, ProtocolHash: r.reg.Hash()}.Append(nil)
	_, err := st.Write(append(binary.AppendUvarint(nil, uint64(len(hello))), hello...))
	require.NoError(t, err)

	rng := rand.New(rand.NewPCG(2, 2))
	r.game = spawnChurn(r.harness, ents, 20, rng)
	from := len(r.ticks)
	start := time.Now()
	var dropped time.Duration
	r.runFor(6*time.Second, func() bool {
		if dropped == 0 && r.srv.Stats.BacklogDrops == 1 {
			dropped = time.Since(start)
		}
		return false
	})
	r.requireTicks(from, "non-reading client")
	t.Logf("non-reading client dropped %v after its Hello; good clients' worst probe lag %d and %d ticks",
		dropped.Round(time.Millisecond), r.lagMax[0], r.lagMax[1])
	require.NotZero(t, dropped, "the non-reading client was not dropped; disconnects: %v", r.events)
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
	for _, i := range r.good {
		require.LessOrEqual(t, r.lagMax[i], maxLag, "client %d fell behind", i)
	}
	// The churn stops; the good clients converge.
	r.game = nil
	r.until("convergence", 10*time.Second, func() bool { return r.converged(0, nil) == nil && r.converged(1, nil) == nil })
}

// Many clients vanish without a close (their path goes dead), and one more
// client's link goes silent for 10 s while two others play: the server keeps
// its rate throughout, the players see no extra lag, and the silent client
// catches up once its link is back.
func TestQUICDeadAndSilentPeers(t *testing.T) {
	// Timeouts beyond the 16 s this test runs: the silent link must come
	// back to a client and a server that kept waiting (liveness tests cover
	// dropping dead peers).
	// 33 clients from one address join at once.
	r := newQUICRig(t, quic.Config{MaxPendingPerAddress: -1}, func(c *replication.ServerConfig) { c.ClientTimeout = 20 * time.Second })
	r.clientTimeout = 20 * time.Second
	ents := r.movers(200, 3)
	for range 2 {
		r.good = append(r.good, r.dial(r.l.Addr().String(), ""))
	}
	doomed, err := netem.Listen(r.l.Addr().String(), 1)
	require.NoError(t, err)
	defer doomed.Close()
	silent, err := netem.Listen(r.l.Addr().String(), 2)
	require.NoError(t, err)
	defer silent.Close()
	// Ordinary internet paths (50 ms RTT, 2% loss) before they go dead.
	impaired := netem.Conditions{Latency: 25 * time.Millisecond, Loss: 0.02}
	doomed.SetConditions(impaired, impaired)
	silent.SetConditions(impaired, impaired)
	var dead []int
	for range 30 {
		dead = append(dead, r.dial(doomed.Addr().String(), ""))
	}
	mute := r.dial(silent.Addr().String(), "")
	r.until("clients ready", 20*time.Second, func() bool {
		for _, c := range r.clients {
			if !c.c.Ready() {
				return false
			}
		}
		return true
	})
	r.game = func(int) {
		for _, e := range ents {
			r.pos(e).X += 0.1
		}
	}
	r.runFor(time.Second, nil)

	from := len(r.ticks)
	doomed.SetDown(true) // for good: no close frame will ever arrive
	for _, i := range dead {
		r.active[i] = false
	}
	silent.SetDown(true)
	cut := time.Now()
	r.runFor(10*time.Second, nil)
	silent.SetDown(false)
	r.until("the silent client catches up", 10*time.Second, func() bool {
		lag, ok := r.probeLag(mute)
		return ok && lag <= maxLag
	})
	// The dead peers stay dead longer: QUIC's congestion window toward them
	// fills only after several seconds at the budget's floor rate.
	r.runFor(16*time.Second-time.Since(cut), nil)
	r.requireTicks(from, "30 dead peers and a 10 s silent link")
	require.Len(t, r.srv.Clients(), 33, "nobody timed out yet (idle timeout 30 s)")
	for _, i := range r.good {
		require.LessOrEqual(t, r.lagMax[i], maxLag, "client %d fell behind", i)
	}
	var sendDropped uint64
	for _, id := range r.srv.Clients() {
		info, _ := r.srv.Client(id)
		sendDropped += info.Transport.DatagramsSendDropped
	}
	t.Logf("good clients' worst probe lag %d and %d ticks; %d datagrams to dead or silent peers dropped in send queues",
		r.lagMax[0], r.lagMax[1], sendDropped)
	r.game = nil
	r.until("convergence", 10*time.Second, func() bool {
		return r.converged(0, nil) == nil && r.converged(1, nil) == nil && r.converged(mute, nil) == nil
	})
}

// A flood of connections that never finish the handshake, from one address
// with no per-address bound (LAN settings, the worst case): 500 QUIC
// connections, a third of them silent after the stream preamble, a third
// sending part of a Hello, a third sending 1 MiB on the one stream they may
// open (a first message of the largest handshake size, which the server
// rejects, and more behind it). Three rounds. The server's tick keeps its rate (no close waits on
// quic-go, closes run on the connections' own goroutines), the playing
// client's newest snapshot stays at most 250 ms old, and the server's heap
// grows by at most 64 MB (each connection's flow-control window is the
// handshake's 32 KiB until the Welcome, and it queues at most 16 datagrams).
// The attackers run in a child process (this test binary as
// TestQUICHandshakeAttacker), so the heap measured here is the server's.
// Under the race detector the tick and lag figures are reported, not bounded
// (instrumented quic-go handshakes take several times as long); .ci/run
// runs this test without it too.
func TestQUICHandshakeFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("500 QUIC handshakes per round")
	}
	r := newQUICRig(t, quic.Config{AcceptBacklog: 1000, MaxPendingPerAddress: -1}, func(cfg *replication.ServerConfig) {
		cfg.MaxHandshakes = 1000
		cfg.HandshakeTimeout = time.Minute
	})
	r.movers(200, 5)
	r.good = append(r.good, r.dial(r.l.Addr().String(), ""))
	r.until("client ready", 10*time.Second, func() bool { return r.clients[0].c.Ready() })
	r.game = func(int) {}
	rounds := 3
	if raceEnabled {
		rounds = 1
	}
	for round := range rounds {
		r.floodRound(t, round)
	}
}

// floodRound runs one round of TestQUICHandshakeFlood.
func (r *quicRig) floodRound(t *testing.T, round int) {
	t.Helper()
	r.runFor(300*time.Millisecond, nil) // (the last round's connections are gone)
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	from := len(r.ticks)
	r.lagMax = map[int]int{}

	// The server's loop keeps running while the attackers connect.
	stop := make(chan struct{})
	loopDone := make(chan struct{})
	go func() {
		defer close(loopDone)
		r.runFor(time.Hour, func() bool {
			select {
			case <-stop:
				return true
			default:
				return false
			}
		})
	}()
	stopLoop := func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-loopDone
	}
	defer stopLoop()
	cmd := exec.Command(os.Args[0], "-test.run=^TestQUICHandshakeAttacker$", "-test.v")
	cmd.Env = append(os.Environ(), "ARCHENET_ATTACK_ADDR="+r.l.Addr().String())
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var childOut strings.Builder // the child's other output, for a failure message
	cmd.Stderr = &childOut
	require.NoError(t, cmd.Start())
	defer func() { stdin.Close(); _ = cmd.Wait() }()
	sc := bufio.NewScanner(stdout)
	var summary string
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "attack: ") {
			summary = line
			break
		}
		childOut.WriteString(line + "\n")
	}
	if summary == "" {
		_ = cmd.Wait()
		t.Fatalf("the attacker did not report:\n%s", childOut.String())
	}
	// Let the server's connection goroutines take what was sent.
	time.Sleep(time.Second)
	runtime.GC()
	var peak runtime.MemStats
	runtime.ReadMemStats(&peak)
	pending := r.l.Admission().Pending
	stopLoop()
	growth := int64(peak.HeapInuse) - int64(base.HeapInuse)
	var worst time.Duration
	for _, d := range r.ticks[from:] {
		worst = max(worst, d)
	}
	lag := time.Duration(r.lagMax[0]) * tickDt
	t.Logf("round %d: %s; %d pending at the transport; server heap +%.1f MB (%.1f KB per connection); worst tick %v over %d ticks; the client's newest snapshot at most %v old",
		round+1, summary[len("attack: "):], pending, float64(growth)/(1<<20), float64(growth)/1024/500, worst.Round(10*time.Microsecond), len(r.ticks)-from, lag)
	require.Less(t, growth, int64(64<<20), "heap growth")
	require.GreaterOrEqual(t, pending, 300, "the silent and partial connections were held (pending) while measured")
	if !raceEnabled {
		require.LessOrEqual(t, worst, 67*time.Millisecond, "worst server tick")
		require.LessOrEqual(t, lag, 250*time.Millisecond, "the playing client's newest snapshot")
	}
}

// TestQUICHandshakeAttacker is the child process of TestQUICHandshakeFlood:
// 500 connections that open the stream and write its preamble, and then a
// third write nothing, a third part of a Hello (the first 1000 bytes of one
// announcing the largest handshake message) and a third 1 MiB (a message of
// the largest handshake size, and more), until stdin closes.
func TestQUICHandshakeAttacker(t *testing.T) {
	addr := os.Getenv("ARCHENET_ATTACK_ADDR")
	if addr == "" {
		t.Skip("run by TestQUICHandshakeFlood")
	}
	raddr, err := net.ResolveUDPAddr("udp", addr)
	require.NoError(t, err)
	tr := newRawTransport(t)
	const n = 500
	conns := make([]*quicgo.Conn, n)
	errs := make(chan error, n)
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	var bulk sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			qc, st, err := rawHostile(tr, raddr)
			if err != nil {
				errs <- err
				return
			}
			conns[i] = qc
			switch i % 3 {
			case 1:
				_, _ = st.Write(append(binary.AppendUvarint(nil, transport.MaxHandshakeMessageSize), make([]byte, 1000)...))
			case 2:
				// Flow control stops it; it writes on after the round's
				// figures, until its connection closes.
				bulk.Add(1)
				go func() {
					defer bulk.Done()
					_, _ = st.Write(append(binary.AppendUvarint(nil, transport.MaxHandshakeMessageSize), make([]byte, 1<<20)...))
				}()
				_, _ = qc.OpenUniStream() // none allowed
			}
		}()
	}
	wg.Wait()
	close(errs)
	var failed []error
	for err := range errs {
		failed = append(failed, err)
	}
	open := 0
	for _, qc := range conns {
		if qc != nil && qc.Context().Err() == nil {
			open++
		}
	}
	// (A dial can fail on a loaded machine; a few do not change the test.)
	why := ""
	if len(failed) > 0 {
		why = fmt.Sprintf(" (%d failed to connect, e.g. %v)", len(failed), failed[0])
	}
	fmt.Printf("attack: %d connections%s, %d still open (those sending 1 MiB are rejected)\n", n-len(failed), why, open)
	_, _ = io.Copy(io.Discard, os.Stdin)
	for _, qc := range conns {
		if qc != nil {
			qc.CloseWithError(0, "")
		}
	}
	bulk.Wait()
	require.LessOrEqual(t, len(failed), n/10)
}

func rawHostile(tr *quicgo.Transport, addr net.Addr) (*quicgo.Conn, *quicgo.Stream, error) {
	// The attacker does not care who the server is.
	tlsConf := &tls.Config{InsecureSkipVerify: true, NextProtos: []string{quic.ALPN}, ServerName: "127.0.0.1"}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	qc, err := tr.Dial(ctx, addr, tlsConf, &quicgo.Config{EnableDatagrams: true, MaxIdleTimeout: time.Minute})
	if err != nil {
		return nil, nil, fmt.Errorf("dial: %w", err)
	}
	st, err := qc.OpenStreamSync(ctx)
	if err != nil {
		return nil, nil, err
	}
	if _, err := st.Write([]byte{0xA1}); err != nil {
		return nil, nil, err
	}
	return qc, st, nil
}

// A 200 ms Authenticator and ten joins in flight: the server keeps its rate.
func TestQUICSlowAuthenticator(t *testing.T) {
	r := newQUICRig(t, quic.Config{}, func(cfg *replication.ServerConfig) {
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
	r.movers(200, 4)
	r.good = append(r.good, r.dial(r.l.Addr().String(), "ok"))
	r.until("first client", 10*time.Second, func() bool { return r.clients[0].c.Ready() })
	from := len(r.ticks)
	for range 10 {
		r.dial(r.l.Addr().String(), "ok")
		r.step()
	}
	bad := r.dial(r.l.Addr().String(), "nope")
	r.until("all joined", 10*time.Second, func() bool {
		for i, c := range r.clients {
			if i != bad && !c.c.Ready() {
				return false
			}
		}
		return r.clients[bad].c.State() == replication.StateClosed
	})
	r.requireTicks(from, "ten joins through a 200 ms Authenticator")
	require.EqualError(t, r.clients[bad].c.Err(), `rejected by server: unknown token "nope"`)
	require.LessOrEqual(t, r.lagMax[0], maxLag)
}
