//go:build !js

package websocket_test

import (
	"context"
	"fmt"
	"time"

	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/websocket"
)

// A server listening for WebSocket sessions and a native client: the same
// transport.Conn as over QUIC, so replication.NewServer and NewClient take
// them as they are (a page dials with websocket.DialPage).
func Example() {
	l, _ := websocket.Listen("127.0.0.1:0", &websocket.Config{Logger: quiet})
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	client, _ := websocket.Dial(ctx, l.URL(""), &websocket.Config{Logger: quiet})
	server, _ := l.Accept(ctx)
	_ = client.SendMessage([]byte("hello"))
	m, _ := server.ReceiveMessage(ctx)
	fmt.Printf("server got %q\n", m)

	_ = server.CloseWithReason(transport.CodeApplication+1, "match over")
	<-client.Done()
	fmt.Println("client:", client.Err())
	// Output:
	// server got "hello"
	// client: transport: connection closed by peer (application+1): match over
}
