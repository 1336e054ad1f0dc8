package quic_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/archenet/archenet/transport/quic"
)

// BenchmarkDatagramRoundTrip measures one datagram client → server → client over loopback.
func BenchmarkDatagramRoundTrip(b *testing.B) {
	e := newEnv(b, quic.Config{DatagramRateLimit: -1})
	c, s := e.dial(b, quic.Config{DatagramRateLimit: -1})
	ctx := context.Background()
	go func() {
		for {
			d, err := s.ReceiveDatagram(ctx)
			if err != nil {
				return
			}
			s.SendDatagram(d)
		}
	}()
	payload := make([]byte, 100)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := c.SendDatagram(payload); err != nil {
			b.Fatal(err)
		}
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := c.ReceiveDatagram(rctx)
		cancel()
		if err != nil {
			b.Fatal(err) // a lost datagram: unlikely on loopback
		}
	}
}

// BenchmarkDatagramThroughput1200 measures sending 1200-byte datagrams paced in bursts
// of 50 (waiting for the receiver to catch up), reporting delivered datagrams per second.
func BenchmarkDatagramThroughput1200(b *testing.B) {
	e := newEnv(b, quic.Config{DatagramRateLimit: -1})
	c, s := e.dial(b, quic.Config{})
	var got atomic.Int64
	go func() {
		for {
			if _, err := s.ReceiveDatagram(context.Background()); err != nil {
				return
			}
			got.Add(1)
		}
	}()
	payload := make([]byte, 1200)
	b.SetBytes(1200)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	sent := 0
	for b.Loop() {
		if err := c.SendDatagram(payload); err != nil {
			b.Fatal(err)
		}
		sent++
		if sent%50 == 0 {
			deadline := time.Now().Add(20 * time.Millisecond)
			for got.Load() < int64(sent)-10 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Microsecond)
			}
		}
	}
	elapsed := time.Since(start)
	b.ReportMetric(float64(got.Load())/elapsed.Seconds(), "delivered/s")
	b.ReportMetric(100*float64(int64(sent)-got.Load())/float64(sent), "%lost")
}
