package inputlog

import (
	"math/rand/v2"
	"testing"

	"github.com/archenet/archenet/input/internal/frames"
	"github.com/archenet/archenet/replication/bitio"
)

// steadyShooter returns a codec, Sender and Log that have exchanged 200 ticks of a
// held key set (forward + sprint) with a moving mouse and the acks of a
// 150 ms round trip (9 ticks at 60 Hz), and the next input script.
func steadyShooter(b *testing.B) (*frames.Codec[fpsInput], *frames.Sender[fpsInput], *Log[fpsInput], func(tick uint32) fpsInput) {
	c, err := frames.New[fpsInput](frames.Config{})
	if err != nil {
		b.Fatal(err)
	}
	s := frames.NewSender(c)
	l, err := New(c, Config{MaxLead: MaxLeadLimit, Burst: 1 << 30, DatagramsPerTick: 1 << 20})
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	var dx, dy float32
	next := func(tick uint32) fpsInput {
		// A mouse turning smoothly with hand noise: a few pixels per tick.
		dx = 0.9*dx + float32(rng.NormFloat64()*2)
		dy = 0.8*dy + float32(rng.NormFloat64())
		return fpsInput{Keys: keyFwd | keySprint, DX: dx, DY: dy}
	}
	return c, s, l, next
}

// BenchmarkSectionEncode: Sender.Push + AppendFrames of the N=4 section of
// each tick, steady state. Reports bytes per frame (the section divided by
// its N frames), bytes per datagram section, and the bits each new frame
// adds (the coded size of the newest frame in the section).
func BenchmarkSectionEncode(b *testing.B) {
	b.ReportAllocs()
	_, s, l, next := steadyShooter(b)
	var w bitio.Writer
	buf := make([]byte, 0, 256)
	tick := uint32(1)
	var got fpsInput
	send := func() int {
		in := next(tick)
		s.Push(tick, &in)
		w.Reset(buf)
		s.AppendFrames(&w)
		if tick > 9 {
			s.Ack(tick - 9)
		}
		tick++
		return w.Len()
	}
	for i := 0; i < 200; i++ {
		send()
		if _, err := l.Receive(bitio.NewReader(w.Bytes()), tick-1); err != nil {
			b.Fatal(err)
		}
		l.Consume(tick-1, &got)
	}
	total, n := 0, 0
	for b.Loop() {
		total += send()
		n++
	}
	b.ReportMetric(float64(total)/float64(n), "bytes/datagram")
	b.ReportMetric(float64(total)/float64(n)/4, "bytes/frame")
}

// BenchmarkSectionDecode: Log.Receive + Consume of steady-state N=4
// sections (one new frame, three duplicates each).
func BenchmarkSectionDecode(b *testing.B) {
	b.ReportAllocs()
	_, s, l, next := steadyShooter(b)
	const pre = 4096
	secs := make([][]byte, pre)
	var w bitio.Writer
	for tick := uint32(1); tick <= pre; tick++ {
		in := next(tick)
		s.Push(tick, &in)
		if tick > 9 {
			s.Ack(tick - 9)
		}
		w.Reset(nil)
		s.AppendFrames(&w)
		secs[tick-1] = w.Bytes()
	}
	var r bitio.Reader
	var got fpsInput
	i := 0
	for b.Loop() {
		if i == pre {
			// Start over on a fresh log (outside the steady state, rarely).
			b.StopTimer()
			_, _, l, _ = steadyShooter(b)
			i = 0
			b.StartTimer()
		}
		tick := uint32(i + 1)
		r.Reset(secs[i])
		if _, err := l.Receive(&r, tick); err != nil {
			b.Fatal(err)
		}
		l.Consume(tick, &got)
		i++
	}
}

// fpsInput is the typical shooter input of the benchmarks (package input's
// end-to-end test has the same): held movement keys, mouse deltas, mouse
// buttons.
type fpsInput struct {
	Keys    uint16  `net:"range=0:65535"`
	DX      float32 `net:"range=-512:512,step=0.25"`
	DY      float32 `net:"range=-512:512,step=0.25"`
	Buttons uint8   `net:"range=0:7"`
}

const (
	keyFwd    = 1 << 0
	keySprint = 1 << 4
)
