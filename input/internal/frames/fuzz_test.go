package frames

import (
	"math/rand/v2"
	"testing"

	"github.com/archenet/archenet/replication/bitio"
)

// FuzzReadFrames decodes arbitrary bytes as an input section, against a
// log that holds a few Baselines. It must never panic or allocate by an
// untrusted count; whatever decodes must re-encode (against the same
// baseline) to a section that decodes to the same frames.
func FuzzReadFrames(f *testing.F) {
	c, err := New[shooterInput](Config{})
	if err != nil {
		f.Fatal(err)
	}
	nl := c.NumLanes()
	rng := rand.New(rand.NewPCG(5, 6))
	bases := mapBaselines{}
	var in shooterInput
	frames := make([]uint64, 40*nl)
	for i := 0; i < 40; i++ {
		in = randomInput(rng, in)
		c.Quantize(&in, frames[i*nl:])
		bases[uint32(1000+i)] = frames[i*nl : (i+1)*nl]
	}
	views := []uint16{37, 37, 38, 36}
	for _, n := range []int{1, 2, 4} {
		for _, back := range []int{0, 1, 5, 20} {
			for _, vs := range [][]uint16{nil, views[:n]} {
				var w bitio.Writer
				start := 30
				first := uint32(1000 + start)
				if back == 0 {
					c.AppendFrames(&w, first, frames[start*nl:(start+n)*nl], vs, 0, nil)
				} else {
					bt := first - uint32(back)
					c.AppendFrames(&w, first, frames[start*nl:(start+n)*nl], vs, bt, bases[bt])
				}
				f.Add(w.Bytes())
			}
		}
	}
	f.Add([]byte{})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		var dst, back Section
		if err := c.ReadFrames(bitio.NewReader(data), 1030, bases, &dst); err != nil {
			return
		}
		if dst.Count < 1 || dst.Count > c.Redundancy() {
			t.Fatalf("count %d", dst.Count)
		}
		var base []uint64
		if dst.Based {
			base, _ = bases.Baseline(dst.BaseTick)
		}
		var w bitio.Writer
		var vs []uint16
		if dst.HasView {
			vs = dst.views[:dst.Count]
		}
		c.AppendFrames(&w, dst.First, dst.lanes[:dst.Count*nl], vs, dst.BaseTick, base)
		if err := c.ReadFrames(bitio.NewReader(w.Bytes()), 1030, bases, &back); err != nil {
			t.Fatalf("re-encoded section does not decode: %v", err)
		}
		if back.First != dst.First || back.Count != dst.Count || back.HasView != dst.HasView {
			t.Fatalf("ticks %d+%d (views %v) != %d+%d (views %v)", back.First, back.Count, back.HasView, dst.First, dst.Count, dst.HasView)
		}
		for i := 0; i < dst.Count; i++ {
			a, b := dst.Lanes(i), back.Lanes(i)
			for j := range a {
				if a[j] != b[j] {
					t.Fatalf("frame %d lane %d: %d != %d", i, j, a[j], b[j])
				}
			}
			var v shooterInput
			c.Dequantize(a, &v)
			if va, _ := dst.View(i); va != back.views[i] {
				t.Fatalf("frame %d view lag %d != %d", i, back.views[i], va)
			}
		}
	})
}
