package snapshot

import (
	"errors"
	"math/bits"
	"testing"
	"unsafe"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/schema"
)

type fuzzShip struct {
	Pos  components.Vec3 `net:"world,step=0.01"`
	Rot  components.Quat `net:"quat,bits=9"`
	Vel  components.Vec3 `net:"vel,max=50,step=0.05"`
	Ammo uint8           `net:"range=0:100,owner"`
	HP   int16
}

type fuzzTag struct {
	Team uint8 `net:"range=0:3"`
	On   bool
}

// fuzzSetup returns a registry, a receiver holding tick 1 and real
// datagrams (ticks 1..3, the first tick in several parts) to seed the corpus
// with.
func fuzzSetup() (*schema.Registry, func() *Receiver, [][]byte) {
	reg := schema.NewRegistry()
	schema.MustRegister[fuzzShip](reg)
	schema.MustRegister[fuzzTag](reg)
	w := NewWorld(reg, 8)
	enc := NewEncoder(w)
	c := NewClient(2, 8)
	ships := []fuzzShip{
		{Pos: components.Vec3{X: 1, Y: 2, Z: 3}, Rot: components.QuatIdentity(), Ammo: 10, HP: 100},
		{Pos: components.Vec3{X: -100, Y: 0, Z: 7000}, Rot: components.QuatAxisAngle(components.Vec3{Y: 1}, 2), Vel: components.Vec3{X: 3}, HP: -5},
		{Pos: components.Vec3{X: 1e6}, Rot: components.QuatIdentity()},
	}
	tags := []fuzzTag{{Team: 1, On: true}, {Team: 3}, {}}
	var dgs [][]byte
	firstParts := 0
	var pk Packets
	for tick := uint32(1); tick <= 3; tick++ {
		w.Begin(tick)
		for i := range ships {
			if tick == 3 && i == 1 {
				continue // despawned
			}
			set := uint64(1)
			ptrs := []unsafe.Pointer{unsafe.Pointer(&ships[i])}
			if i != 0 {
				set |= 2
				ptrs = append(ptrs, unsafe.Pointer(&tags[i]))
			}
			w.Put(uint32(i*3), Meta{Gen: uint32(tick / 3), Owner: uint8(i), Set: set}, ptrs)
		}
		w.Commit()
		// Later datagrams carry the input ack, the third also the feedback.
		// The first tick in datagrams of at most MinBudget bytes: several parts.
		opt := BuildOptions{InputAck: 100 + tick, HasInputAck: tick > 1, InputHeld: 104 + tick, InputDepth: -2, HasInputFeedback: tick == 3}
		if tick == 1 {
			opt.Budget = MinBudget
		}
		enc.Build(c, opt, &pk)
		for i := range pk.Len() {
			dgs = append(dgs, append([]byte(nil), pk.At(i)...))
		}
		if tick == 1 {
			firstParts = pk.Len()
			if firstParts < 2 {
				panic("tick 1 in one part")
			}
		}
		c.Ack(Ack{Newest: tick})
		ships[0].Pos.X += 0.5
		ships[2].Vel.Z = 1
		tags[0].On = !tags[0].On
	}
	// fresh holds every part of tick 1 but the last, so that fuzzed
	// datagrams also reach the merging of a tick's later parts.
	fresh := func() *Receiver {
		r := NewReceiver(reg, 2, 8)
		for _, d := range dgs[:firstParts-1] {
			if _, err := r.Decode(d); err != nil {
				panic(err)
			}
		}
		return r
	}
	return reg, fresh, dgs
}

// FuzzDecode feeds arbitrary datagrams to a receiver that holds a baseline.
// Decoding must never panic; a successful decode must produce a consistent
// view (sorted slots, lane counts matching each component set).
func FuzzDecode(f *testing.F) {
	reg, fresh, dgs := fuzzSetup()
	for _, d := range dgs {
		f.Add(d)
	}
	rs := testingReceiverSeeds()
	for _, d := range rs {
		f.Add(d)
	}
	plans := reg.Plans()
	f.Fuzz(func(t *testing.T, data []byte) {
		r := fresh()
		S, err := r.Decode(data)
		if err != nil {
			return
		}
		v := r.View(S)
		if v == nil {
			t.Fatal("decoded tick has no view")
		}
		for i := range v.Slots {
			if i > 0 && v.Slots[i] <= v.Slots[i-1] {
				t.Fatalf("slots not sorted: %v", v.Slots)
			}
			n := 0
			for s := v.Metas[i].Set; s != 0; s &= s - 1 {
				if bits.TrailingZeros64(s) >= len(plans) {
					t.Fatalf("unknown component in set %b", v.Metas[i].Set)
				}
				n += plans[bits.TrailingZeros64(s)].NumLanes()
			}
			if len(v.EntityLanes(i)) != n {
				t.Fatalf("slot %d: %d lanes for set %b", v.Slots[i], len(v.EntityLanes(i)), v.Metas[i].Set)
			}
		}
	})
}

func testingReceiverSeeds() [][]byte {
	return [][]byte{
		{KindSnapshot},
		{KindSnapshot | FlagCompressed, 1, 2, 3},
		{KindSnapshot, 2, 0, 0, 0, 0x02, 0xff},
	}
}

func TestFuzzSeedsDecode(t *testing.T) {
	_, fresh, dgs := fuzzSetup()
	r := fresh()
	for i, d := range dgs {
		if _, err := r.Decode(d); err != nil && !(errors.Is(err, ErrDuplicate) && i < len(dgs)-2) {
			t.Fatalf("datagram %d: %v", i+1, err)
		}
	}
	// Every truncated prefix of a real datagram, decoded where it belongs
	// (on the views the datagrams before it made), is an error, never a
	// panic.
	for i, d := range dgs {
		at := func() *Receiver {
			r := fresh()
			for _, p := range dgs[:i] {
				r.Decode(p) //nolint:errcheck // the parts fresh holds are duplicates
			}
			return r
		}
		for cut := 0; cut < len(d); cut++ {
			if _, err := at().Decode(d[:cut]); err == nil && cut < len(d)-1 {
				// A prefix can only decode if the cut fell in the final
				// byte's padding; anything shorter must fail.
				t.Fatalf("prefix of %d/%d bytes decoded", cut, len(d))
			}
		}
	}
}
