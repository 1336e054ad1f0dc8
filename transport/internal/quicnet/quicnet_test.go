package quicnet

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"testing"

	quicgo "github.com/quic-go/quic-go"
	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/internal/connio"
)

func TestServerTLS(t *testing.T) {
	require.Nil(t, ServerTLS(nil, "p"))
	require.Nil(t, ServerTLS(&tls.Config{}, "p"), "no certificate")
	in := &tls.Config{Certificates: []tls.Certificate{{}}, NextProtos: []string{"other"}}
	out := ServerTLS(in, "p")
	require.Equal(t, []string{"p"}, out.NextProtos)
	require.Equal(t, uint16(tls.VersionTLS13), out.MinVersion)
	require.Equal(t, []string{"other"}, in.NextProtos, "a copy")
	require.NotNil(t, ServerTLS(&tls.Config{GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return nil, nil }}, "p"))
}

func TestClientTLS(t *testing.T) {
	out := ClientTLS(nil, "p", "example.com")
	require.Equal(t, []string{"p"}, out.NextProtos)
	require.Equal(t, uint16(tls.VersionTLS13), out.MinVersion)
	require.Equal(t, "example.com", out.ServerName)
	in := &tls.Config{ServerName: "mine"}
	require.Equal(t, "mine", ClientTLS(in, "p", "example.com").ServerName)
	require.Nil(t, in.NextProtos, "a copy")
}

func TestErrors(t *testing.T) {
	idle := fmt.Errorf("read: %w", &quicgo.IdleTimeoutError{})
	require.True(t, IsTimeout(idle))
	require.True(t, IsTimeout(&quicgo.HandshakeTimeoutError{}))
	require.True(t, IsTimeout(context.DeadlineExceeded))
	require.False(t, IsTimeout(errors.New("other")))

	require.True(t, Refused(&quicgo.TransportError{Remote: true, ErrorCode: quicgo.ConnectionRefused}))
	require.False(t, Refused(&quicgo.TransportError{ErrorCode: quicgo.ConnectionRefused}), "refused by this end")

	require.Equal(t, &transport.CloseError{Code: transport.CodeNormal}, CloseError(nil, "quic"))
	require.Equal(t, transport.CodeTimeout, CloseError(idle, "quic").Code)
	require.Equal(t, &transport.CloseError{Code: transport.CodeInternal, Reason: "quic: boom"}, CloseError(errors.New("boom"), "quic"))

	var tl *transport.DatagramTooLargeError
	require.ErrorAs(t, DatagramError(&quicgo.DatagramTooLargeError{MaxDatagramPayloadSize: 1100}, 1300), &tl)
	require.Equal(t, transport.DatagramTooLargeError{Size: 1300, Max: 1100}, *tl)
	require.NoError(t, DatagramError(nil, 1))
	require.Zero(t, testing.AllocsPerRun(100, func() { _ = DatagramError(nil, 1) }), "a datagram sent allocates nothing")
}

// A listener's socket has its admission budget; a dialer's has none. Close
// closes the socket.
func TestSocket(t *testing.T) {
	var s connio.Settings
	require.NoError(t, s.ResolveLimits("test"))
	l, err := Listen("127.0.0.1:0", &s)
	require.NoError(t, err)
	require.NotNil(t, l.Adm)
	d, err := Bind(&net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	require.Nil(t, d.Adm)
	require.NoError(t, d.Close(nil))
	boom := errors.New("boom")
	require.Equal(t, boom, l.Close(boom), "the caller's error first")
	_, err = l.UDP.WriteTo([]byte{0}, d.UDP.LocalAddr())
	require.ErrorIs(t, err, net.ErrClosed)
}

// Config sets handshake-sized windows on a server only.
func TestConfig(t *testing.T) {
	s := connio.Settings{KeepAlivePeriod: -1}
	require.NoError(t, s.ResolveLimits("test"))
	server := Config(&s, true)
	require.True(t, server.EnableDatagrams)
	require.Equal(t, s.HandshakeTimeout, server.HandshakeIdleTimeout)
	require.Equal(t, s.IdleTimeout, server.MaxIdleTimeout)
	require.EqualValues(t, s.HandshakeWindow, server.InitialStreamReceiveWindow)
	require.NotNil(t, server.AllowConnectionWindowIncrease)
	require.Zero(t, server.KeepAlivePeriod, "negative: none")
	client := Config(&s, false)
	require.Zero(t, client.InitialStreamReceiveWindow)
	require.Nil(t, client.AllowConnectionWindowIncrease)
}
