package sim_test

import (
	"fmt"
	"time"

	"github.com/archenet/archenet/transport/sim"
)

func Example() {
	n := sim.NewNetwork(1, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	l := n.Listen("server")
	client, err := n.Dial("server", sim.Link{
		Up:   sim.Conditions{Latency: 40 * time.Millisecond},
		Down: sim.Conditions{Latency: 40 * time.Millisecond},
	})
	if err != nil {
		panic(err)
	}
	server, _ := l.PollAccept()

	client.SendDatagram([]byte("input frame 1"))
	client.SendMessage([]byte("hello"))

	n.Advance(39 * time.Millisecond)
	_, ok := server.PollDatagram()
	fmt.Println("after 39ms:", ok)

	n.Advance(time.Millisecond)
	d, _ := server.PollDatagram()
	m, _ := server.PollMessage()
	fmt.Printf("after 40ms: %q %q\n", d, m)
	fmt.Println("rtt:", server.Stats().RTT)
	// Output:
	// after 39ms: false
	// after 40ms: "input frame 1" "hello"
	// rtt: 80ms
}
