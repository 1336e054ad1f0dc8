//go:build !js

package webtransport_test

import (
	"context"
	"fmt"
	"time"

	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/webtransport"
)

// A server for browsers on 127.0.0.1 with a rotating self-signed certificate, and a
// native client pinned to its hashes, as a page is: the archenet handshake, one
// message and one datagram.
func Example() {
	certs, err := webtransport.NewSelfSigned(webtransport.SelfSignedConfig{})
	if err != nil {
		panic(err)
	}
	l, err := webtransport.Listen("127.0.0.1:0", &webtransport.Config{TLS: certs.TLSConfig()})
	if err != nil {
		panic(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	served := make(chan transport.Conn)
	go func() {
		s, err := l.Accept(ctx)
		if err != nil {
			panic(err)
		}
		_, err = transport.ServerHandshake(ctx, s, 1, 0xabc, nil, func(transport.Hello) (transport.Welcome, error) {
			return transport.Welcome{ClientID: 1}, nil
		})
		if err != nil {
			panic(err)
		}
		served <- s
	}()

	// A page gets these from EndpointHandler's JSON.
	url, hashes := l.URL(""), certs.Hashes()
	c, err := webtransport.Dial(ctx, url, &webtransport.Config{CertHashes: hashes})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	w, err := transport.ClientHandshake(ctx, c, transport.Hello{Version: 1, ProtocolHash: 0xabc})
	if err != nil {
		panic(err)
	}
	fmt.Println("client id:", w.ClientID)

	s := <-served
	s.SendMessage([]byte("spawn 42"))
	m, _ := c.ReceiveMessage(ctx)
	c.SendDatagram([]byte("input 1"))
	d, _ := s.ReceiveDatagram(ctx)
	fmt.Printf("%s / %s\n", m, d)
	fmt.Println("max datagram:", c.MaxDatagramSize())
	// Output:
	// client id: 1
	// spawn 42 / input 1
	// max datagram: 1200
}
