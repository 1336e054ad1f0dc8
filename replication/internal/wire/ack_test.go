package wire

import (
	"math/bits"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// An Ack parsed into a reused one (as a peer does, ack after ack) says
// the same as one parsed into a fresh Ack: the parts an earlier Ack left
// behind are never read, and re-encoding gives the same bytes.
func TestParseAckIntoReused(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var reused Ack
	for range 5000 {
		a := Ack{Newest: 40 + rng.Uint32N(1000), Mask: rng.Uint32()}
		if rng.IntN(2) == 0 {
			named := uint64(1) | uint64(a.Mask)<<1
			for n := named; n != 0; n &= n - 1 {
				if rng.IntN(4) == 0 {
					i := bits.TrailingZeros64(n)
					cnt := 1 + rng.IntN(MaxParts)
					a.Partial |= 1 << i
					a.PartCount[i] = uint8(cnt)
					a.Parts[i] = rng.Uint64() & (1<<cnt - 1)
				}
			}
		}
		b := a.Append(nil)
		require.Equal(t, len(b), a.Len())
		if rng.IntN(10) == 0 {
			// A truncated ack fails, into the reused one too.
			_, err := ParseAckInto(&reused, b[:rng.IntN(len(b))])
			require.Error(t, err)
			require.Zero(t, reused.Newest)
		}
		n, err := ParseAckInto(&reused, b)
		require.NoError(t, err)
		require.Equal(t, len(b), n)
		fresh, _, err := ParseAck(b)
		require.NoError(t, err)
		for tick := a.Newest - AckWindow - 1; tick != a.Newest+2; tick++ {
			p1, all1 := reused.Holds(tick)
			p2, all2 := fresh.Holds(tick)
			require.Equal(t, all2, all1, "tick %d", tick)
			require.Equal(t, p2, p1, "tick %d", tick)
		}
		require.Equal(t, b, reused.Append(nil))
	}
}
