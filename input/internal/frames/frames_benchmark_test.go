package frames

import (
	"math/rand/v2"
	"testing"

	"github.com/archenet/archenet/replication/bitio"
)

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

// steadyScript returns a codec of fpsInput and the input script of package
// inputlog's steady-state benchmarks: a held key set (forward + sprint)
// with a moving mouse.
func steadyScript(b *testing.B) (*Codec[fpsInput], func(tick uint32) fpsInput) {
	c, err := New[fpsInput](Config{})
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
	return c, next
}

// BenchmarkNewFrameBits: the marginal cost of one frame in steady state
// (held keys, moving mouse): the bits a section grows by per extra frame.
func BenchmarkNewFrameBits(b *testing.B) {
	b.ReportAllocs()
	c, next := steadyScript(b)
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
