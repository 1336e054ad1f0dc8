//go:build !js

package webtransport_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/transporttest"
	"github.com/archenet/archenet/transport/webtransport"
)

type env struct {
	certs *webtransport.SelfSigned
	l     *webtransport.Listener
}

func newEnv(t testing.TB, cfg webtransport.Config) *env {
	t.Helper()
	return newEnvWith(t, cfg, func(c *webtransport.Config) (*webtransport.Listener, error) {
		return webtransport.Listen("127.0.0.1:0", c)
	})
}

// newEnvWith is newEnv with the listener listen makes (webtransporttest.Listen
// for a page of the session's origin).
func newEnvWith(t testing.TB, cfg webtransport.Config, listen func(*webtransport.Config) (*webtransport.Listener, error)) *env {
	t.Helper()
	t.Setenv("QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING", "true")
	certs, err := webtransport.NewSelfSigned(webtransport.SelfSignedConfig{})
	require.NoError(t, err)
	cfg.TLS = certs.TLSConfig()
	l, err := listen(&cfg)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	return &env{certs: certs, l: l}
}

func (e *env) url() string { return e.l.URL("") }

func (e *env) dial(t testing.TB, cfg webtransport.Config) (*webtransport.Conn, transport.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg.CertHashes = e.certs.Hashes()
	c, err := webtransport.Dial(ctx, e.url(), &cfg)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	s, err := e.l.Accept(ctx)
	require.NoError(t, err)
	return c, s
}

func TestConformance(t *testing.T) {
	transporttest.Run(t, func(t *testing.T) transporttest.Pair {
		e := newEnv(t, webtransport.Config{})
		c, s := e.dial(t, webtransport.Config{})
		return transporttest.Pair{Client: c, Server: s, Step: func() { time.Sleep(time.Millisecond) }, MaxSteps: 10000}
	})
}

// A Dial pinned to hashes the server's certificate is not among fails with
// ErrCertNotPinned and a message that says what to do.
func TestDialStaleHash(t *testing.T) {
	e := newEnv(t, webtransport.Config{})
	other, err := webtransport.NewSelfSigned(webtransport.SelfSignedConfig{})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = webtransport.Dial(ctx, e.url(), &webtransport.Config{CertHashes: other.Hashes()})
	require.ErrorIs(t, err, webtransport.ErrCertNotPinned)
	require.Contains(t, err.Error(), "did the server rotate it?")
	t.Log(err)
}

// Without hashes, a native Dial verifies the chain: a self-signed certificate
// the client does not trust is refused.
func TestDialVerifiesWithoutHashes(t *testing.T) {
	e := newEnv(t, webtransport.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := webtransport.Dial(ctx, e.url(), &webtransport.Config{})
	require.Error(t, err)
	require.Contains(t, err.Error(), "certificate")
}

// A session request from a page of another origin is refused with 403 unless
// the origin is listed; native requests (no Origin) are admitted.
func TestOriginPolicy(t *testing.T) {
	e := newEnv(t, webtransport.Config{AllowedOrigins: []string{"http://127.0.0.1:9999"}})
	_, _ = e.dial(t, webtransport.Config{}) // no Origin: admitted
	for _, tc := range []struct {
		origin string
		ok     bool
	}{
		{"http://127.0.0.1:9999", true},
		{"https://evil.example", false},
		{"http://127.0.0.1:9998", false},
	} {
		err := dialWithOrigin(t, e, tc.origin)
		if tc.ok {
			require.NoError(t, err, tc.origin)
		} else {
			require.ErrorContains(t, err, "403", tc.origin)
		}
	}
}

func dialWithOrigin(t *testing.T, e *env, origin string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := webtransport.DialWithHeader(ctx, e.url(), &webtransport.Config{CertHashes: e.certs.Hashes()}, http.Header{"Origin": {origin}})
	if err != nil {
		return err
	}
	c.Close()
	return nil
}

// A closed listener makes the client see the close code.
func TestListenerCloseReachesClient(t *testing.T) {
	e := newEnv(t, webtransport.Config{})
	c, _ := e.dial(t, webtransport.Config{})
	require.NoError(t, e.l.Close())
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("client not closed")
	}
	var ce *transport.CloseError
	require.True(t, errors.As(c.Err(), &ce))
	require.Equal(t, transport.CodeNormal, ce.Code)
	require.True(t, ce.Remote)
	require.Equal(t, "listener closed", ce.Reason)
}
