package lagcomp

import (
	"math"
	"runtime"
	"testing"

	arche "github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/schema"
)

type rig struct {
	w     arche.World
	reg   *schema.Registry
	idTr  arche.ID
	idRep arche.ID
}

func newRig(t testing.TB) *rig {
	r := &rig{w: arche.NewWorld(), reg: schema.NewRegistry()}
	schema.MustRegister[components.Transform](r.reg)
	r.idTr = arche.ComponentID[components.Transform](&r.w)
	r.idRep = arche.ComponentID[components.Replicated](&r.w)
	return r
}

func (r *rig) spawn(x float64) arche.Entity {
	e := r.w.NewEntity(r.idRep, r.idTr)
	*(*components.Transform)(r.w.Get(e, r.idTr)) = components.Transform{Pos: components.Vec3{X: x}, Rot: components.QuatIdentity()}
	return e
}

func (r *rig) tr(e arche.Entity) *components.Transform {
	return (*components.Transform)(r.w.Get(e, r.idTr))
}

// States between recorded ticks are interpolated; ticks wrap; entities
// present in only one of the two ticks around a query are absent; queries
// outside the history fail; unreplicated entities are not recorded.
func TestHistoryAt(t *testing.T) {
	r := newRig(t)
	h, err := New[components.Transform](&r.w, r.reg, Config{Depth: 8})
	require.NoError(t, err)
	a := r.spawn(0)
	hidden := r.w.NewEntity(r.idTr)
	start := uint32(math.MaxUint32 - 3) // wraps during the test
	var late arche.Entity
	for i := range uint32(10) {
		r.tr(a).Pos.X = float64(i)
		if i == 6 {
			late = r.spawn(100)
		}
		h.Record(start + i)
	}
	newest, ok := h.Newest()
	require.True(t, ok)
	require.Equal(t, start+9, newest)
	var got components.Transform
	require.True(t, h.At(a, float64(start+7)+0.25, &got)) // fractional views come unwrapped from the client
	require.InDelta(t, 7.25, got.Pos.X, 1e-9)
	require.True(t, h.At(a, float64(newest), &got))
	require.InDelta(t, 9, got.Pos.X, 1e-9)
	require.True(t, h.At(late, float64(start+7)+0.5, &got))
	require.False(t, h.At(late, float64(start+5)+0.5, &got), "not there at tick 5")
	require.False(t, h.At(a, float64(newest)-8, &got), "beyond the depth")
	require.False(t, h.At(a, float64(newest)+0.5, &got), "the future")
	require.False(t, h.At(hidden, float64(newest), &got), "not replicated")

	n := 0
	require.True(t, h.Each(float64(start+8)+0.5, func(e arche.Entity, v *components.Transform) bool {
		n++
		if e == a {
			require.InDelta(t, 8.5, v.Pos.X, 1e-9)
		}
		return true
	}))
	require.Equal(t, 2, n)
}

func TestHistoryConfig(t *testing.T) {
	r := newRig(t)
	_, err := New[components.Velocity](&r.w, r.reg, Config{})
	require.ErrorIs(t, err, ErrInvalidConfig)
	_, err = New[components.Transform](&r.w, r.reg, Config{Depth: 1})
	require.ErrorIs(t, err, ErrInvalidConfig)
	for _, bad := range []float64{100, 15.5, -1, math.NaN()} {
		_, err = New[components.Transform](&r.w, r.reg, Config{Depth: 16, MaxRewind: bad})
		require.ErrorIs(t, err, ErrInvalidConfig, "MaxRewind %v is refused, not capped", bad)
	}
	h, err := New[components.Transform](&r.w, r.reg, Config{Depth: 16, MaxRewind: 15})
	require.NoError(t, err)
	require.Equal(t, 15.0, h.Config().MaxRewind)
	h, err = New[components.Transform](&r.w, r.reg, Config{Depth: 16})
	require.NoError(t, err)
	require.Equal(t, 15.0, h.Config().MaxRewind, "zero: Depth − 1")
}

// BenchmarkHistory: 2000 moving transforms, 32 ticks of history: the cost
// of recording a tick, of one At query and of an Each pass, and the memory.
func BenchmarkHistory(b *testing.B) {
	r := newRig(b)
	ents := make([]arche.Entity, 2000)
	for i := range ents {
		ents[i] = r.spawn(float64(i))
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	h, _ := New[components.Transform](&r.w, r.reg, Config{Depth: 32})
	for tick := range uint32(32) {
		for _, e := range ents {
			r.tr(e).Pos.Z += 0.1
		}
		h.Record(tick)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	heap := float64(after.HeapAlloc-before.HeapAlloc) / 1e6
	b.Run("Record", func(b *testing.B) {
		b.ReportAllocs()
		tick := uint32(32)
		for b.Loop() {
			h.Record(tick)
			tick++
		}
		b.ReportMetric(heap, "MB-heap")
	})
	newest, _ := h.Newest()
	b.Run("At", func(b *testing.B) {
		b.ReportAllocs()
		var tr components.Transform
		i := 0
		for b.Loop() {
			h.At(ents[i%len(ents)], float64(newest)-10.5, &tr)
			i++
		}
	})
	b.Run("Each", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			h.Each(float64(newest)-10.5, func(arche.Entity, *components.Transform) bool { return true })
		}
	})
}
