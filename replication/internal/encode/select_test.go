package encode

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/replication/internal/baseline"
	"github.com/archenet/archenet/replication/internal/wire"
)

// selectionRig is n candidates in slot order with random sizes, deferred
// priorities and weights (ties among them), and a budget that keeps about a
// quarter of them.
func selectionRig(n int, seed uint64) (*candidates, []baseline.AccEntry, []float32, int) {
	rng := rand.New(rand.NewPCG(seed, 7))
	cs := &candidates{}
	var acc []baseline.AccEntry
	ws := make([]float32, n)
	sum := 0
	for i := range n {
		slot := uint32(i * 3)
		kind := kindDelta
		if rng.IntN(50) == 0 {
			kind = kindRemoval
		}
		cd := cand{slot: slot, kind: uint8(kind), bits: int32(8 + rng.IntN(120))}
		cs.list = append(cs.list, cd)
		sum += int(cd.bits)
		if rng.IntN(3) == 0 {
			acc = append(acc, baseline.AccEntry{Slot: slot, Acc: float32(rng.IntN(8))}) // (integers: ties)
		}
	}
	for i := range ws {
		ws[i] = float32(1 + rng.IntN(3))
	}
	cs.bits = sum
	return cs, acc, ws, sum / 8 / 4
}

// byPriorityReference is the comparison sort the key sort replaced.
func byPriorityReference(idx []int, cs *candidates) {
	slices.SortFunc(idx, func(a, b int) int {
		pa, pb := cs.list[a].pri, cs.list[b].pri
		switch {
		case pa > pb:
			return -1
		case pa < pb:
			return 1
		}
		return int(cs.list[a].slot) - int(cs.list[b].slot)
	})
}

// The key sort orders the candidates exactly as the comparison sort did:
// by descending priority, ties by slot, infinities first.
func TestByPriorityKeys(t *testing.T) {
	for seed := range uint64(20) {
		cs, acc, ws, total := selectionRig(300+int(seed)*37, seed)
		var s selection
		h := wire.Header{Tick: 1, Parts: 1}
		s.choose(cs, acc, ws, total, 1200, &h) // (sets each candidate's pri)
		for i := range cs.list {
			if seed%2 == 0 && i%17 == 0 {
				cs.list[i].pri = float32(math.Copysign(0, -1)) // (−0 ties with 0)
			}
		}
		s.fill(cs)
		s.byPriority(cs)
		want := make([]int, len(cs.list))
		for i := range want {
			want[i] = i
		}
		byPriorityReference(want, cs)
		require.Equal(t, want, s.idx, "seed %d", seed)
	}
}

func BenchmarkChooseOverBudget(b *testing.B) {
	cs, acc, ws, total := selectionRig(2000, 1)
	var s selection
	h := wire.Header{Tick: 1, Parts: 1}
	b.ReportAllocs()
	for b.Loop() {
		s.choose(cs, acc, ws, total, 1200, &h)
	}
	b.ReportMetric(float64(len(s.idx)), "kept")
}
