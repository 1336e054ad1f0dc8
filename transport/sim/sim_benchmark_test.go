package sim_test

import (
	"testing"
	"time"

	"github.com/archenet/archenet/transport/sim"
)

// BenchmarkDatagram measures one datagram sent, scheduled, delivered and polled on a
// link with latency, jitter and loss.
func BenchmarkDatagram(b *testing.B) {
	cond := sim.Conditions{Latency: 20 * time.Millisecond, Jitter: 5 * time.Millisecond, Loss: 0.01}
	n := sim.NewNetwork(1, time.Unix(0, 0))
	l := n.Listen("server")
	c, _ := n.Dial("server", sim.Link{Up: cond, Down: cond})
	s, _ := l.PollAccept()
	payload := make([]byte, 1200)
	b.ReportAllocs()
	for b.Loop() {
		c.SendDatagram(payload)
		n.Advance(time.Millisecond)
		s.PollDatagram()
	}
}

// BenchmarkMessage measures one reliable message through a lossy link.
func BenchmarkMessage(b *testing.B) {
	cond := sim.Conditions{Latency: 20 * time.Millisecond, Loss: 0.05}
	n := sim.NewNetwork(1, time.Unix(0, 0))
	l := n.Listen("server")
	c, _ := n.Dial("server", sim.Link{Up: cond, Down: cond})
	s, _ := l.PollAccept()
	payload := make([]byte, 200)
	b.ReportAllocs()
	for b.Loop() {
		c.SendMessage(payload)
		n.Advance(time.Millisecond)
		s.PollMessage()
	}
}
