package interp

import (
	"math/rand/v2"
	"testing"

	"github.com/archenet/archenet/components"
	"github.com/stretchr/testify/require"
)

// A Track orders, replaces and evicts states exactly as a Buffer does:
// pushed the same ticks in a random order with duplicates and stale ones,
// it samples the same pair of states at every render tick.
func TestTrackMatchesBuffer(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for trial := range 200 {
		var buf Buffer
		var tr Track
		tr.Init(2)
		base := uint32(rng.Uint32()) // ticks wrap
		for range 60 {
			tick := base + uint32(rng.IntN(40))
			v := float64(rng.IntN(1000))
			okB := buf.Push(tick, components.Vec3{X: float64(tick - base), Y: v}, components.QuatIdentity())
			okT := tr.Push(tick, []uint64{uint64(tick - base), uint64(v)})
			require.Equal(t, okB, okT, "trial %d", trial)
		}
		require.Equal(t, buf.Len(), tr.Len())
		nb, _ := buf.Newest()
		nt, _ := tr.Newest()
		require.Equal(t, nb, nt)
		for r := -2.0; r < 45; r += 0.37 {
			pos, _, mb := buf.Sample(float64(base)+r, 3)
			a, b, f, mt := tr.Sample(float64(base)+r, 3)
			require.Equal(t, mb, mt)
			x := float64(a[0]) + (float64(b[0])-float64(a[0]))*f
			y := float64(a[1]) + (float64(b[1])-float64(a[1]))*f
			require.InDelta(t, pos.X, x, 1e-9, "trial %d render %v", trial, r)
			require.InDelta(t, pos.Y, y, 1e-9, "trial %d render %v", trial, r)
		}
	}
	var tr Track
	tr.Init(3)
	require.False(t, tr.Push(1, []uint64{1}), "wrong state size")
	_, _, _, mode := tr.Sample(1, 1)
	require.Equal(t, ModeEmpty, mode)
}

// Track pushes and samples without allocating.
func TestTrackNoAllocs(t *testing.T) {
	var tr Track
	tr.Init(4)
	lanes := []uint64{1, 2, 3, 4}
	tick := uint32(0)
	allocs := testing.AllocsPerRun(100, func() {
		tick++
		tr.Push(tick, lanes)
		tr.Sample(float64(tick)-1.5, 2)
	})
	require.Zero(t, allocs)
}
