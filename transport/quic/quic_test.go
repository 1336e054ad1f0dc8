package quic_test

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"net"
	"runtime"
	"testing"
	"time"

	quicgo "github.com/quic-go/quic-go"
	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/quic"
	"github.com/archenet/archenet/transport/transporttest"
)

type env struct {
	cert *quic.DevCert
	l    *quic.Listener
}

func newEnv(t testing.TB, cfg quic.Config) *env {
	t.Helper()
	cert, err := quic.GenerateDevCert(time.Hour)
	require.NoError(t, err)
	cfg.TLS = cert.ServerTLS()
	l, err := quic.Listen("127.0.0.1:0", &cfg)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	return &env{cert: cert, l: l}
}

func (e *env) dial(t testing.TB, cfg quic.Config) (*quic.Conn, *quic.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg.TLS = e.cert.ClientTLS()
	c, err := quic.Dial(ctx, e.l.Addr().String(), &cfg)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	s, err := e.l.Accept(ctx)
	require.NoError(t, err)
	return c, s.(*quic.Conn)
}

func TestConformance(t *testing.T) {
	transporttest.Run(t, func(t *testing.T) transporttest.Pair {
		e := newEnv(t, quic.Config{})
		c, s := e.dial(t, quic.Config{})
		return transporttest.Pair{Client: c, Server: s, Step: func() { time.Sleep(time.Millisecond) }, MaxSteps: 10000}
	})
}

func TestMaxDatagramSize(t *testing.T) {
	e := newEnv(t, quic.Config{})
	c, s := e.dial(t, quic.Config{})
	for _, conn := range []*quic.Conn{c, s} {
		max := conn.MaxDatagramSize()
		t.Logf("%s: max datagram payload %d bytes, RTT %v", conn.LocalAddr(), max, conn.Stats().RTT)
		require.GreaterOrEqual(t, max, 1100)
		require.Less(t, max, 1452)
		require.NoError(t, conn.SendDatagram(make([]byte, max)))
		var tl *transport.DatagramTooLargeError
		require.ErrorAs(t, conn.SendDatagram(make([]byte, max+1)), &tl)
	}
}

// TestPacedDatagrams sends 2,000 datagrams in bursts of 50 (below every
// queue's bound), waiting after each burst until the receiver has all of
// it: every datagram arrives, none is dropped on either side, and an
// unlimited rate never counts as a flood. Throughput is
// BenchmarkDatagramThroughput1200's business; the wait is bounded only
// against a hang.
func TestPacedDatagrams(t *testing.T) {
	e := newEnv(t, quic.Config{DatagramRateLimit: -1})
	c, s := e.dial(t, quic.Config{})
	// The server's Welcome ends the handshake: before it a connection
	// queues only a few datagrams.
	require.NoError(t, s.SendMessage(transport.Welcome{ClientID: 1}.Append(nil)))
	_, err := c.ReceiveMessage(context.Background())
	require.NoError(t, err)
	arrived := make(chan uint32, 64)
	go func() {
		defer close(arrived)
		for {
			b, err := s.ReceiveDatagram(context.Background())
			if err != nil {
				return
			}
			arrived <- binary.BigEndian.Uint32(b)
		}
	}()
	const total, burst = 2000, 50
	seen := make([]bool, total)
	payload := make([]byte, 1000)
	for i := 0; i < total; i += burst {
		for j := i; j < i+burst; j++ {
			binary.BigEndian.PutUint32(payload, uint32(j))
			require.NoError(t, c.SendDatagram(payload))
		}
		for got := 0; got < burst; got++ {
			select {
			case j := <-arrived:
				require.Less(t, int(j), i+burst, "a datagram of a later burst")
				require.False(t, seen[j], "datagram %d twice", j)
				seen[j] = true
			case <-time.After(10 * time.Second):
				t.Fatalf("burst at %d: %d of %d datagrams after 10 s (sender dropped %d, receiver %d)",
					i, got, burst, c.Stats().DatagramsDropped, s.Stats().DatagramsDropped)
			}
		}
	}
	require.Zero(t, c.Stats().DatagramsDropped)
	require.Zero(t, s.Stats().DatagramsDropped)
	require.NoError(t, s.Err(), "unlimited rate: no flood close")
	s.Close()
	for range arrived {
	}
}

// rawDial opens a quic-go connection with archenet's ALPN, bypassing our Conn, so a test
// can misbehave.
func rawDial(t *testing.T, e *env) *quicgo.Conn {
	t.Helper()
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	tr := &quicgo.Transport{Conn: udp}
	t.Cleanup(func() { tr.Close(); udp.Close() })
	tlsConf := e.cert.ClientTLS()
	tlsConf.NextProtos = []string{quic.ALPN}
	tlsConf.ServerName = "127.0.0.1"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	qc, err := tr.Dial(ctx, e.l.Addr(), tlsConf, &quicgo.Config{EnableDatagrams: true})
	require.NoError(t, err)
	t.Cleanup(func() { qc.CloseWithError(0, "") })
	return qc
}

func closedWith(t *testing.T, qc *quicgo.Conn) *quicgo.ApplicationError {
	t.Helper()
	select {
	case <-qc.Context().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("server did not close the hostile connection")
	}
	var app *quicgo.ApplicationError
	require.ErrorAs(t, context.Cause(qc.Context()), &app)
	require.True(t, app.Remote)
	return app
}

// requireHealthy checks that a well-behaved connection still works both ways.
func requireHealthy(t *testing.T, c, s *quic.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, c.SendMessage([]byte("ping")))
	b, err := s.ReceiveMessage(ctx)
	require.NoError(t, err)
	require.Equal(t, "ping", string(b))
	require.NoError(t, s.SendMessage([]byte("pong")))
	b, err = c.ReceiveMessage(ctx)
	require.NoError(t, err)
	require.Equal(t, "pong", string(b))
	require.NoError(t, s.Err())
}

func TestHostilePeers(t *testing.T) {
	e := newEnv(t, quic.Config{DatagramRateLimit: 500, DatagramBurst: 100})
	goodC, goodS := e.dial(t, quic.Config{})

	t.Run("garbage instead of the stream preamble", func(t *testing.T) {
		qc := rawDial(t, e)
		st, err := qc.OpenStreamSync(context.Background())
		require.NoError(t, err)
		st.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
		app := closedWith(t, qc)
		require.Equal(t, quicgo.ApplicationErrorCode(transport.CodeProtocolError), app.ErrorCode)
		require.Equal(t, "bad message stream preamble 0x47", app.ErrorMessage)
		_, ok := e.l.PollAccept()
		require.False(t, ok, "the connection never reaches Accept")
	})

	hostileStream := func(t *testing.T, payload []byte) (*quicgo.ApplicationError, *quic.Conn) {
		qc := rawDial(t, e)
		st, err := qc.OpenStreamSync(context.Background())
		require.NoError(t, err)
		_, err = st.Write([]byte{0xA1})
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s, err := e.l.Accept(ctx)
		require.NoError(t, err)
		st.Write(payload)
		app := closedWith(t, qc)
		<-s.Done()
		return app, s.(*quic.Conn)
	}

	t.Run("4 GiB length prefix", func(t *testing.T) {
		app, s := hostileStream(t, []byte{0x80, 0x80, 0x80, 0x80, 0x10})
		require.Equal(t, quicgo.ApplicationErrorCode(transport.CodeMessageTooLarge), app.ErrorCode)
		require.Equal(t, "handshake message of 4294967296 bytes exceeds the maximum of 16389 bytes", app.ErrorMessage)
		var ce *transport.CloseError
		require.ErrorAs(t, s.Err(), &ce)
		require.Equal(t, transport.CloseError{Code: transport.CodeMessageTooLarge, Reason: app.ErrorMessage}, *ce)
	})

	t.Run("handshake message above its bound", func(t *testing.T) {
		app, _ := hostileStream(t, []byte{0x86, 0x80, 0x01}) // 16390 bytes announced
		require.Equal(t, quicgo.ApplicationErrorCode(transport.CodeMessageTooLarge), app.ErrorCode)
		require.Equal(t, "handshake message of 16390 bytes exceeds the maximum of 16389 bytes", app.ErrorMessage)
	})

	t.Run("4 GiB length prefix after the handshake", func(t *testing.T) {
		qc := rawDial(t, e)
		st, err := qc.OpenStreamSync(context.Background())
		require.NoError(t, err)
		_, err = st.Write([]byte{0xA1, 0x01, 'h'})
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s, err := e.l.Accept(ctx)
		require.NoError(t, err)
		b, err := s.ReceiveMessage(ctx) // taking the first message and welcoming lets the next be read
		require.NoError(t, err)
		require.Equal(t, "h", string(b))
		require.NoError(t, s.SendMessage(transport.Welcome{ClientID: 1}.Append(nil)))
		st.Write([]byte{0x80, 0x80, 0x80, 0x80, 0x10})
		app := closedWith(t, qc)
		require.Equal(t, quicgo.ApplicationErrorCode(transport.CodeMessageTooLarge), app.ErrorCode)
		require.Equal(t, "message of 4294967296 bytes exceeds the maximum of 1048576 bytes", app.ErrorMessage)
		<-s.Done()
	})

	t.Run("garbage length prefix", func(t *testing.T) {
		garbage := make([]byte, 64)
		for i := range garbage {
			garbage[i] = 0xff
		}
		app, s := hostileStream(t, garbage)
		require.Equal(t, quicgo.ApplicationErrorCode(transport.CodeProtocolError), app.ErrorCode)
		require.Contains(t, app.ErrorMessage, "malformed length prefix")
		require.ErrorIs(t, s.Err(), transport.ErrClosed)
	})

	t.Run("stream closed by peer", func(t *testing.T) {
		qc := rawDial(t, e)
		st, err := qc.OpenStreamSync(context.Background())
		require.NoError(t, err)
		st.Write(append([]byte{0xA1}, 0x05, 'a'))
		st.Close()
		app := closedWith(t, qc)
		require.Equal(t, quicgo.ApplicationErrorCode(transport.CodeProtocolError), app.ErrorCode)
		require.Equal(t, "stream ended inside a message", app.ErrorMessage)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s, err := e.l.Accept(ctx) // it was accepted before it misbehaved
		require.NoError(t, err)
		<-s.Done()
		require.ErrorIs(t, s.Err(), transport.ErrClosed)
	})

	t.Run("datagram flood", func(t *testing.T) {
		qc := rawDial(t, e)
		st, err := qc.OpenStreamSync(context.Background())
		require.NoError(t, err)
		st.Write([]byte{0xA1})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s, err := e.l.Accept(ctx)
		require.NoError(t, err)
		payload := make([]byte, 100)
		floodStart := time.Now()
		for i := 0; i < 20000 && qc.Context().Err() == nil; i++ {
			qc.SendDatagram(payload)
		}
		app := closedWith(t, qc)
		require.Equal(t, quicgo.ApplicationErrorCode(transport.CodeFlood), app.ErrorCode)
		require.Equal(t, "datagram flood: more than 500 datagrams/s (burst 100)", app.ErrorMessage)
		<-s.Done()
		st2 := s.Stats()
		// The bucket admits its burst plus what it refilled (500/s) while the
		// flood lasted; a slow (race-enabled) run lasts longer.
		refill := uint64(500*time.Since(floodStart).Seconds()) + 1
		require.LessOrEqual(t, st2.DatagramsReceived, 100+refill, "the bucket admitted at most its burst (+refill)")
		t.Logf("flood: server admitted %d datagrams before closing", st2.DatagramsReceived)
	})

	requireHealthy(t, goodC, goodS)
	// The server still accepts new connections.
	c2, s2 := e.dial(t, quic.Config{})
	requireHealthy(t, c2, s2)
}

func TestDatagramQueueIsBounded(t *testing.T) {
	e := newEnv(t, quic.Config{DatagramQueueLen: 16, DatagramRateLimit: -1})
	c, s := e.dial(t, quic.Config{})
	for range 200 {
		require.NoError(t, c.SendDatagram([]byte("x")))
	}
	require.Eventually(t, func() bool {
		st := s.Stats()
		return st.DatagramsReceived == 16 && st.DatagramsDropped > 0
	}, 10*time.Second, time.Millisecond)
	// Receipts stopped at the queue bound while drops went on. Polling frees room, so a
	// late arrival may still get in; the stats stay consistent with what is polled.
	n := 0
	for {
		if _, ok := s.PollDatagram(); !ok {
			break
		}
		n++
	}
	require.GreaterOrEqual(t, n, 16)
	// (Late arrivals may land at any moment: every datagram counted as
	// received by one reading is polled by the drain after it, and no more
	// are polled than are counted after that.)
	received := s.Stats().DatagramsReceived
	n += len(drain(s))
	require.GreaterOrEqual(t, uint64(n), received, "a received datagram was not polled")
	require.LessOrEqual(t, uint64(n), s.Stats().DatagramsReceived, "more polled than received")
}

func drain(c *quic.Conn) [][]byte {
	var out [][]byte
	for {
		b, ok := c.PollDatagram()
		if !ok {
			return out
		}
		out = append(out, b)
	}
}

func TestIdleTimeout(t *testing.T) {
	cfg := quic.Config{IdleTimeout: 300 * time.Millisecond, KeepAlivePeriod: -1}
	e := newEnv(t, cfg)
	c, s := e.dial(t, cfg)
	for _, conn := range []*quic.Conn{c, s} {
		select {
		case <-conn.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("no idle timeout")
		}
		require.ErrorIs(t, conn.Err(), transport.ErrTimeout)
		var ce *transport.CloseError
		require.ErrorAs(t, conn.Err(), &ce)
		require.Equal(t, transport.CodeTimeout, ce.Code)
	}
}

// An idle connection outlives three idle timeouts. (The idle timeout is a second,
// not less: a busy machine can starve a process for a good part of one.)
func TestKeepAliveKeepsIdleConnectionOpen(t *testing.T) {
	cfg := quic.Config{IdleTimeout: time.Second, KeepAlivePeriod: 100 * time.Millisecond}
	e := newEnv(t, cfg)
	c, s := e.dial(t, cfg)
	select {
	case <-c.Done():
		t.Fatalf("closed despite keep-alives: %v", c.Err())
	case <-time.After(3 * cfg.IdleTimeout):
	}
	requireHealthy(t, c, s)
}

func TestCertificateVerification(t *testing.T) {
	e := newEnv(t, quic.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	_, err := quic.Dial(ctx, e.l.Addr().String(), &quic.Config{})
	require.Error(t, err, "system roots do not trust a self-signed certificate")

	other, err := quic.GenerateDevCert(time.Hour)
	require.NoError(t, err)
	_, err = quic.Dial(ctx, e.l.Addr().String(), &quic.Config{TLS: other.ClientTLS()})
	require.Error(t, err, "a different development certificate is not trusted")

	c, err := quic.Dial(ctx, e.l.Addr().String(), &quic.Config{InsecureSkipVerify: true})
	require.NoError(t, err, "explicitly insecure")
	c.Close()

	c, err = quic.Dial(ctx, e.l.Addr().String(), &quic.Config{TLS: e.cert.ClientTLS()})
	require.NoError(t, err)
	require.Equal(t, quic.ALPN, c.QUICConn().ConnectionState().TLS.NegotiatedProtocol)
	require.Equal(t, uint16(tls.VersionTLS13), c.QUICConn().ConnectionState().TLS.Version)
	c.Close()
}

func TestWrongALPNRejected(t *testing.T) {
	e := newEnv(t, quic.Config{})
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	tr := &quicgo.Transport{Conn: udp}
	defer func() { tr.Close(); udp.Close() }()
	tlsConf := e.cert.ClientTLS()
	tlsConf.NextProtos = []string{"h3"}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = tr.Dial(ctx, e.l.Addr(), tlsConf, &quicgo.Config{EnableDatagrams: true})
	require.Error(t, err)
}

func TestListenNeedsCertificate(t *testing.T) {
	_, err := quic.Listen("127.0.0.1:0", &quic.Config{})
	require.ErrorContains(t, err, "certificate")
}

func TestDevCertFiles(t *testing.T) {
	cert, err := quic.GenerateDevCert(0)
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, cert.WriteFiles(dir+"/cert.pem", dir+"/key.pem"))
	loaded, err := quic.LoadDevCert(dir+"/cert.pem", dir+"/key.pem")
	require.NoError(t, err)
	require.Equal(t, cert.Leaf.Raw, loaded.Leaf.Raw)
	require.Equal(t, []string{"localhost"}, loaded.Leaf.DNSNames)
	_, err = loaded.Leaf.Verify(x509VerifyOptions(cert))
	require.NoError(t, err)
}

func TestHandshakeOverQUIC(t *testing.T) {
	e := newEnv(t, quic.Config{})
	c, s := e.dial(t, quic.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	serr := make(chan error, 1)
	go func() {
		_, err := transport.ServerHandshake(ctx, s, 1, 0x1234abcd, nil, nil)
		serr <- err
	}()
	_, cerr := transport.ClientHandshake(ctx, c, transport.Hello{Version: 1, ProtocolHash: 0x5678ef00})
	const want = "protocol hash mismatch: server 0x1234abcd, client 0x5678ef00"
	require.EqualError(t, cerr, want)
	require.EqualError(t, <-serr, want)
	<-c.Done()
	<-s.Done()
	var ce *transport.CloseError
	require.ErrorAs(t, s.Err(), &ce)
	require.Equal(t, transport.CodeHandshakeFailed, ce.Code)
}

func TestNoGoroutineLeak(t *testing.T) {
	baseline := runtime.NumGoroutine()
	func() {
		cert, err := quic.GenerateDevCert(time.Hour)
		require.NoError(t, err)
		l, err := quic.Listen("127.0.0.1:0", &quic.Config{TLS: cert.ServerTLS()})
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var clients []*quic.Conn
		for range 3 {
			c, err := quic.Dial(ctx, l.Addr().String(), &quic.Config{TLS: cert.ClientTLS()})
			require.NoError(t, err)
			s, err := l.Accept(ctx)
			require.NoError(t, err)
			require.NoError(t, c.SendMessage([]byte("m")))
			require.NoError(t, c.SendDatagram([]byte("d")))
			_, err = s.ReceiveMessage(ctx)
			require.NoError(t, err)
			clients = append(clients, c)
		}
		require.NoError(t, clients[0].Close())
		require.NoError(t, l.Close()) // closes the other two server ends
		for _, c := range clients[1:] {
			<-c.Done()
			require.NoError(t, c.Close())
		}
		_, err = l.Accept(ctx)
		require.ErrorIs(t, err, transport.ErrClosed)
	}()
	// Polled on this goroutine: require.Eventually would add goroutines of its own.
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > baseline && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > baseline {
		buf := make([]byte, 1<<20)
		t.Fatalf("goroutines: baseline %d, now %d\n%s", baseline, n, buf[:runtime.Stack(buf, true)])
	}
}

func TestDialFailsWithoutServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	addr := udp.LocalAddr().String()
	udp.Close()
	_, err = quic.Dial(ctx, addr, &quic.Config{InsecureSkipVerify: true})
	require.Error(t, err)
	require.True(t, errors.Is(err, context.DeadlineExceeded) || err != nil)
}
