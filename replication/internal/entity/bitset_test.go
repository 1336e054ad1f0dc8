package entity

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestBitsetOps(t *testing.T) {
	var b Bitset
	for _, s := range []uint32{0, 63, 64, 200} {
		b.Set(s)
	}
	if !b.Has(63) || !b.Has(200) || b.Has(1) || b.Has(1<<20) || b.Count() != 4 {
		t.Fatalf("set %x: has(63) %v has(200) %v count %d", b, b.Has(63), b.Has(200), b.Count())
	}
	b.Clear(63)
	b.Clear(1 << 20) // beyond the end: no effect
	if b.Has(63) || b.Count() != 3 || b.Word(3) != 1<<(200-192) || b.Word(99) != 0 {
		t.Fatalf("after Clear: %x", b)
	}
	var o Bitset
	o.Set(5)
	o.Set(300)
	b.Or(o)
	if !b.Has(5) || !b.Has(300) || b.Count() != 5 {
		t.Fatalf("after Or: %x", b)
	}
	b.Reset()
	if len(b) != 0 || cap(b) == 0 {
		t.Fatalf("after Reset: len %d cap %d", len(b), cap(b))
	}
}

func TestEntriesEntityLanes(t *testing.T) {
	e := Entries{Slots: []uint32{1, 4}, Metas: make([]Meta, 2), Offs: []uint32{0, 3}, Lanes: []uint64{1, 2, 3, 4, 5}}
	if got := e.EntityLanes(0); !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Fatalf("entry 0: %v", got)
	}
	if got := e.EntityLanes(1); !slices.Equal(got, []uint64{4, 5}) || e.Len() != 2 {
		t.Fatalf("entry 1: %v", got)
	}
	e.Reset()
	if e.Len() != 0 || len(e.Lanes) != 0 {
		t.Fatalf("after Reset: %+v", e)
	}
}

// TestNextDiffIsTheWordScan: NextDiff finds the first differing word a
// scan with Word finds, for sets of different lengths.
func TestNextDiffIsTheWordScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 500 {
		a, b := make(Bitset, rng.IntN(20)), make(Bitset, rng.IntN(20))
		for _, s := range []Bitset{a, b} {
			for i := range s {
				if rng.IntN(4) == 0 {
					s[i] = 1 << rng.IntN(64)
				}
			}
		}
		for i := 0; i <= max(len(a), len(b)); i++ {
			want := i
			for want < max(len(a), len(b)) && a.Word(want) == b.Word(want) {
				want++
			}
			if got := NextDiff(a, b, i); got != want {
				t.Fatalf("NextDiff(%x, %x, %d) = %d, want %d", a, b, i, got, want)
			}
		}
	}
}
