package mirror

import (
	"reflect"
	"testing"
	"time"
	"unsafe"

	arche "github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/interp"
	"github.com/archenet/archenet/replication/internal/baseline"
	"github.com/archenet/archenet/replication/internal/encode"
	"github.com/archenet/archenet/replication/internal/entity"
	"github.com/archenet/archenet/replication/internal/receive"
	"github.com/archenet/archenet/replication/internal/store"
	"github.com/archenet/archenet/replication/internal/wire"
	"github.com/archenet/archenet/replication/schema"
	"github.com/archenet/archenet/replication/timing"
)

type pos2 struct {
	X float64 `net:"range=-500:500,step=0.01"`
	Z float64 `net:"range=-500:500,step=0.01"`
}

// rig is a server's side in miniature (a frame ring, an encoder, the
// client's baselines) feeding a receiver and the mirrors: 20 entities, the
// even ones with a Transform (interpolated into a Visual), the odd ones
// with a pos2 (interpolated in place), all moving every tick.
type rig struct {
	mirrors  *Mirrors
	world    *arche.World
	counts   Counts
	arrivals timing.Arrivals
	ring     *store.Ring
	enc      *encode.Encoder
	tracker  *baseline.Tracker
	rcv      *receive.Receiver
	pk       encode.Packets
	trs      []components.Transform
	ps       []pos2
	ptr      []unsafe.Pointer
	tick     uint32
	now      time.Time
}

const rigTick = 33 * time.Millisecond

func newRig(t *testing.T) *rig {
	reg := schema.NewRegistry()
	schema.MustRegister[components.Transform](reg)
	schema.MustRegister[pos2](reg)
	w := arche.NewWorld()
	r := &rig{world: &w, ring: store.New(reg, 16), tracker: baseline.NewTracker(1, 16), rcv: receive.NewReceiver(reg, 1, 16),
		trs: make([]components.Transform, 10), ps: make([]pos2, 10), ptr: make([]unsafe.Pointer, 1), now: time.Unix(100, 0)}
	r.enc = encode.NewGroup(r.ring).NewEncoder()
	var spawns, applied uint64
	r.counts = Counts{Spawns: &spawns, Applied: &applied}
	var err error
	r.mirrors, err = New(&w, Config{Registry: reg, MaxEntities: 64, Interpolation: true,
		InterpolatedComponents: []reflect.Type{reflect.TypeFor[pos2]()}, MaxPredictedSpawns: 4}, r.counts)
	require.NoError(t, err)
	r.arrivals = timing.NewArrivals(rigTick, time.Second, rigTick/4)
	require.NoError(t, r.mirrors.Welcome(1, &r.arrivals))
	for i := range r.trs {
		r.trs[i] = components.Transform{Pos: components.Vec3{X: float64(i)}, Rot: components.QuatIdentity()}
	}
	return r
}

// step runs one net tick: the entities move, the tick's datagrams are
// built, decoded and acked, and the mirrors are shown its view and drawn
// over four frames.
func (r *rig) step(t testing.TB) *receive.View {
	r.tick++
	r.ring.Begin(r.tick)
	for i := range r.trs {
		r.trs[i].Pos.X += 0.1
		r.ps[i].Z += 0.2
		r.ptr[0] = unsafe.Pointer(&r.trs[i])
		r.ring.Put(uint32(2*i), entity.Meta{Gen: 1, Set: 1}, r.ptr)
		r.ptr[0] = unsafe.Pointer(&r.ps[i])
		r.ring.Put(uint32(2*i+1), entity.Meta{Gen: 1, Set: 2}, r.ptr)
	}
	r.ring.Commit()
	r.enc.Build(r.tracker, encode.BuildOptions{Budget: 1200}, &r.pk)
	r.ring.EndTick()
	for j := range r.pk.Len() {
		if _, err := r.rcv.Decode(r.pk.At(j)); err != nil {
			t.Fatal(err)
		}
	}
	a := r.rcv.Ack()
	r.tracker.Ack(&a)
	r.arrivals.Observe(r.tick, r.now)
	v := r.rcv.View(r.tick)
	r.mirrors.Show(v)
	for range 4 {
		r.now = r.now.Add(rigTick / 4)
		r.mirrors.Interpolate(r.now)
	}
	return v
}

// TestShowAndInterpolateAllocateNothing: spawned mirrors take each tick's
// view (their state written, their buffers and tracks fed) and are drawn
// every frame, and a net tick of that — decode, show, four frames drawn —
// allocates nothing.
func TestShowAndInterpolateAllocateNothing(t *testing.T) {
	r := newRig(t)
	v := r.step(t)
	for i, slot := range v.Slots {
		r.mirrors.Spawn(r.tick, wire.SpawnEntry{Slot: slot, Meta: v.Metas[i], Lanes: v.EntityLanes(i)}, nil)
	}
	require.Equal(t, 20, r.mirrors.Len())
	require.Equal(t, uint64(20), *r.counts.Spawns)
	for range 40 {
		r.step(t)
	}
	require.True(t, r.mirrors.Clock().Ready())
	require.Zero(t, testing.AllocsPerRun(20, func() { r.step(t) }), "a net tick of the client's mirrors")

	// The state is the newest view's; what is drawn lags it by the render
	// delay, and is interpolated.
	e, ok := r.mirrors.Entity(components.NetID{Handle: components.MakeHandle(0, 4), Gen: 1})
	require.True(t, ok)
	tr := (*components.Transform)(r.world.Get(e, arche.ComponentID[components.Transform](r.world)))
	require.InDelta(t, r.trs[2].Pos.X, tr.Pos.X, 1e-3)
	vis := (*components.Visual)(r.world.Get(e, arche.ComponentID[components.Visual](r.world)))
	require.Less(t, vis.Pos.X, tr.Pos.X)
	require.Greater(t, vis.Pos.X, tr.Pos.X-1)
	e, ok = r.mirrors.Entity(components.NetID{Handle: components.MakeHandle(0, 5), Gen: 1})
	require.True(t, ok)
	p := (*pos2)(r.world.Get(e, arche.ComponentID[pos2](r.world)))
	require.Less(t, p.Z, r.ps[2].Z)
	require.Greater(t, p.Z, r.ps[2].Z-2)
	st := r.mirrors.InterpolationStats()
	require.Equal(t, 20, st.Interpolating+st.Extrapolating, "%+v", st)
	tick, ok := r.mirrors.StateTick(components.NetID{Handle: components.MakeHandle(0, 5), Gen: 1})
	require.True(t, ok)
	require.Equal(t, r.tick, tick)
}

// TestPredictedSpawnAdoptedEndedExpired: a provisional entity becomes the
// mirror of the spawn of its key (never interpolated); one whose twin the
// server ended is handed to the game's hook; one no spawn came for expires.
func TestPredictedSpawnAdoptedEndedExpired(t *testing.T) {
	r := newRig(t)
	var ended []uint32
	r.mirrors.cfg.OnPredictedSpawnEnd = func(key uint32, e arche.Entity, removed bool) {
		require.True(t, r.world.Alive(e))
		if removed {
			ended = append(ended, key)
		} else {
			ended = append(ended, key+100)
		}
		r.world.RemoveEntity(e)
	}
	r.mirrors.cfg.PredictedSpawnTimeout = time.Second
	idTr := arche.ComponentID[components.Transform](r.world)
	_, err := r.mirrors.SpawnPredicted(0, 7, r.now, idTr)
	require.ErrorIs(t, err, ErrProvisional, "not joined")
	shot, err := r.mirrors.SpawnPredicted(1, 7, r.now, idTr)
	require.NoError(t, err)
	_, err = r.mirrors.SpawnPredicted(1, 7, r.now, idTr)
	require.ErrorContains(t, err, "already waiting")
	_, err = r.mirrors.SpawnPredicted(1, 8, r.now, idTr)
	require.NoError(t, err)
	_, err = r.mirrors.SpawnPredicted(1, 9, r.now, idTr)
	require.NoError(t, err)
	id := *(*components.NetID)(r.world.Get(shot, arche.ComponentID[components.NetID](r.world)))
	require.Equal(t, components.NetID{Handle: components.MakeHandle(1, 7), Gen: ProvisionalGen}, id)

	lanes := make([]uint64, r.mirrors.plans[1].NumLanes())
	r.mirrors.Spawn(3, wire.SpawnEntry{Slot: 40, Meta: entity.Meta{Gen: 2, Owner: 1, Set: 2}, Lanes: lanes, HasKey: true, Key: 7}, nil)
	e, ok := r.mirrors.Entity(components.NetID{Handle: components.MakeHandle(1, 40), Gen: 2})
	require.True(t, ok)
	require.Equal(t, shot, e, "the provisional entity is the mirror")
	require.True(t, r.world.Has(e, arche.ComponentID[pos2](r.world)))
	require.False(t, r.world.Has(e, idTr), "its set is the server's")
	require.False(t, r.world.Has(e, arche.ComponentID[interp.Track](r.world)), "never interpolated")
	_, waiting := r.mirrors.Provisional(7)
	require.False(t, waiting)

	r.mirrors.End(8)
	r.mirrors.Expire(r.now.Add(2 * time.Second))
	require.Equal(t, []uint32{8, 109}, ended)
	r.mirrors.RemoveAll()
	require.Zero(t, r.mirrors.Len())
	require.False(t, r.world.Alive(shot))
}
