package schema

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/bitio"
)

// FuzzRead decodes arbitrary bytes as the full encoding of each test
// component. It must never panic; whatever decodes must re-encode to a stream
// that decodes to the same lanes; and the transform's pose kernel must read
// what the interpreter reads (lanes, position, error).
func FuzzRead(f *testing.F) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range goldenCases() {
		r := NewRegistry()
		f.Add(encodeGolden(c.plan(r), c.value, c.owner), c.owner)
	}
	for i := 0; i < 4; i++ {
		r := NewRegistry()
		p := MustRegister[ship](r)
		s := newShip(rng)
		f.Add(encodeGolden(p, &s, i%2 == 0), i%2 == 0)
	}
	{ // references: a message's lanes, a component's
		r := NewRegistry()
		k := kill{Killer: components.Ref{ID: components.NetID{Handle: components.MakeHandle(3, 700), Gen: 12}, Set: true}, Weapon: 5}
		f.Add(encodeGolden(MustRegisterMessage[kill](r), &k, true), true)
		c := carried{Holder: components.Ref{ID: components.NetID{Handle: components.MakeHandle(0, 9), Gen: 1}, Set: true}}
		f.Add(encodeGolden(MustRegister[carried](r), &c, false), false)
	}
	r := NewRegistry()
	plans := []*Plan{MustRegister[ship](r), MustRegister[transform](r), MustRegisterMessage[kill](r), MustRegister[carried](r)}
	interp := *plans[1] // the transform without its pose kernel
	interp.pose = nil
	f.Fuzz(func(t *testing.T, data []byte, owner bool) {
		// The pose kernel reads exactly what the interpreter reads.
		fast, slow := make([]uint64, interp.NumLanes()), make([]uint64, interp.NumLanes())
		rf, rs := bitio.NewReader(data), bitio.NewReader(data)
		ef, es := plans[1].Read(rf, fast, owner), interp.Read(rs, slow, owner)
		if fmt.Sprint(ef) != fmt.Sprint(es) || rf.BitPos() != rs.BitPos() || (es == nil && !slices.Equal(fast, slow)) {
			t.Fatalf("pose kernel read %v %v at %d, interpreter %v %v at %d", fast, ef, rf.BitPos(), slow, es, rs.BitPos())
		}
		for _, p := range plans {
			lanes := make([]uint64, p.NumLanes())
			if err := p.Read(bitio.NewReader(data), lanes, owner); err != nil {
				continue
			}
			var w bitio.Writer
			p.Write(&w, lanes, owner)
			back := make([]uint64, p.NumLanes())
			if err := p.Read(bitio.NewReader(w.Bytes()), back, owner); err != nil {
				t.Fatalf("%s: re-encoded value does not decode: %v", p.Name, err)
			}
			for i := range lanes {
				if lanes[i] != back[i] {
					t.Fatalf("%s: lane %d: %d != %d", p.Name, i, lanes[i], back[i])
				}
			}
			// Dequantizing anything decoded must not panic.
			buf := make([]byte, p.Size)
			_ = buf
			var s ship
			var tr transform
			var k kill
			var c carried
			switch p.Type {
			case plans[0].Type:
				DequantizeValue(p, lanes, &s)
			case plans[1].Type:
				DequantizeValue(p, lanes, &tr)
			case plans[2].Type:
				DequantizeValue(p, lanes, &k)
			default:
				DequantizeValue(p, lanes, &c)
			}
		}
	})
}
