package store

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"unsafe"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/internal/entity"
	"github.com/archenet/archenet/replication/schema"
	"github.com/stretchr/testify/require"
)

// TestRingFastPathsMatchTheGeneralOne: a Ring fed with Put and Keep (whose
// common case copies the previous frame and quantizes only what changed)
// builds, tick for tick, the same frames, change lists and change ticks as
// a Ring fed the same entities with PutLanes (entry by entry), through
// moves, spawns and despawns anywhere in the slot order, component set and
// generation changes, and dormant entities.
func TestRingFastPathsMatchTheGeneralOne(t *testing.T) {
	reg := schema.NewRegistry()
	schema.MustRegister[ship](reg)
	schema.MustRegister[tag](reg)
	plans := reg.Plans()
	fast, ref := New(reg, 4), New(reg, 4)
	type ent struct {
		alive bool
		moved bool // this tick (else it may be kept without reading)
		meta  entity.Meta
		ship  ship
		tag   tag
	}
	rng := rand.New(rand.NewPCG(5, 6))
	ents := make([]ent, 300)
	lanes := func(e *ent) []uint64 {
		var out []uint64
		ptrs := []unsafe.Pointer{unsafe.Pointer(&e.ship), unsafe.Pointer(&e.tag)}
		ci := 0
		for set := e.meta.Set; set != 0; set &= set - 1 {
			i := 0
			for set>>i&1 == 0 {
				i++
			}
			l := make([]uint64, plans[i].NumLanes())
			plans[i].QuantizeBytes(unsafe.Slice((*byte)(ptrs[i]), plans[i].Size), l)
			out = append(out, l...)
			ci++
		}
		return out
	}
	var kept [2]int
	for tick := uint32(1); tick <= 400; tick++ {
		// Change a few things; whole stretches of ticks change nothing.
		quiet := tick%50 > 40
		for i := range ents {
			e := &ents[i]
			e.moved = true
			switch r := rng.IntN(1000); {
			case quiet:
				e.moved = false
			case !e.alive && r < 20, e.alive && r < 3:
				e.alive, e.meta.Gen = !e.alive, e.meta.Gen+1
				e.meta.Set = uint64(1 + rng.IntN(3))
				e.ship = ship{Pos: components.Vec3{X: float64(i)}, Rot: components.QuatIdentity(), HP: 50}
			case e.alive && r < 8:
				e.meta.Set = uint64(1 + rng.IntN(3)) // component set change
			case e.alive && r < 250:
				e.ship.Pos.X += rng.Float64() - 0.5
				e.tag.Team = uint8(rng.IntN(4))
			case e.alive && r < 260:
				e.ship.Pos.X += 1e-9 // raw bytes change, quantized value does not
			default:
				e.moved = false
			}
		}
		fast.Begin(tick)
		ref.Begin(tick)
		for i := range ents {
			e := &ents[i]
			if !e.alive {
				continue
			}
			slot := uint32(i)
			// Entities that did not move may be kept without reading.
			if !e.moved && rng.IntN(4) == 0 && fast.Keep(slot, e.meta) {
				kept[0]++
			} else {
				var ptrs []unsafe.Pointer
				if e.meta.Set&1 != 0 {
					ptrs = append(ptrs, unsafe.Pointer(&e.ship))
				}
				if e.meta.Set&2 != 0 {
					ptrs = append(ptrs, unsafe.Pointer(&e.tag))
				}
				fast.Put(slot, e.meta, ptrs)
				kept[1]++
			}
			ref.PutLanes(slot, e.meta, lanes(e))
		}
		ff, rf := fast.Commit(), ref.Commit()
		require.Equal(t, rf.Slots, ff.Slots, "tick %d", tick)
		require.Equal(t, rf.Metas, ff.Metas, "tick %d", tick)
		require.Equal(t, rf.Offs, ff.Offs, "tick %d", tick)
		require.Equal(t, rf.Lanes, ff.Lanes, "tick %d", tick)
		for i := range ents {
			slot := uint32(i)
			require.Equal(t, rf.Lookup(slot), ff.Lookup(slot), "tick %d slot %d", tick, slot)
			require.Equal(t, ref.ChangedAt(slot), fast.ChangedAt(slot), "tick %d slot %d", tick, slot)
			require.Equal(t, ref.LayoutAt(slot), fast.LayoutAt(slot), "tick %d slot %d", tick, slot)
		}
		require.True(t, slices.Equal(ref.changes[tick%4], fast.changes[tick%4]), "tick %d", tick)
		fast.EndTick()
		ref.EndTick()
	}
	t.Logf("%d entities kept, %d put", kept[0], kept[1])
	require.NotZero(t, kept[0])
}

// A frame filled by concurrent aligned shares equals the frame Put builds
// entity by entity: lanes, layout and the changed slots, tick after tick,
// with some entities moving, some kept (not put) and one share empty, past
// the ring's depth (recycled frames copy only what changed since).
func TestAlignedSharesMatchPut(t *testing.T) {
	const n = 700
	serial, shared := newScene(n), newScene(n)
	rng := rand.New(rand.NewPCG(3, 4))
	ptr := make([]unsafe.Pointer, 1)
	shares := []*AlignedPut{shared.w.NewAlignedPut(), shared.w.NewAlignedPut(), shared.w.NewAlignedPut()}
	const ticks = 3 * entity.DefaultDepth
	for tick := uint32(1); tick <= ticks; tick++ {
		keep := map[int]bool{}
		for i := range serial.ents {
			switch rng.IntN(6) {
			case 0:
				serial.ents[i].Pos.X += rng.Float64()
			case 1:
				keep[i] = tick > 1 // its new value waits
				serial.ents[i].Pos.Z += 1
			}
		}
		copy(shared.ents, serial.ents)
		serial.w.Begin(tick)
		for i := range serial.ents {
			if keep[i] && serial.w.Keep(uint32(i), entity.Meta{Set: 1}) {
				continue
			}
			ptr[0] = unsafe.Pointer(&serial.ents[i])
			serial.w.Put(uint32(i), entity.Meta{Set: 1}, ptr)
		}
		want := serial.w.Commit()

		shared.w.Begin(tick)
		if cnt, ok := shared.w.Aligned(); !ok {
			require.Equal(t, uint32(1), tick, "only the first frame has no previous one")
			for i := range shared.ents {
				ptr[0] = unsafe.Pointer(&shared.ents[i])
				shared.w.Put(uint32(i), entity.Meta{Set: 1}, ptr)
			}
		} else {
			require.Equal(t, n, cnt)
			shared.w.StartAligned()
			bounds := []int{0, 320, 320, n} // the middle share is empty
			var wg sync.WaitGroup
			for si, a := range shares {
				wg.Add(1)
				go func() {
					defer wg.Done()
					p := make([]unsafe.Pointer, 1)
					a.Range(bounds[si], bounds[si+1])
					for j := bounds[si]; j < bounds[si+1]; j++ {
						slot, m := shared.w.Entry(j)
						require.Equal(t, entity.Meta{Set: 1}, m)
						if !keep[int(slot)] {
							p[0] = unsafe.Pointer(&shared.ents[slot])
							a.PutAt(j, p)
						}
					}
				}()
			}
			wg.Wait()
			shared.w.EndAligned(shares)
		}
		got := shared.w.Commit()
		require.Equal(t, want.Slots, got.Slots)
		require.Equal(t, want.Metas, got.Metas)
		require.Equal(t, want.Lanes, got.Lanes, "tick %d", tick)
		if tick > 1 {
			a, _ := serial.w.ChangedSince(tick - 1)
			b, _ := shared.w.ChangedSince(tick - 1)
			require.Equal(t, a, b, "tick %d", tick)
		}
		serial.w.EndTick()
		shared.w.EndTick()
	}
	// Shares that leave entries out are refused.
	shared.w.Begin(ticks + 1)
	shared.w.StartAligned()
	shares[0].Range(0, 10)
	shares[1].Range(20, n)
	require.Panics(t, func() { shared.w.EndAligned(shares[:2]) })
}

// TestRawEqualIsByteEquality: the unchanged check's compare agrees with a
// byte compare for every size (the word compare's and the others), with
// the bytes equal and with one byte differing at each position, and never
// reads past the size.
func TestRawEqualIsByteEquality(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for n := 0; n <= 72; n++ {
		a := make([]byte, n+8) // (room: a compare must not read past n)
		for i := range a {
			a[i] = byte(rng.Uint32())
		}
		for i := -1; i < len(a); i++ {
			c := slices.Clone(a)
			if i >= 0 {
				c[i] ^= 1 << (i % 8)
			}
			if same := rawEqual(a[:n], unsafe.Pointer(&c[0])); same != bytes.Equal(a[:n], c[:n]) {
				t.Fatalf("size %d, byte %d changed: same %v", n, i, same)
			}
		}
	}
}

type ship struct {
	Pos  components.Vec3 `net:"world,step=0.01"`
	Rot  components.Quat `net:"quat,bits=9"`
	Vel  components.Vec3 `net:"vel,max=50,step=0.05"`
	Ammo uint8           `net:"range=0:100,owner"`
	HP   int16
}

type tag struct {
	Team uint8 `net:"range=0:3"`
	On   bool
}

type transform struct {
	Pos components.Vec3 `net:"world,step=0.001"`
	Rot components.Quat `net:"quat,bits=10"`
}

// scene is a ring of n transform entities, one component each.
type scene struct {
	reg  *schema.Registry
	w    *Ring
	ents []transform
	rng  *rand.Rand
	ptrs []unsafe.Pointer
	tick uint32
}

func newScene(n int) *scene {
	reg := schema.NewRegistry()
	schema.MustRegister[transform](reg)
	s := &scene{reg: reg, w: New(reg, 0), ents: make([]transform, n), rng: rand.New(rand.NewPCG(1, 2)), ptrs: make([]unsafe.Pointer, 1)}
	for i := range s.ents {
		s.ents[i] = transform{
			Pos: components.Vec3{X: s.rng.Float64() * 1000, Y: 1, Z: s.rng.Float64() * 1000},
			Rot: components.QuatAxisAngle(components.Vec3{Y: 1}, s.rng.Float64()*6),
		}
	}
	return s
}

// step moves a fraction of the entities and commits a frame.
func (s *scene) step(moving float64) *Frame {
	for i := range s.ents {
		if s.rng.Float64() < moving {
			e := &s.ents[i]
			e.Pos.X += 0.1
			e.Rot = e.Rot.Mul(components.QuatAxisAngle(components.Vec3{Y: 1}, 0.02)).Normalize()
		}
	}
	s.tick++
	s.w.Begin(s.tick)
	for i := range s.ents {
		s.ptrs[0] = unsafe.Pointer(&s.ents[i])
		s.w.Put(uint32(i), entity.Meta{Set: 1}, s.ptrs)
	}
	f := s.w.Commit()
	s.w.EndTick()
	return f
}
