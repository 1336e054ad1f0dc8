package snapshot

import (
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/schema"
	"github.com/stretchr/testify/require"
)

// TestWorldFastPathsMatchTheGeneralOne: a World fed with Put and Keep (whose
// common case copies the previous frame and quantizes only what changed)
// builds, tick for tick, the same frames, change lists and change ticks as
// a World fed the same entities with PutLanes (entry by entry), through
// moves, spawns and despawns anywhere in the slot order, component set and
// generation changes, and dormant entities.
func TestWorldFastPathsMatchTheGeneralOne(t *testing.T) {
	reg := schema.NewRegistry()
	schema.MustRegister[fuzzShip](reg)
	schema.MustRegister[fuzzTag](reg)
	plans := reg.Plans()
	fast, ref := NewWorld(reg, 4), NewWorld(reg, 4)
	type ent struct {
		alive bool
		moved bool // this tick (else it may be kept without reading)
		meta  Meta
		ship  fuzzShip
		tag   fuzzTag
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
			plans[i].Quantize(ptrs[i], l)
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
				e.ship = fuzzShip{Pos: components.Vec3{X: float64(i)}, Rot: components.QuatIdentity(), HP: 50}
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
