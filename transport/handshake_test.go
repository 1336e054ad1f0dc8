package transport_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/sim"
	"github.com/stretchr/testify/require"
)

func TestHelloEncoding(t *testing.T) {
	h := transport.Hello{Version: 0x0102, ProtocolHash: 0x1122334455667788, Token: []byte("tok")}
	want := []byte{0x01, 0x01, 0x02, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x03, 't', 'o', 'k'}
	b := h.Append([]byte{0xff})
	require.Equal(t, append([]byte{0xff}, want...), b, "Append appends")
	require.Equal(t, len(want), h.Len())
	got, err := transport.ParseHello(want)
	require.NoError(t, err)
	require.Equal(t, h, got)
	requireTruncationsFail(t, want, func(b []byte) error { _, err := transport.ParseHello(b); return err })

	// The match is an optional trailing field: a prefix that ends where it
	// begins is a valid Hello without one; every other prefix fails.
	hm := transport.Hello{Version: 0x0102, ProtocolHash: 0x1122334455667788, Token: []byte("tok"), Match: "duel-7"}
	wantM := append(append([]byte{}, want...), 6, 'd', 'u', 'e', 'l', '-', '7')
	require.Equal(t, wantM, hm.Append(nil))
	require.Equal(t, len(wantM), hm.Len())
	got, err = transport.ParseHello(wantM)
	require.NoError(t, err)
	require.Equal(t, hm, got)
	requireTruncationsFail(t, wantM[len(want)+1:], func(b []byte) error {
		_, err := transport.ParseHello(append(append([]byte{}, wantM[:len(want)+1]...), b...))
		return err
	})
	for _, bad := range [][]byte{{0}, {65}, {2, 0xff, 0xfe}} {
		_, err := transport.ParseHello(append(append([]byte{}, want...), bad...))
		require.ErrorIs(t, err, transport.ErrMalformed, "match % x", bad)
	}

	empty := transport.Hello{Version: 1}
	got, err = transport.ParseHello(empty.Append(nil))
	require.NoError(t, err)
	require.Equal(t, empty, got)
	require.Equal(t, 12, empty.Len())
}

func TestWelcomeEncoding(t *testing.T) {
	w := transport.Welcome{ClientID: 7, Payload: make([]byte, 200)}
	want := append([]byte{0x02, 0x07, 0xc8, 0x01}, make([]byte, 200)...)
	require.Equal(t, want, w.Append(nil))
	require.Equal(t, len(want), w.Len())
	got, err := transport.ParseWelcome(want)
	require.NoError(t, err)
	require.Equal(t, w, got)
	requireTruncationsFail(t, want, func(b []byte) error { _, err := transport.ParseWelcome(b); return err })
}

func TestRejectEncoding(t *testing.T) {
	r := transport.Reject{Code: transport.CodeRejected, Version: 3, ProtocolHash: 0xabcdef, Reason: "full"}
	want := []byte{0x03, 0x00, 0x04, 0x00, 0x03, 0, 0, 0, 0, 0, 0xab, 0xcd, 0xef, 0x04, 'f', 'u', 'l', 'l'}
	require.Equal(t, want, r.Append(nil))
	require.Equal(t, len(want), r.Len())
	got, err := transport.ParseReject(want)
	require.NoError(t, err)
	require.Equal(t, r, got)
	for i := range len(want) {
		_, err := transport.ParseReject(want[:i])
		require.ErrorIs(t, err, transport.ErrMalformed, "prefix of %d bytes", i)
	}
	// What follows the reason is the application's protocol description,
	// up to its bound.
	r.Protocol = []byte{1, 2, 3}
	got, err = transport.ParseReject(r.Append(nil))
	require.NoError(t, err)
	require.Equal(t, r, got)
	require.Equal(t, r.Len(), len(r.Append(nil)))
	r.Protocol = make([]byte, transport.MaxRejectProtocolLen+1)
	_, err = transport.ParseReject(r.Append(nil))
	require.ErrorIs(t, err, transport.ErrMalformed)
}

func requireTruncationsFail(t *testing.T, full []byte, parse func([]byte) error) {
	t.Helper()
	for i := range len(full) {
		err := parse(full[:i])
		require.ErrorIs(t, err, transport.ErrMalformed, "prefix of %d bytes", i)
	}
	require.ErrorIs(t, parse(append(full[:len(full):len(full)], 0)), transport.ErrMalformed, "trailing byte")
}

func TestDecodersRejectBadInput(t *testing.T) {
	hello := func(tokenLen []byte) []byte {
		return append([]byte{0x01, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1}, tokenLen...)
	}
	cases := map[string]struct {
		b    []byte
		want string
	}{
		"wrong type":       {transport.Welcome{}.Append(nil), "message type 0x2, want 0x1"},
		"token too long":   {hello([]byte{0x81, 0x08}), "token length 1025 exceeds 1024"},
		"4 GiB token":      {hello([]byte{0x80, 0x80, 0x80, 0x80, 0x10}), "token length 4294967296 exceeds 1024"},
		"varint overflow":  {hello([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}), "overflows"},
		"token truncated":  {hello([]byte{0x05, 'a'}), "truncated token"},
		"empty":            {nil, "truncated type"},
		"length truncated": {hello([]byte{0x80}), "truncated token length"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := transport.ParseHello(tc.b)
			require.ErrorIs(t, err, transport.ErrMalformed)
			require.Contains(t, err.Error(), tc.want)
		})
	}
	long := transport.Reject{Reason: strings.Repeat("x", transport.MaxReasonLen+1)}
	_, err := transport.ParseReject(long.Append(nil))
	require.ErrorContains(t, err, "reason length 513 exceeds 512")
	big := transport.Welcome{Payload: make([]byte, transport.MaxWelcomePayloadLen+1)}
	_, err = transport.ParseWelcome(big.Append(nil))
	require.ErrorIs(t, err, transport.ErrMalformed)
}

func TestHandshakeErrorMessages(t *testing.T) {
	err := transport.CheckHello(transport.Hello{Version: 1, ProtocolHash: 0x5678ef00}, 1, 0x1234abcd)
	require.EqualError(t, err, "protocol hash mismatch: server 0x1234abcd, client 0x5678ef00")
	err = transport.CheckHello(transport.Hello{Version: 2, ProtocolHash: 0x5678ef00}, 1, 0x1234abcd)
	require.EqualError(t, err, "protocol version mismatch: server 1, client 2")
	var he *transport.HandshakeError
	require.ErrorAs(t, err, &he)
	require.Equal(t, transport.HandshakeVersionMismatch, he.Kind)
	require.Equal(t, transport.CodeHandshakeFailed, he.CloseCode())
	require.NoError(t, transport.CheckHello(transport.Hello{Version: 1, ProtocolHash: 9}, 1, 9))

	rej := transport.Reject{Code: transport.CodeRejected, Version: 1, ProtocolHash: 9, Reason: "bad token"}
	require.EqualError(t, rej.Err(1, 9), "rejected by server: bad token")
	require.Equal(t, transport.CodeRejected, rej.Err(1, 9).CloseCode())
	require.EqualError(t, rej.Err(1, 8), "protocol hash mismatch: server 0x9, client 0x8")
	require.EqualError(t, rej.Err(2, 8), "protocol version mismatch: server 1, client 2")
}

func TestTruncateReason(t *testing.T) {
	require.Equal(t, "abc", transport.TruncateReason("abc", 5))
	require.Equal(t, "ab", transport.TruncateReason("abcdef", 2))
	require.Equal(t, "a", transport.TruncateReason("aé", 2), "no split UTF-8 sequence")
}

// handshakePair runs ServerHandshake and ClientHandshake over a simulated link, each in
// its own goroutine, advancing the clock from the test goroutine until both finish.
type handshakeResult struct {
	welcome   transport.Welcome
	clientErr error
	hello     transport.Hello
	serverErr error
	client    *sim.Conn
	server    transport.Conn
}

func handshakePair(t *testing.T, hello transport.Hello, version uint16, hash uint64, auth transport.Authenticator) handshakeResult {
	t.Helper()
	n := sim.NewNetwork(1, time.Unix(0, 0))
	l := n.Listen("server")
	cond := sim.Conditions{Latency: 20 * time.Millisecond, Loss: 0.2}
	c, err := n.Dial("server", sim.Link{Up: cond, Down: cond})
	require.NoError(t, err)
	s, ok := l.PollAccept()
	require.True(t, ok)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	type clientResult struct {
		w   transport.Welcome
		err error
	}
	type serverResult struct {
		h   transport.Hello
		err error
	}
	cr, sr := make(chan clientResult, 1), make(chan serverResult, 1)
	go func() {
		w, err := transport.ClientHandshake(ctx, c, hello)
		cr <- clientResult{w, err}
	}()
	go func() {
		h, err := transport.ServerHandshake(ctx, s, version, hash, auth, func(h transport.Hello) (transport.Welcome, error) {
			return transport.Welcome{ClientID: 3, Payload: []byte("tick=60")}, nil
		})
		sr <- serverResult{h, err}
	}()
	var c1 *clientResult
	var s1 *serverResult
	for c1 == nil || s1 == nil {
		select {
		case r := <-cr:
			c1 = &r
		case r := <-sr:
			s1 = &r
		case <-time.After(100 * time.Microsecond):
			n.Advance(5 * time.Millisecond)
		case <-ctx.Done():
			t.Fatal("handshake did not finish")
		}
	}
	n.Advance(time.Second) // let closes propagate
	return handshakeResult{c1.w, c1.err, s1.h, s1.err, c, s}
}

func TestHandshakeSuccess(t *testing.T) {
	hello := transport.Hello{Version: 1, ProtocolHash: 0xfeed, Token: []byte("secret")}
	auth := func(ctx context.Context, remote net.Addr, token []byte) error {
		if string(token) != "secret" {
			return errors.New("bad token")
		}
		return nil
	}
	r := handshakePair(t, hello, 1, 0xfeed, auth)
	w, cerr, h, serr, c, s := r.welcome, r.clientErr, r.hello, r.serverErr, r.client, r.server
	require.NoError(t, cerr)
	require.NoError(t, serr)
	require.Equal(t, transport.Welcome{ClientID: 3, Payload: []byte("tick=60")}, w)
	require.Equal(t, hello, h)
	require.NoError(t, c.Err())
	require.NoError(t, s.Err())
}

func TestHandshakeFailures(t *testing.T) {
	denyAll := func(ctx context.Context, remote net.Addr, token []byte) error {
		return errors.New("server full")
	}
	cases := []struct {
		name    string
		hello   transport.Hello
		auth    transport.Authenticator
		want    string
		kind    transport.HandshakeErrorKind
		code    transport.CloseCode
		authErr bool
	}{
		{"hash", transport.Hello{Version: 1, ProtocolHash: 0x5678ef00}, nil,
			"protocol hash mismatch: server 0x1234abcd, client 0x5678ef00", transport.HandshakeHashMismatch, transport.CodeHandshakeFailed, false},
		{"version", transport.Hello{Version: 2, ProtocolHash: 0x1234abcd}, nil,
			"protocol version mismatch: server 1, client 2", transport.HandshakeVersionMismatch, transport.CodeHandshakeFailed, false},
		{"auth", transport.Hello{Version: 1, ProtocolHash: 0x1234abcd}, denyAll,
			"rejected by server: server full", transport.HandshakeRejected, transport.CodeRejected, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := handshakePair(t, tc.hello, 1, 0x1234abcd, tc.auth)
			cerr, serr, c, s := r.clientErr, r.serverErr, r.client, r.server
			require.EqualError(t, cerr, tc.want, "client")
			require.EqualError(t, serr, tc.want, "server")
			var he *transport.HandshakeError
			require.ErrorAs(t, cerr, &he)
			require.Equal(t, tc.kind, he.Kind)
			for _, end := range []transport.Conn{c, s} {
				var ce *transport.CloseError
				require.ErrorAs(t, end.Err(), &ce)
				require.Equal(t, tc.code, ce.Code)
			}
		})
	}
}

func TestClientHandshakeRejectsGarbageAnswer(t *testing.T) {
	n := sim.NewNetwork(1, time.Unix(0, 0))
	l := n.Listen("server")
	c, _ := n.Dial("server", sim.Link{})
	s, _ := l.PollAccept()
	require.NoError(t, s.SendMessage([]byte{0x02, 0x01, 0x99})) // welcome whose payload length exceeds the data
	n.Advance(0)
	_, err := transport.ClientHandshake(context.Background(), c, transport.Hello{Version: 1})
	var he *transport.HandshakeError
	require.ErrorAs(t, err, &he)
	require.Equal(t, transport.HandshakeMalformed, he.Kind)
	require.ErrorIs(t, err, transport.ErrMalformed)
	n.Advance(0)
	var ce *transport.CloseError
	require.ErrorAs(t, s.Err(), &ce)
	require.Equal(t, transport.CodeHandshakeFailed, ce.Code)
	require.True(t, ce.Remote)
}

func TestClientHandshakeRejectsOversizeToken(t *testing.T) {
	n := sim.NewNetwork(1, time.Unix(0, 0))
	n.Listen("server")
	c, _ := n.Dial("server", sim.Link{})
	_, err := transport.ClientHandshake(context.Background(), c, transport.Hello{Token: make([]byte, transport.MaxTokenLen+1)})
	require.ErrorContains(t, err, "exceeds")
	require.Zero(t, c.Stats().MessagesSent)
}

// TestJudgeHello: the server's handshake policy as a table — what each first
// message gets, the close code, and what the client reports (the reason said
// once).
func TestJudgeHello(t *testing.T) {
	const version, hash = 3, 0xabc
	good := transport.Hello{Version: version, ProtocolHash: hash, Token: []byte("t")}.Append(nil)
	cases := []struct {
		name   string
		m      []byte
		refuse error
		kind   transport.HandshakeErrorKind // 0: accepted
		code   transport.CloseCode
		client string // the client's error
	}{
		{"accept", good, nil, 0, 0, ""},
		{"malformed", append(append([]byte{}, good...), 1, 'm', 1, 'r', 0), nil, transport.HandshakeMalformed, transport.CodeHandshakeFailed,
			"rejected by server: handshake failed: transport: malformed message: hello: 1 trailing bytes"},
		{"empty match", append(append([]byte{}, good...), 0), nil, transport.HandshakeMalformed, transport.CodeHandshakeFailed, ""},
		{"not a hello", []byte{byte(transport.MessageWelcome), 1, 0}, nil, transport.HandshakeMalformed, transport.CodeHandshakeFailed, ""},
		{"version first", transport.Hello{Version: 4, ProtocolHash: 1}.Append(nil), errors.New("full"), transport.HandshakeVersionMismatch,
			transport.CodeHandshakeFailed, "protocol version mismatch: server 3, client 4"},
		{"hash", transport.Hello{Version: version, ProtocolHash: 1}.Append(nil), errors.New("full"), transport.HandshakeHashMismatch,
			transport.CodeHandshakeFailed, "protocol hash mismatch: server 0xabc, client 0x1"},
		{"refused", good, errors.New("server full"), transport.HandshakeRejected, transport.CodeRejected, "rejected by server: server full"},
		{"long reason", good, errors.New(strings.Repeat("é", transport.MaxReasonLen)), transport.HandshakeRejected, transport.CodeRejected, ""},
		{"draining", good, &transport.CloseError{Code: transport.CodeDraining, Reason: "server draining: update"}, transport.HandshakeRejected,
			transport.CodeDraining, "rejected by server: server draining: update"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, he := transport.JudgeHello(tc.m, version, hash, tc.refuse)
			if tc.kind == 0 {
				require.Nil(t, he)
				require.Equal(t, []byte("t"), h.Token)
				return
			}
			require.NotNil(t, he)
			require.Equal(t, tc.kind, he.Kind)
			require.Equal(t, tc.code, he.CloseCode())
			if tc.refuse != nil && tc.kind == transport.HandshakeRejected {
				require.ErrorIs(t, he, tc.refuse)
			}
			rj := he.Reject(version, hash)
			require.Equal(t, tc.code, rj.Code)
			require.LessOrEqual(t, len(rj.Reason), transport.MaxReasonLen)
			// The Reject survives the wire, and the client's error says the
			// reason once.
			back, err := transport.ParseReject(rj.Append(nil))
			require.NoError(t, err)
			cv, ch := h.Version, h.ProtocolHash
			if tc.kind == transport.HandshakeMalformed {
				cv, ch = version, hash // a client of this build that sent junk
			}
			cerr := back.Err(cv, ch)
			if tc.client != "" {
				require.EqualError(t, cerr, tc.client)
			}
			said := 0
			if tc.code == transport.CodeDraining {
				// The client finds the code (Client.Err, errors.As).
				var ce *transport.CloseError
				require.ErrorAs(t, cerr, &ce)
				require.Equal(t, transport.CodeDraining, ce.Code)
				require.True(t, ce.Remote)
			}
			if tc.code == transport.CodeRejected || tc.code == transport.CodeDraining || tc.kind == transport.HandshakeMalformed {
				said = 1
			}
			require.Equal(t, said, strings.Count(cerr.Error(), "rejected by server"), cerr.Error())
		})
	}
}
