//go:build !js

package loopback

import (
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/tests/internal/harness"
	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/quic"
	"github.com/archenet/archenet/transport/webtransport"
	"github.com/archenet/archenet/transport/webtransport/webtransporttest"
	"github.com/mlange-42/arche/ecs"
	quicgo "github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	wt "github.com/quic-go/webtransport-go"
	"github.com/stretchr/testify/require"
)

// WTRig is Rig's real-time server loop with browser sessions: a replication
// server over a webtransport Listener, clients dialled natively with the pinned
// certificate hashes, as pages are.
type WTRig struct {
	*Rig
	WT    *webtransport.Listener
	Certs *webtransport.SelfSigned
}

// NewWebTransport returns a rig on a WebTransport listener (lcfg, with
// self-signed certificates) whose server's configuration tweak adjusts.
func NewWebTransport(t *testing.T, lcfg webtransport.Config, tweak func(*replication.ServerConfig)) *WTRig {
	return NewMixed(t, lcfg, false, tweak)
}

// NewMixed is NewWebTransport, with a QUIC listener beside the WebTransport one
// (transport.MergeListeners) if withQUIC: Rig.Dial then joins native players,
// and the control serves native players too.
func NewMixed(t *testing.T, lcfg webtransport.Config, withQUIC bool, tweak func(*replication.ServerConfig)) *WTRig {
	t.Setenv("QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING", "true")
	certs, err := webtransport.NewSelfSigned(webtransport.SelfSignedConfig{})
	require.NoError(t, err)
	lcfg.TLS = certs.TLSConfig()
	lcfg.Logger = harness.Quiet
	l, err := webtransporttest.Listen(&lcfg) // (its TCP twin held for a page of its origin)
	require.NoError(t, err)
	var ln transport.Listener = l
	var cert *quic.DevCert
	var ql *quic.Listener
	if withQUIC {
		cert, err = quic.GenerateDevCert(time.Hour)
		require.NoError(t, err)
		ql, err = quic.Listen("127.0.0.1:0", &quic.Config{TLS: cert.ServerTLS(), Logger: harness.Quiet})
		require.NoError(t, err)
		ln = transport.MergeListeners(ql, l)
	}
	r := newRig(t, ln, tweak)
	r.Cert, r.QUIC = cert, ql
	w := &WTRig{Rig: r, WT: l, Certs: certs}
	if withQUIC {
		r.startQUICControl()
		return w
	}
	cl, err := webtransport.Listen("127.0.0.1:0", &webtransport.Config{TLS: certs.TLSConfig(), Logger: harness.Quiet})
	require.NoError(t, err)
	r.startControl(cl, func() transport.Conn { return w.DialConnVia(cl.URL(""), webtransport.Config{}) })
	return w
}

// DialConn opens a session with cfg (the hashes added).
func (w *WTRig) DialConn(cfg webtransport.Config) *webtransport.Conn {
	return w.DialConnVia(w.WT.URL(""), cfg)
}

// DialConnVia opens a session to url (the listener's, or a proxy's).
func (w *WTRig) DialConnVia(url string, cfg webtransport.Config) *webtransport.Conn {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg.CertHashes = w.Certs.Hashes()
	cfg.Logger = harness.Quiet
	c, err := webtransport.Dial(ctx, url, &cfg)
	require.NoError(w.T, err)
	w.T.Cleanup(func() { _ = c.Close() })
	return c
}

// RawSession opens a session with webtransport-go directly (qcfg its QUIC settings),
// bypassing Dial and Conn, so a test can misbehave: the message stream is open and
// its preamble written.
func (w *WTRig) RawSession(qcfg *quicgo.Config) (*wt.Session, *wt.Stream) {
	t := w.T
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	tr := &quicgo.Transport{Conn: udp}
	t.Cleanup(func() { tr.Close(); udp.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	qcfg.EnableDatagrams, qcfg.EnableStreamResetPartialDelivery = true, true
	tlsConf := &tls.Config{InsecureSkipVerify: true, NextProtos: []string{http3.NextProtoH3}} // (a misbehaving peer)
	qc, err := tr.Dial(ctx, w.WT.Addr(), tlsConf, qcfg)
	require.NoError(t, err)
	t.Cleanup(func() { qc.CloseWithError(0, "") })
	cc, err := (&wt.Transport{}).NewClientConn(qc)
	require.NoError(t, err)
	_, sess, err := cc.Dial(ctx, w.WT.URL(""), nil)
	require.NoError(t, err)
	st, err := sess.OpenStreamSync(ctx)
	require.NoError(t, err)
	_, err = st.Write([]byte{0xA1})
	require.NoError(t, err)
	return sess, st
}

// Dial connects a well-behaved replication client.
func (w *WTRig) Dial() int { return w.DialVia(w.WT.URL("")) }

// DialVia connects a well-behaved replication client to url.
func (w *WTRig) DialVia(url string) int {
	conn := w.DialConnVia(url, webtransport.Config{})
	wd := ecs.NewWorld()
	c, err := replication.NewClient(&wd, conn, replication.ClientConfig{Registry: w.Registry, Logger: harness.Quiet, Timeout: w.ClientTimeout})
	require.NoError(w.T, err)
	w.Clients = append(w.Clients, &harness.ClientSide{World: &wd, Client: c})
	i := len(w.Clients) - 1
	w.Active[i] = true
	return i
}
