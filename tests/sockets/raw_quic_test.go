package sockets_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/archenet/archenet/transport/quic"
	quicgo "github.com/quic-go/quic-go"
	"github.com/stretchr/testify/require"
)

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
	return newRawTransportOn(t, net.IPv4(127, 0, 0, 1))
}

// newRawTransportOn is newRawTransport from the loopback address ip.
func newRawTransportOn(t *testing.T, ip net.IP) *quicgo.Transport {
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: ip})
	require.NoError(t, err)
	tr := &quicgo.Transport{Conn: udp}
	t.Cleanup(func() { tr.Close(); udp.Close() })
	return tr
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
