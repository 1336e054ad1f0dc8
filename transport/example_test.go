package transport_test

import (
	"errors"
	"fmt"

	"github.com/archenet/archenet/transport"
)

// The handshake codec, as a game loop drives it without blocking: encode the client's
// Hello, decode and check it on the server, and report a mismatch on both sides.
func ExampleCheckHello() {
	const serverVersion, serverHash = 1, 0x1234abcd
	wire := transport.Hello{Version: 1, ProtocolHash: 0x5678ef00, Token: []byte("t")}.Append(nil)
	fmt.Printf("hello: % x\n", wire)

	h, err := transport.ParseHello(wire)
	if err != nil {
		panic(err)
	}
	if err := transport.CheckHello(h, serverVersion, serverHash); err != nil {
		fmt.Println("server:", err)
		var he *transport.HandshakeError
		errors.As(err, &he)
		reject := transport.Reject{Code: he.CloseCode(), Version: serverVersion, ProtocolHash: serverHash, Reason: err.Error()}
		r, _ := transport.ParseReject(reject.Append(nil))
		fmt.Println("client:", r.Err(h.Version, h.ProtocolHash))
	}
	// Output:
	// hello: 01 00 01 00 00 00 00 56 78 ef 00 01 74
	// server: protocol hash mismatch: server 0x1234abcd, client 0x5678ef00
	// client: protocol hash mismatch: server 0x1234abcd, client 0x5678ef00
}
