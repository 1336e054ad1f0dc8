//go:build !js

package websocket_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	ws "github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/transporttest"
	"github.com/archenet/archenet/transport/websocket"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// listen starts a Listener on loopback, closed at the test's end.
func listen(t *testing.T, cfg websocket.Config) *websocket.Listener {
	t.Helper()
	cfg.Logger = quiet
	l, err := websocket.Listen("127.0.0.1:0", &cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// dial connects a client to l and returns both ends.
func dial(t *testing.T, l *websocket.Listener, cfg websocket.Config) (*websocket.Conn, transport.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg.Logger = quiet
	c, err := websocket.Dial(ctx, l.URL(""), &cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	s, err := l.Accept(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return c, s
}

func TestConformance(t *testing.T) {
	transporttest.Run(t, func(t *testing.T) transporttest.Pair {
		l := listen(t, websocket.Config{})
		c, s := dial(t, l, websocket.Config{})
		return transporttest.Pair{Client: c, Server: s, Step: func() { time.Sleep(time.Millisecond) }, MaxSteps: 10000, CloseFlushes: true}
	})
}

// raw opens a WebSocket to l without the package's Conn, to misbehave.
func raw(t *testing.T, l *websocket.Listener, origin string) (*ws.Conn, *http.Response, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h := http.Header{}
	if origin != "" {
		h.Set("Origin", origin)
	}
	c, rsp, err := ws.Dial(ctx, l.URL(""), &ws.DialOptions{HTTPHeader: h})
	if c != nil {
		c.SetReadLimit(1 << 20)
		t.Cleanup(func() { _ = c.CloseNow() })
	}
	return c, rsp, err
}

// A page from another origin is refused before the upgrade (403); the same
// origin, an allowed one, and a native client (no Origin) get in.
func TestOrigins(t *testing.T) {
	l := listen(t, websocket.Config{AllowedOrigins: []string{"https://game.example"}})
	_, rsp, err := raw(t, l, "https://evil.example")
	require.Error(t, err)
	require.Equal(t, http.StatusForbidden, rsp.StatusCode)
	require.Equal(t, uint64(1), l.Refused().Origin)
	for _, o := range []string{"", "https://game.example", "http://" + l.Addr().String()} {
		_, _, err := raw(t, l, o)
		require.NoError(t, err, "origin %q", o)
	}
}

// closeOf waits for the server end of a misbehaving peer to close and
// returns why.
func closeOf(t *testing.T, l *websocket.Listener) *transport.CloseError {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := l.Accept(ctx)
	require.NoError(t, err)
	select {
	case <-s.Done():
	case <-ctx.Done():
		t.Fatal("the misbehaving peer was not closed")
	}
	var ce *transport.CloseError
	require.True(t, errors.As(s.Err(), &ce), "%v", s.Err())
	return ce
}

// A peer that breaks the format is closed with a reason that says how; it
// learns the code and reason too.
func TestHostilePeer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		code   transport.CloseCode
		reason string
		send   func(ctx context.Context, c *ws.Conn) error
	}{
		{"text message", transport.CodeProtocolError, "text message", func(ctx context.Context, c *ws.Conn) error {
			return c.Write(ctx, ws.MessageText, []byte("hi"))
		}},
		{"unknown kind", transport.CodeProtocolError, "unknown kind 0x09", func(ctx context.Context, c *ws.Conn) error {
			return c.Write(ctx, ws.MessageBinary, []byte{9, 1, 2})
		}},
		{"empty message", transport.CodeProtocolError, "empty message", func(ctx context.Context, c *ws.Conn) error {
			return c.Write(ctx, ws.MessageBinary, nil)
		}},
		{"oversize handshake", transport.CodeMessageTooLarge, "handshake message exceeds", func(ctx context.Context, c *ws.Conn) error {
			return c.Write(ctx, ws.MessageBinary, append([]byte{1}, make([]byte, transport.MaxHandshakeMessageSize+1)...))
		}},
		{"oversize datagram", transport.CodeProtocolError, "datagram exceeds the maximum of 1200", func(ctx context.Context, c *ws.Conn) error {
			return c.Write(ctx, ws.MessageBinary, append([]byte{2}, make([]byte, 1201)...))
		}},
		{"datagram flood", transport.CodeFlood, "datagram flood", func(ctx context.Context, c *ws.Conn) error {
			for range 3000 {
				if err := c.Write(ctx, ws.MessageBinary, []byte{2, 0}); err != nil {
					return nil // (closed under it)
				}
			}
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := listen(t, websocket.Config{})
			c, _, err := raw(t, l, "")
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			require.NoError(t, tc.send(ctx, c))
			ce := closeOf(t, l)
			require.Equal(t, tc.code, ce.Code, ce.Reason)
			require.Contains(t, ce.Reason, tc.reason)
			// The peer reads the close message: code and reason.
			for {
				_, b, err := c.Read(ctx)
				if err != nil {
					break
				}
				if len(b) > 3 && b[0] == 3 {
					require.Equal(t, uint16(tc.code), uint16(b[1])<<8|uint16(b[2]))
					require.True(t, strings.Contains(string(b[3:]), tc.reason))
					return
				}
			}
			t.Fatal("no close message")
		})
	}
}
