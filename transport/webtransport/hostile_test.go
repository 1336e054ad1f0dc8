//go:build !js

package webtransport_test

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	quicgo "github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	wt "github.com/quic-go/webtransport-go"
	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/webtransport"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// rawSession opens a WebTransport session to e from a UDP socket on ip with
// webtransport-go directly, bypassing Dial and Conn, so a test can misbehave.
// With preamble it opens the message stream and writes the preamble byte.
func rawSession(t *testing.T, e *env, ip net.IP, preamble bool) (*wt.Session, *wt.Stream, error) {
	sess, st, _, err := rawSessionOn(t, e, ip, preamble)
	return sess, st, err
}

// rawSessionOn is rawSession, also returning the UDP socket (closing it makes the
// peer vanish without a word).
func rawSessionOn(t *testing.T, e *env, ip net.IP, preamble bool) (*wt.Session, *wt.Stream, *net.UDPConn, error) {
	t.Helper()
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: ip})
	require.NoError(t, err)
	tr := &quicgo.Transport{Conn: udp}
	t.Cleanup(func() { tr.Close(); udp.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tlsConf := &tls.Config{InsecureSkipVerify: true, NextProtos: []string{http3.NextProtoH3}} // an attacker does not care
	qc, err := tr.Dial(ctx, e.l.Addr(), tlsConf, &quicgo.Config{EnableDatagrams: true, EnableStreamResetPartialDelivery: true})
	if err != nil {
		return nil, nil, nil, err
	}
	t.Cleanup(func() { qc.CloseWithError(0, "") })
	cc, err := (&wt.Transport{}).NewClientConn(qc)
	if err != nil {
		return nil, nil, nil, err
	}
	_, sess, err := cc.Dial(ctx, e.url(), nil)
	if err != nil {
		return nil, nil, nil, err
	}
	if !preamble {
		return sess, nil, udp, nil
	}
	st, err := sess.OpenStreamSync(ctx)
	require.NoError(t, err)
	_, err = st.Write([]byte{0xA1})
	require.NoError(t, err)
	return sess, st, udp, nil
}

// sessionClosedWith waits for the server to end sess and returns its code and reason.
func sessionClosedWith(t *testing.T, sess *wt.Session) *wt.SessionError {
	t.Helper()
	select {
	case <-sess.Context().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not close the hostile session")
	}
	_, err := sess.AcceptStream(context.Background())
	var se *wt.SessionError
	require.ErrorAs(t, err, &se)
	require.True(t, se.Remote)
	return se
}

// Every way a session can break archenet's rules closes it, with a code and a reason
// the peer receives, before or after it reached Accept; a well-behaved connection and
// new ones are not affected.
func TestHostileSessions(t *testing.T) {
	e := newEnv(t, webtransport.Config{DatagramRateLimit: 500, DatagramBurst: 100, Logger: quietLogger()})
	goodC, goodS := e.dial(t, webtransport.Config{})
	lo := net.IPv4(127, 0, 0, 1)
	accept := func(t *testing.T) transport.Conn {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s, err := e.l.Accept(ctx)
		require.NoError(t, err)
		return s
	}

	t.Run("garbage instead of the stream preamble", func(t *testing.T) {
		sess, _, err := rawSession(t, e, lo, false)
		require.NoError(t, err)
		st, err := sess.OpenStream()
		require.NoError(t, err)
		_, _ = st.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
		se := sessionClosedWith(t, sess)
		require.Equal(t, wt.SessionErrorCode(transport.CodeProtocolError), se.ErrorCode)
		require.Equal(t, "bad message stream preamble 0x47", se.Message)
		_, ok := e.l.PollAccept()
		require.False(t, ok, "the session never reaches Accept")
	})

	stream := func(t *testing.T, payload []byte) (*wt.SessionError, transport.Conn) {
		sess, st, err := rawSession(t, e, lo, true)
		require.NoError(t, err)
		s := accept(t)
		_, _ = st.Write(payload)
		se := sessionClosedWith(t, sess)
		<-s.Done()
		return se, s
	}
	t.Run("4 GiB length prefix", func(t *testing.T) {
		se, s := stream(t, []byte{0x80, 0x80, 0x80, 0x80, 0x10})
		require.Equal(t, wt.SessionErrorCode(transport.CodeMessageTooLarge), se.ErrorCode)
		require.Equal(t, "handshake message of 4294967296 bytes exceeds the maximum of 16389 bytes", se.Message)
		var ce *transport.CloseError
		require.ErrorAs(t, s.Err(), &ce)
		require.Equal(t, transport.CloseError{Code: transport.CodeMessageTooLarge, Reason: se.Message}, *ce)
	})
	t.Run("garbage length prefix", func(t *testing.T) {
		garbage := make([]byte, 64)
		for i := range garbage {
			garbage[i] = 0xff
		}
		se, _ := stream(t, garbage)
		require.Equal(t, wt.SessionErrorCode(transport.CodeProtocolError), se.ErrorCode)
		require.Contains(t, se.Message, "malformed length prefix")
	})
	t.Run("datagram above 1200 bytes", func(t *testing.T) {
		sess, _, err := rawSession(t, e, lo, true)
		require.NoError(t, err)
		s := accept(t)
		require.NoError(t, sess.SendDatagram(make([]byte, 1210))) // a browser sends up to 1215
		se := sessionClosedWith(t, sess)
		require.Equal(t, wt.SessionErrorCode(transport.CodeProtocolError), se.ErrorCode)
		require.Equal(t, "datagram of 1210 bytes exceeds the maximum of 1200", se.Message)
		<-s.Done()
	})
	t.Run("datagram flood", func(t *testing.T) {
		sess, _, err := rawSession(t, e, lo, true)
		require.NoError(t, err)
		s := accept(t)
		for i := 0; i < 20000 && sess.Context().Err() == nil; i++ {
			_ = sess.SendDatagram(make([]byte, 100))
		}
		se := sessionClosedWith(t, sess)
		require.Equal(t, wt.SessionErrorCode(transport.CodeFlood), se.ErrorCode)
		require.Equal(t, "datagram flood: more than 500 datagrams/s (burst 100)", se.Message)
		<-s.Done()
	})
	t.Run("a second stream", func(t *testing.T) {
		sess, _, err := rawSession(t, e, lo, true)
		require.NoError(t, err)
		s := accept(t)
		st, err := sess.OpenStream()
		require.NoError(t, err)
		_, _ = st.Write([]byte{0}) // a stream is announced with its first byte
		se := sessionClosedWith(t, sess)
		require.Equal(t, wt.SessionErrorCode(transport.CodeProtocolError), se.ErrorCode)
		require.Equal(t, "unexpected second stream", se.Message)
		<-s.Done()
	})
	t.Run("a unidirectional stream", func(t *testing.T) {
		sess, _, err := rawSession(t, e, lo, true)
		require.NoError(t, err)
		s := accept(t)
		st, err := sess.OpenUniStream()
		require.NoError(t, err)
		_, _ = st.Write([]byte{0})
		se := sessionClosedWith(t, sess)
		require.Equal(t, wt.SessionErrorCode(transport.CodeProtocolError), se.ErrorCode)
		require.Equal(t, "unexpected unidirectional stream", se.Message)
		<-s.Done()
	})

	requireHealthy(t, goodC, goodS)
	c2, s2 := e.dial(t, webtransport.Config{})
	requireHealthy(t, c2, s2)
}

// requireHealthy checks that a well-behaved connection still works both ways.
func requireHealthy(t *testing.T, c, s transport.Conn) {
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

// StartClose never waits: not for a peer that is gone without a word (its UDP
// socket closed), whose close then completes within a second; CloseWithReason waits
// for the same end. The replication server closes such connections on its tick.
func TestStartCloseDoesNotWait(t *testing.T) {
	e := newEnv(t, webtransport.Config{Logger: quietLogger()})
	for _, how := range []string{"StartClose", "CloseWithReason"} {
		_, _, udp, err := rawSessionOn(t, e, net.IPv4(127, 0, 0, 1), true)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		s, err := e.l.Accept(ctx)
		cancel()
		require.NoError(t, err)
		require.NoError(t, udp.Close()) // nothing will answer the close
		start := time.Now()
		if how == "StartClose" {
			s.(transport.CloseStarter).StartClose(transport.CodeApplication, "kicked")
			// At once: well before the close linger (250 ms) it would wait
			// out if it waited (the bound leaves a busy machine room).
			require.Less(t, time.Since(start), 150*time.Millisecond, "StartClose returned at once")
		} else {
			require.NoError(t, s.CloseWithReason(transport.CodeApplication, "kicked"))
		}
		select {
		case <-s.Done():
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: not closed", how)
		}
		took := time.Since(start)
		t.Logf("%s with a vanished peer: closed after %v", how, took.Round(time.Millisecond))
		require.Less(t, took, time.Second)
		var ce *transport.CloseError
		require.ErrorAs(t, s.Err(), &ce)
		require.Equal(t, transport.CloseError{Code: transport.CodeApplication, Reason: "kicked"}, *ce)
	}
}
