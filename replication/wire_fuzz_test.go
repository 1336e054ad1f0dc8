package replication

import (
	"testing"
	"time"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/internal/snapshot"
	"github.com/archenet/archenet/replication/schema"
	"github.com/archenet/archenet/transport"
)

type fuzzHP struct {
	HP   int16  `net:"range=0:100"`
	Ammo uint16 `net:"range=0:500,owner"`
}

func fuzzRegistry() *schema.Registry {
	reg := schema.NewRegistry()
	schema.MustRegister[components.Transform](reg)
	schema.MustRegister[fuzzHP](reg)
	return reg
}

// FuzzClientMessages feeds arbitrary bytes to every decoder of messages a
// server sends (spawn batches, welcome payloads) and a client sends
// (datagram headers). They must never panic.
func FuzzClientMessages(f *testing.F) {
	reg := fuzzRegistry()
	plans := reg.Plans()
	var sw spawnWriter
	tr := components.Transform{Pos: components.Vec3{X: 1, Y: 2, Z: 3}, Rot: components.QuatIdentity()}
	lanes := make([]uint64, plans[0].NumLanes()+plans[1].NumLanes())
	schema.QuantizeValue(plans[0], &tr, lanes)
	hp := fuzzHP{HP: 50, Ammo: 7}
	schema.QuantizeValue(plans[1], &hp, lanes[plans[0].NumLanes():])
	sw.add(plans, spawnEntry{Slot: 5, Meta: snapshot.Meta{Gen: 2, Owner: 1, Set: 3}, Lanes: lanes}, true)
	sw.add(plans, spawnEntry{Despawn: true, Slot: 9, Meta: snapshot.Meta{Gen: 1}}, false)
	f.Add(sw.bytes(77, nil))
	sw.reset() // a predicted spawn's key, sent to its owner
	sw.add(plans, spawnEntry{Slot: 6, Meta: snapshot.Meta{Gen: 1, Owner: 1, Set: 3}, Lanes: lanes, HasKey: true, Key: 1 << 31}, true)
	f.Add(sw.bytes(78, nil))
	f.Add(welcomeInfo{TickRate: 30, Depth: 32, Tick: 9, NetDivisor: 2}.append(nil))
	f.Add(welcomeInfo{TickRate: 60, Depth: 64, Tick: 1, NetDivisor: 1, Compression: true, Dictionary: 0x1234567}.append(nil))
	f.Add(appendClientHeader(nil, &snapshot.Ack{Newest: 10, Mask: 0xff}))
	partial := snapshot.Ack{Newest: 12, Mask: 0b101, Partial: 0b10, PartCount: [snapshot.AckWindow]uint8{0, 3}}
	partial.Parts[1] = 0b101
	f.Add(append(appendClientHeader(nil, &partial), 0xAA, 0xBB))
	f.Add(appendReady(nil, 3))
	f.Add(appendDrain(nil, 30*time.Second, "maintenance"))
	f.Add(appendDrain(nil, 0, ""))
	f.Add(appendSpawnsEnded(nil, []uint32{7}))
	f.Add(appendSpawnsEnded(nil, []uint32{1, 1 << 31, 99}))
	f.Add(appendComponents(nil, componentHashes(reg))) // a Reject's protocol description
	f.Fuzz(func(t *testing.T, b []byte) {
		if d, err := parseDrain(b); err == nil {
			if len(d.Reason) > transport.MaxReasonLen {
				t.Fatalf("drain reason of %d bytes accepted", len(d.Reason))
			}
			if again, err := parseDrain(appendDrain(nil, d.Left, d.Reason)); err != nil || again != d {
				t.Fatalf("drain notice does not round-trip: %+v vs %+v (%v)", d, again, err)
			}
		}
		if cs, err := parseComponents(b); err == nil {
			if len(cs) > maxRejectComponents {
				t.Fatalf("%d components accepted", len(cs))
			}
			for _, c := range cs {
				if len(c.Name) > maxComponentNameLen || len(c.Fields) > maxComponentFieldsLen {
					t.Fatalf("component of %d+%d bytes accepted", len(c.Name), len(c.Fields))
				}
			}
			_ = diffComponents(cs, cs[min(1, len(cs)):])
			if len(b) > 0 && string(appendComponents(nil, cs)) != string(b) {
				t.Fatalf("component list does not round-trip: %x", b)
			}
		}
		var keys []uint32
		if err := parseSpawnsEnded(b, func(k uint32) { keys = append(keys, k) }); err == nil {
			if again := appendSpawnsEnded(nil, keys); string(again) != string(b) {
				t.Fatalf("spawns-ended message does not round-trip: %x vs %x", again, b)
			}
		}
		n := 0
		_ = parseSpawns(b, plans, 1, schema.MaxLanes, func(tick uint32, e spawnEntry) {
			n++
			if !e.Despawn && len(e.Lanes) == 0 && e.Meta.Set != 0 {
				t.Fatalf("spawn without lanes")
			}
		})
		_, _ = parseWelcomeInfo(b)
		if a, _, err := parseClientHeader(b); err == nil {
			// What parses re-encodes to an ack that parses the same.
			again, rest, err := parseClientHeader(appendClientHeader(nil, &a))
			if err != nil || len(rest) != 0 || !sameAck(a, again) {
				t.Fatalf("client header does not round-trip: %+v vs %+v (%v)", a, again, err)
			}
		}
	})
}

func TestSpawnBatchRoundTrip(t *testing.T) {
	reg := fuzzRegistry()
	plans := reg.Plans()
	var sw spawnWriter
	lanes := make([]uint64, plans[0].NumLanes()+plans[1].NumLanes())
	tr := components.Transform{Pos: components.Vec3{X: 1}, Rot: components.QuatIdentity()}
	schema.QuantizeValue(plans[0], &tr, lanes)
	hp := fuzzHP{HP: 50, Ammo: 7}
	schema.QuantizeValue(plans[1], &hp, lanes[plans[0].NumLanes():])
	for _, owner := range []uint8{1, 2} {
		sw.reset()
		sw.add(plans, spawnEntry{Slot: 5, Meta: snapshot.Meta{Gen: 2, Owner: 1, Set: 3}, Lanes: lanes, HasKey: owner == 1, Key: 123456}, owner == 1)
		sw.add(plans, spawnEntry{Despawn: true, Slot: 9, Meta: snapshot.Meta{Gen: 1}}, false)
		msg := sw.bytes(77, nil)
		var got []spawnEntry
		err := parseSpawns(msg, plans, owner, schema.MaxLanes, func(tick uint32, e spawnEntry) {
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
			if err := parseSpawns(msg[:cut], plans, owner, schema.MaxLanes, func(uint32, spawnEntry) {}); err == nil {
				t.Fatalf("prefix %d of %d parsed", cut, len(msg))
			}
		}
	}
}

// sameAck compares what two acks say about the ticks they name.
func sameAck(a, b snapshot.Ack) bool {
	if a.Newest != b.Newest || a.Mask != b.Mask {
		return false
	}
	for i := uint32(0); i < snapshot.AckWindow; i++ {
		pa, alla := a.Holds(a.Newest - i)
		pb, allb := b.Holds(b.Newest - i)
		if alla != allb || (!alla && pa != pb) {
			return false
		}
	}
	return true
}

func TestSpawnsEndedMessage(t *testing.T) {
	msg := appendSpawnsEnded(nil, []uint32{3, 1 << 31})
	var got []uint32
	if err := parseSpawnsEnded(msg, func(k uint32) { got = append(got, k) }); err != nil || len(got) != 2 || got[0] != 3 || got[1] != 1<<31 {
		t.Fatalf("%v %v", got, err)
	}
	for n := range len(msg) {
		if parseSpawnsEnded(msg[:n], func(uint32) {}) == nil {
			t.Fatalf("a prefix of %d bytes parses", n)
		}
	}
	if parseSpawnsEnded(append(msg, 0), func(uint32) {}) == nil {
		t.Fatal("a trailing byte parses")
	}
	if parseSpawnsEnded([]byte{kindSpawnsEnded, 0}, func(uint32) {}) == nil {
		t.Fatal("no keys parses")
	}
	if parseSpawnsEnded([]byte{kindSpawnsEnded, 0xff, 0xff, 0x03}, func(uint32) {}) == nil {
		t.Fatal("a count past the bound parses")
	}
}
