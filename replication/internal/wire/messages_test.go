package wire

import (
	"testing"
	"time"

	arche "github.com/mlange-42/arche/ecs"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/internal/entity"
	"github.com/archenet/archenet/replication/schema"
	"github.com/archenet/archenet/transport"
)

type fuzzHP struct {
	HP   int16  `net:"range=0:100"`
	Ammo uint16 `net:"range=0:500,owner"`
}

type fuzzChildOf struct {
	arche.Relation
}

func fuzzRegistry() *schema.Registry {
	reg := schema.NewRegistry()
	schema.MustRegister[components.Transform](reg)
	schema.MustRegister[fuzzHP](reg)
	schema.MustRegister[fuzzChildOf](reg)
	return reg
}

// FuzzMessages feeds arbitrary bytes to every decoder of messages a
// server sends (spawn batches, welcome payloads) and a client sends
// (datagram headers). They must never panic.
func FuzzMessages(f *testing.F) {
	reg := fuzzRegistry()
	plans := reg.Plans()
	var sw SpawnWriter
	tr := components.Transform{Pos: components.Vec3{X: 1, Y: 2, Z: 3}, Rot: components.QuatIdentity()}
	lanes := make([]uint64, plans[0].NumLanes()+plans[1].NumLanes())
	schema.QuantizeValue(plans[0], &tr, lanes)
	hp := fuzzHP{HP: 50, Ammo: 7}
	schema.QuantizeValue(plans[1], &hp, lanes[plans[0].NumLanes():])
	sw.Add(plans, SpawnEntry{Slot: 5, Meta: entity.Meta{Gen: 2, Owner: 1, Set: 3}, Lanes: lanes}, true)
	sw.Add(plans, SpawnEntry{Despawn: true, Slot: 9, Meta: entity.Meta{Gen: 1}}, false)
	f.Add(sw.Bytes(77, nil))
	sw.Reset() // a predicted spawn's key, sent to its owner
	sw.Add(plans, SpawnEntry{Slot: 6, Meta: entity.Meta{Gen: 1, Owner: 1, Set: 3}, Lanes: lanes, HasKey: true, Key: 1 << 31}, true)
	f.Add(sw.Bytes(78, nil))
	sw.Reset() // a relation's target
	sw.Add(plans, SpawnEntry{Slot: 7, Meta: entity.Meta{Gen: 3, Set: 0b101}, Lanes: lanes, Target: components.NetID{Handle: components.MakeHandle(2, 5), Gen: 2}, HasTarget: true}, false)
	sw.Add(plans, SpawnEntry{Slot: 8, Meta: entity.Meta{Gen: 0, Set: 0b100}}, false)
	f.Add(sw.Bytes(79, nil))
	f.Add((&Welcome{TickRate: 30, Depth: 32, Tick: 9, NetDivisor: 2}).Append(nil))
	f.Add((&Welcome{TickRate: 60, Depth: 64, Tick: 1, NetDivisor: 1, Compression: true, Dictionary: 0x1234567}).Append(nil))
	f.Add(AppendClientHeader(nil, &Ack{Newest: 10, Mask: 0xff}))
	f.Add(AppendClientHeaderTaken(nil, &Ack{Newest: 10, Mask: 0xff}, 42))
	f.Add((&Welcome{TickRate: 30, Depth: 32, Tick: 9, NetDivisor: 2, Resumable: true, Secret: [SecretLen]byte{1}, Match: "duel-7", Resumed: true, ClientTaken: 3}).Append(nil))
	f.Add((&Ticket{Client: 3, Secret: [SecretLen]byte{1, 2}, Taken: 17}).Append(nil))
	partial := Ack{Newest: 12, Mask: 0b101, Partial: 0b10, PartCount: [AckWindow]uint8{0, 3}}
	partial.Parts[1] = 0b101
	f.Add(append(AppendClientHeader(nil, &partial), 0xAA, 0xBB))
	f.Add(AppendReady(nil, 3))
	f.Add(AppendDrain(nil, Drain{Left: 30 * time.Second, Reason: "maintenance"}))
	f.Add(AppendDrain(nil, Drain{Left: 0, Reason: ""}))
	f.Add(AppendDrain(nil, Drain{Left: time.Second, Reason: "moving", Address: "127.0.0.1:4433"}))
	f.Add(AppendSpawnsEnded(nil, []uint32{7}))
	f.Add(AppendSpawnsEnded(nil, []uint32{1, 1 << 31, 99}))
	f.Add(AppendComponents(nil, ComponentHashes(reg))) // a Reject's protocol description
	f.Fuzz(func(t *testing.T, b []byte) {
		if d, err := ParseDrain(b); err == nil {
			if len(d.Reason) > transport.MaxReasonLen || len(d.Address) > MaxAddressLen {
				t.Fatalf("drain reason of %d bytes or address of %d accepted", len(d.Reason), len(d.Address))
			}
			if again, err := ParseDrain(AppendDrain(nil, d)); err != nil || again != d {
				t.Fatalf("drain notice does not round-trip: %+v vs %+v (%v)", d, again, err)
			}
		}
		if cs, err := ParseComponents(b); err == nil {
			if len(cs) > MaxRejectComponents {
				t.Fatalf("%d components accepted", len(cs))
			}
			for _, c := range cs {
				if len(c.Name) > MaxComponentNameLen || len(c.Fields) > MaxComponentFieldsLen {
					t.Fatalf("component of %d+%d bytes accepted", len(c.Name), len(c.Fields))
				}
			}
			_ = DiffComponents(cs, cs[min(1, len(cs)):])
			if len(b) > 0 && string(AppendComponents(nil, cs)) != string(b) {
				t.Fatalf("component list does not round-trip: %x", b)
			}
		}
		var keys []uint32
		if err := ParseSpawnsEnded(b, func(k uint32) { keys = append(keys, k) }); err == nil {
			if again := AppendSpawnsEnded(nil, keys); string(again) != string(b) {
				t.Fatalf("spawns-ended message does not round-trip: %x vs %x", again, b)
			}
		}
		n := 0
		_ = ParseSpawns(b, plans, 1, schema.MaxLanes, func(tick uint32, e SpawnEntry) {
			n++
			want := 0
			for i, p := range plans {
				if e.Meta.Set>>i&1 != 0 {
					want += p.NumLanes()
				}
			}
			if !e.Despawn && len(e.Lanes) != want {
				t.Fatalf("spawn of %d lanes, its set has %d", len(e.Lanes), want)
			}
		})
		if w, err := ParseWelcome(b); err == nil {
			if again, err := ParseWelcome(w.Append(nil)); err != nil || again != w {
				t.Fatalf("welcome does not round-trip: %+v vs %+v (%v)", w, again, err)
			}
		}
		if tk, err := ParseTicket(b); err == nil {
			if again, err := ParseTicket(tk.Append(nil)); err != nil || again != tk {
				t.Fatalf("ticket does not round-trip: %+v vs %+v (%v)", tk, again, err)
			}
		}
		var ta Ack
		if _, taken, has, err := ParseClientHeaderTaken(&ta, b); err == nil && has {
			var again Ack
			if _, t2, _, err := ParseClientHeaderTaken(&again, AppendClientHeaderTaken(nil, &ta, taken)); err != nil || t2 != taken {
				t.Fatalf("client header with a count does not round-trip: %d vs %d (%v)", taken, t2, err)
			}
		}
		if a, _, err := ParseClientHeader(b); err == nil {
			// What parses re-encodes to an ack that parses the same.
			again, rest, err := ParseClientHeader(AppendClientHeader(nil, &a))
			if err != nil || len(rest) != 0 || !sameAck(a, again) {
				t.Fatalf("client header does not round-trip: %+v vs %+v (%v)", a, again, err)
			}
		}
	})
}

func TestSpawnBatchRoundTrip(t *testing.T) {
	reg := fuzzRegistry()
	plans := reg.Plans()
	var sw SpawnWriter
	lanes := make([]uint64, plans[0].NumLanes()+plans[1].NumLanes())
	tr := components.Transform{Pos: components.Vec3{X: 1}, Rot: components.QuatIdentity()}
	schema.QuantizeValue(plans[0], &tr, lanes)
	hp := fuzzHP{HP: 50, Ammo: 7}
	schema.QuantizeValue(plans[1], &hp, lanes[plans[0].NumLanes():])
	for _, owner := range []uint8{1, 2} {
		sw.Reset()
		sw.Add(plans, SpawnEntry{Slot: 5, Meta: entity.Meta{Gen: 2, Owner: 1, Set: 3}, Lanes: lanes, HasKey: owner == 1, Key: 123456}, owner == 1)
		sw.Add(plans, SpawnEntry{Despawn: true, Slot: 9, Meta: entity.Meta{Gen: 1}}, false)
		msg := sw.Bytes(77, nil)
		var got []SpawnEntry
		err := ParseSpawns(msg, plans, owner, schema.MaxLanes, func(tick uint32, e SpawnEntry) {
			if tick != 77 {
				t.Fatalf("tick %d", tick)
			}
			e.Lanes = append([]uint64(nil), e.Lanes...)
			got = append(got, e)
		})
		if err != nil || len(got) != 2 {
			t.Fatalf("owner %d: %v %v", owner, err, got)
		}
		wantAmmo := uint64(7)
		if owner != 1 {
			wantAmmo = 0
		}
		if got[0].HasKey != (owner == 1) || (owner == 1 && got[0].Key != 123456) {
			t.Fatalf("owner %d: predicted-spawn key %v %d", owner, got[0].HasKey, got[0].Key)
		}
		if got[0].Slot != 5 || got[0].Meta.Gen != 2 || got[0].Lanes[len(lanes)-1] != wantAmmo || !got[1].Despawn || got[1].Slot != 9 {
			t.Fatalf("owner %d: %+v", owner, got)
		}
		for cut := 0; cut < len(msg)-1; cut++ {
			if err := ParseSpawns(msg[:cut], plans, owner, schema.MaxLanes, func(uint32, SpawnEntry) {}); err == nil {
				t.Fatalf("prefix %d of %d parsed", cut, len(msg))
			}
		}
	}
}

// sameAck compares what two acks say about the ticks they name.
func sameAck(a, b Ack) bool {
	if a.Newest != b.Newest || a.Mask != b.Mask {
		return false
	}
	for i := uint32(0); i < AckWindow; i++ {
		pa, alla := a.Holds(a.Newest - i)
		pb, allb := b.Holds(b.Newest - i)
		if alla != allb || (!alla && pa != pb) {
			return false
		}
	}
	return true
}

func TestSpawnsEndedMessage(t *testing.T) {
	msg := AppendSpawnsEnded(nil, []uint32{3, 1 << 31})
	var got []uint32
	if err := ParseSpawnsEnded(msg, func(k uint32) { got = append(got, k) }); err != nil || len(got) != 2 || got[0] != 3 || got[1] != 1<<31 {
		t.Fatalf("%v %v", got, err)
	}
	for n := range len(msg) {
		if ParseSpawnsEnded(msg[:n], func(uint32) {}) == nil {
			t.Fatalf("a prefix of %d bytes parses", n)
		}
	}
	if ParseSpawnsEnded(append(msg, 0), func(uint32) {}) == nil {
		t.Fatal("a trailing byte parses")
	}
	if ParseSpawnsEnded([]byte{KindSpawnsEnded, 0}, func(uint32) {}) == nil {
		t.Fatal("no keys parses")
	}
	if ParseSpawnsEnded([]byte{KindSpawnsEnded, 0xff, 0xff, 0x03}, func(uint32) {}) == nil {
		t.Fatal("a count past the bound parses")
	}
}
