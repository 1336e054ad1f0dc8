package receive

import (
	"errors"
	"math/bits"
	"testing"
	"unsafe"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/internal/baseline"
	"github.com/archenet/archenet/replication/internal/encode"
	"github.com/archenet/archenet/replication/internal/entity"
	"github.com/archenet/archenet/replication/internal/store"
	"github.com/archenet/archenet/replication/internal/wire"
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

// fuzzPose is laid out as a pose (codec.IsPose): its records take the
// receiver's pose reader.
type fuzzPose struct {
	Pos components.Vec3 `net:"world,step=0.01"`
	Rot components.Quat `net:"quat,bits=9"`
}

// fuzzSetup returns a registry, a receiver holding tick 1 and real
// datagrams (ticks 1..8, the first tick in several parts) to seed the corpus
// with: full records (with and without a kind code), removals, plain and
// predicted deltas (predicted, repeated and given field masks; of poses
// too), Rice codes
// with and without their escape, quaternion index changes, headers with an
// inherited and an explicit residual coding, quadratic extrapolation.
func fuzzSetup() (*schema.Registry, func() *Receiver, [][]byte) {
	reg, fresh, _, dgs := fuzzSetupDeep()
	return reg, fresh, dgs
}

// fuzzSetupDeep is fuzzSetup with a second receiver maker: deep holds every
// datagram but the last tick's, so that fuzzed datagrams of the last tick
// reach predicted deltas (prediction, predicted field masks, Rice codes).
func fuzzSetupDeep() (*schema.Registry, func() *Receiver, func() *Receiver, [][]byte) {
	reg := schema.NewRegistry()
	schema.MustRegister[fuzzShip](reg)
	schema.MustRegister[fuzzTag](reg)
	schema.MustRegister[fuzzPose](reg)
	w := store.New(reg, 8)
	g := encode.NewGroup(w)
	enc := g.NewEncoder()
	c := baseline.NewTracker(2, 8)
	ships := []fuzzShip{
		{Pos: components.Vec3{X: 1, Y: 2, Z: 3}, Rot: components.QuatIdentity(), Ammo: 10, HP: 100},
		{Pos: components.Vec3{X: -100, Y: 0, Z: 7000}, Rot: components.QuatAxisAngle(components.Vec3{Y: 1}, 2), Vel: components.Vec3{X: 3}, HP: -5},
		{Pos: components.Vec3{X: 1e6}, Rot: components.QuatIdentity()},
		{Pos: components.Vec3{X: 5}, Rot: components.QuatIdentity(), HP: 7},
	}
	tags := []fuzzTag{{Team: 1, On: true}, {Team: 3}, {}}
	poses := []fuzzPose{{Pos: components.Vec3{X: 4, Y: 1}, Rot: components.QuatIdentity()}, {Pos: components.Vec3{Z: -300}, Rot: components.QuatAxisAngle(components.Vec3{Z: 1}, 1)}}
	var dgs [][]byte
	firstParts, lastStart := 0, 0
	var pk encode.Packets
	for tick := uint32(1); tick <= 8; tick++ {
		if tick == 6 {
			// A coding of its own: the header carries it in full. And
			// quadratic extrapolation of positions.
			g.SetCoding(wire.Coding{Off: [wire.NumClasses]int8{-2, 1}, Cap: [wire.NumClasses]uint8{6, 9}, Plain: [wire.NumClasses]uint8{1, 3}}, true)
		}
		w.Begin(tick)
		for i := range ships {
			if tick == 3 && i == 1 {
				continue // despawned (back at tick 4: a full record without a kind code)
			}
			set := uint64(1)
			ptrs := []unsafe.Pointer{unsafe.Pointer(&ships[i])}
			if i == 1 || i == 2 {
				set |= 2
				ptrs = append(ptrs, unsafe.Pointer(&tags[i]))
			}
			w.Put(uint32(i*3), entity.Meta{Gen: uint32(min(tick, 3) / 3), Owner: uint8(i), Set: set}, ptrs)
		}
		for i := range poses {
			w.Put(uint32(13+i*2), entity.Meta{Set: 4}, []unsafe.Pointer{unsafe.Pointer(&poses[i])})
		}
		w.Commit()
		// Later datagrams carry the input ack, the third also the feedback.
		// The first tick in datagrams of at most MinBudget bytes: several parts.
		opt := encode.BuildOptions{InputAck: 100 + tick, HasInputAck: tick > 1, InputHeld: 104 + tick, InputDepth: -2, HasInputFeedback: tick == 3}
		if tick == 1 {
			opt.Budget = encode.MinBudget
		}
		enc.Build(c, opt, &pk)
		lastStart = len(dgs)
		for i := range pk.Len() {
			dgs = append(dgs, append([]byte(nil), pk.At(i)...))
		}
		if tick == 1 {
			firstParts = pk.Len()
			if firstParts < 2 {
				panic("tick 1 in one part")
			}
		}
		c.Ack(&wire.Ack{Newest: tick})
		ships[0].Pos.X += 0.5 // steady: predicted deltas with the predicted field masks
		poses[0].Pos.X += 0.25
		poses[0].Rot = poses[0].Rot.Mul(components.QuatAxisAngle(components.Vec3{Y: 1}, 0.1)).Normalize()
		poses[1].Pos.Y += float64(tick*tick) * 0.3 // accelerating, and turning past its quaternion's largest component
		poses[1].Rot = poses[1].Rot.Mul(components.QuatAxisAngle(components.Vec3{X: 1}, 0.5)).Normalize()
		ships[2].Vel.Z = 1
		tags[0].On = !tags[0].On
		if tick >= 4 {
			// Turning and accelerating: given and repeated field masks,
			// large residuals (Rice escapes) and a quaternion index change.
			ships[1].Pos.Y += float64(tick*tick) * 3
			ships[1].Rot = ships[1].Rot.Mul(components.QuatAxisAngle(components.Vec3{X: 1}, 0.4)).Normalize()
			ships[2].Pos.Y += float64(tick) * 0.7
			ships[2].Rot = ships[2].Rot.Mul(components.QuatAxisAngle(components.Vec3{X: 1}, 0.4)).Normalize()
			tags[1].On = !tags[1].On
		}
		if tick == 7 {
			// Ships 0 and 3 change the same fields, unlike before: given
			// field masks, then the same repeated.
			ships[0].HP++
			ships[3].HP++
			ships[3].Pos.X += 0.5
		}
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
	deep := func() *Receiver {
		r := NewReceiver(reg, 2, 8)
		for _, d := range dgs[:lastStart] {
			if _, err := r.Decode(d); err != nil {
				panic(err)
			}
		}
		return r
	}
	return reg, fresh, deep, dgs
}

// FuzzDecode feeds arbitrary datagrams to a receiver that holds a baseline.
// Decoding must never panic; a successful decode must produce a consistent
// view (sorted slots, lane counts matching each component set).
func FuzzDecode(f *testing.F) {
	reg, fresh, deep, dgs := fuzzSetupDeep()
	for _, d := range dgs {
		f.Add(d)
	}
	rs := testingReceiverSeeds()
	for _, d := range rs {
		f.Add(d)
	}
	plans := reg.Plans()
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, r := range []*Receiver{fresh(), deep()} {
			checkDecode(t, r, data, plans)
		}
		// ParseHeader never panics, and agrees with the receiver on the tick
		// of every uncompressed datagram it decodes.
		h, herr := wire.ParseHeader(data)
		if S, err := fresh().Decode(data); err == nil && data[0]&wire.FlagCompressed == 0 && (herr != nil || h.Tick != S) {
			t.Fatalf("decoded tick %d; ParseHeader: %+v, %v", S, h, herr)
		}
	})
}

func checkDecode(t *testing.T, r *Receiver, data []byte, plans []*schema.Plan) {
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
}

func testingReceiverSeeds() [][]byte {
	return [][]byte{
		{wire.KindSnapshot},
		{wire.KindSnapshot | wire.FlagCompressed, 1, 2, 3},
		{wire.KindSnapshot, 2, 0, 0, 0, 0x02, 0xff},
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
