package netem_test

import (
	"fmt"
	"net"
	"time"

	"github.com/archenet/archenet/transport/netem"
)

// A datagram crosses the proxy with 20 ms of one-way latency.
func Example() {
	server, _ := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	defer server.Close()
	proxy, _ := netem.Listen(server.LocalAddr().String(), 1)
	defer proxy.Close()
	path := netem.Conditions{Latency: 20 * time.Millisecond}
	proxy.SetConditions(path, path)

	client, _ := net.DialUDP("udp", nil, proxy.Addr().(*net.UDPAddr))
	defer client.Close()
	start := time.Now()
	client.Write([]byte("hello"))
	buf := make([]byte, 64)
	server.SetReadDeadline(time.Now().Add(time.Second))
	n, _, _ := server.ReadFromUDP(buf)
	fmt.Printf("%s after ≥ 20 ms: %v\n", buf[:n], time.Since(start) >= 20*time.Millisecond)
	// Output: hello after ≥ 20 ms: true
}
