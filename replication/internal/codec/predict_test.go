package codec

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDivRound(t *testing.T) {
	for _, c := range []struct{ a, b, want int64 }{{7, 2, 4}, {-7, 2, -4}, {5, 3, 2}, {-5, 3, -2}, {4, 3, 1}, {-4, 3, -1}, {0, 5, 0}} {
		require.Equal(t, c.want, DivRound(c.a, c.b), "%d/%d", c.a, c.b)
	}
	// Powers of two take a shift: the same quotients as the division, at
	// the ties and on random values of every size below 2^62.
	ref := func(a, b int64) int64 {
		if a >= 0 {
			return (a + b/2) / b
		}
		return -((-a + b/2) / b)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for b := int64(1); b <= 600; b++ { // every divisor a prediction can take, powers of two or not
		for range 200 {
			a := rng.Int64N(1<<62) >> rng.UintN(62)
			if rng.IntN(2) == 0 {
				a = -a
			}
			require.Equal(t, ref(a, b), DivRound(a, b), "%d/%d", a, b)
			if b == 2 {
				require.Equal(t, ref(a, 2), HalfRound(a), "%d/2", a)
			}
		}
	}
	for _, a := range []int64{0, 1, -1, 2, -2, 3, -3, 1<<62 - 1, -(1<<62 - 1)} {
		require.Equal(t, ref(a, 2), HalfRound(a), "%d/2", a)
	}
	for s := range 40 {
		b := int64(1) << s
		for _, a := range []int64{0, 1, -1, b / 2, -b / 2, b/2 - 1, -(b/2 - 1), b/2 + 1, -(b/2 + 1), 3 * b / 2, -3 * b / 2, 1<<62 - 1, -(1<<62 - 1)} {
			require.Equal(t, ref(a, b), DivRound(a, b), "%d/%d", a, b)
		}
		for range 2000 {
			a := rng.Int64N(1<<62) >> rng.UintN(62)
			if rng.IntN(2) == 0 {
				a = -a
			}
			require.Equal(t, ref(a, b), DivRound(a, b), "%d/%d", a, b)
			require.Equal(t, ref(a, b+3), DivRound(a, b+3), "%d/%d", a, b+3)
		}
	}
}
