package input

import (
	"math/rand/v2"
	"testing"

	"github.com/archenet/archenet/replication/bitio"
)

// steadyShooter returns a Sender and Log that have exchanged 200 ticks of a
// held key set (forward + sprint) with a moving mouse and the acks of a
// 150 ms round trip (9 ticks at 60 Hz), and the next input script.
func steadyShooter(b *testing.B) (*codec[fpsInput], *sender[fpsInput], *inputLog[fpsInput], func(tick uint32) fpsInput) {
	c, err := newCodec[fpsInput](Config{})
	if err != nil {
		b.Fatal(err)
	}
	s := newSender(c)
	l, err := newInputLog(c, LogConfig{MaxLead: MaxLeadLimit, Burst: 1 << 30, DatagramsPerTick: 1 << 20})
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

// BenchmarkNewFrameBits: the marginal cost of one frame in steady state
// (held keys, moving mouse): the bits a section grows by per extra frame.
func BenchmarkNewFrameBits(b *testing.B) {
	b.ReportAllocs()
	c, _, _, next := steadyShooter(b)
	nl := c.NumLanes()
	const frames = 32
	lanes := make([]uint64, frames*nl)
	var w bitio.Writer
	tick := uint32(100)
	total, count := 0, 0
	for b.Loop() {
		for i := 0; i < frames; i++ {
			in := next(tick)
			c.Quantize(&in, lanes[i*nl:])
		}
		w.Reset(w.Bytes()[:0])
		c.AppendFrames(&w, tick, lanes[:nl], nil, 0, nil)
		one := w.BitLen()
		w.Reset(w.Bytes()[:0])
		c.AppendFrames(&w, tick, lanes, nil, 0, nil)
		total += w.BitLen() - one
		count += frames - 1
	}
	b.ReportMetric(float64(total)/float64(count), "bits/frame")
}

// BenchmarkPredict: one predicted tick (step + rounding + history).
func BenchmarkPredict(b *testing.B) {
	b.ReportAllocs()
	p, _ := newPlayerPredictorB(b)
	in := fpsInput{Keys: keyFwd, DX: 2}
	tick := uint32(1)
	for b.Loop() {
		p.Predict(tick, &in)
		tick++
	}
}

// BenchmarkReconcileReplay: a correction replaying 9 ticks (150 ms at 60 Hz).
func BenchmarkReconcileReplay(b *testing.B) {
	b.ReportAllocs()
	p, _ := newPlayerPredictorB(b)
	in := fpsInput{Keys: keyFwd, DX: 2}
	for tick := uint32(1); tick <= 10; tick++ {
		p.Predict(tick, &in)
	}
	auth := player{X: 1}
	tick := uint32(10)
	for b.Loop() {
		tick++
		p.Predict(tick, &in)
		auth.X = -auth.X
		if c := p.Reconcile(tick-9, tick-9, &auth); c.Status != ReconcileCorrected {
			b.Fatal(c.Status)
		}
	}
}
