package encode

import (
	"math/rand/v2"
	"testing"

	"github.com/archenet/archenet/replication/internal/entity"
)

// TestNextCandIsTheWordScan: nextCand finds the word a scan with word()
// finds, for sets of different lengths (the tail past the shortest) and
// densities, from every start and to every limit.
func TestNextCandIsTheWordScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	set := func(n int, density float64) entity.Bitset {
		b := make(entity.Bitset, n)
		for i := range b {
			for range 2 {
				if rng.Float64() < density {
					b[i] |= 1 << rng.IntN(64)
				}
			}
		}
		return b
	}
	for range 300 {
		d := rng.Float64() * 0.3
		rel, held, changed := set(rng.IntN(40), d), set(rng.IntN(40), d), set(rng.IntN(40), d)
		words := max(len(rel), len(held), len(changed))
		for i := 0; i <= words; i++ {
			for lim := i; lim <= words+1; lim++ {
				want := i
				for want < lim && changed.Word(want)&(rel.Word(want)|held.Word(want))|(rel.Word(want)^held.Word(want)) == 0 {
					want++
				}
				if got := nextCand(rel, held, changed, i, lim); got != want {
					t.Fatalf("nextCand(%x, %x, %x, %d, %d) = %d, want %d", rel, held, changed, i, lim, got, want)
				}
			}
		}
	}
}
