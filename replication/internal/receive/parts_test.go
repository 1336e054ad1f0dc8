package receive

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/internal/baseline"
	"github.com/archenet/archenet/replication/internal/codec"
	"github.com/archenet/archenet/replication/internal/encode"
	"github.com/archenet/archenet/replication/internal/entity"
	"github.com/archenet/archenet/replication/internal/store"
	"github.com/archenet/archenet/replication/schema"
	"github.com/stretchr/testify/require"
)

// A tick's later parts written over its view in place give the views that
// merging them into new views gives: every view, after every datagram of a
// lossy, duplicating and reordering link, over ticks sent in several parts
// whose records move entities, add and remove them, change their
// component sets and respawn them.
func TestLaterPartsInPlace(t *testing.T) {
	reg := schema.NewRegistry()
	schema.MustRegister[fuzzShip](reg)
	schema.MustRegister[fuzzTag](reg)
	const n, depth = 400, 16
	w := store.New(reg, depth)
	enc := encode.NewGroup(w).NewEncoder()
	c := baseline.NewTracker(2, depth)
	inPlace, copying := NewReceiver(reg, 2, depth), NewReceiver(reg, 2, depth)
	copying.copyParts = true
	rng := rand.New(rand.NewPCG(21, 22))
	ships := make([]fuzzShip, n)
	tags := make([]fuzzTag, n)
	live := make([]bool, n)
	tagged := make([]bool, n)
	gen := make([]uint32, n)
	for i := range ships {
		ships[i] = fuzzShip{Pos: components.Vec3{X: rng.Float64() * 100, Z: rng.Float64() * 100}, Rot: components.QuatIdentity(), HP: int16(i)}
		live[i] = rng.IntN(5) != 0
		tagged[i] = rng.IntN(3) == 0
	}
	var pk encode.Packets
	var pending [][]byte
	deliver := func(d []byte) {
		t1, err1 := inPlace.Decode(d)
		t2, err2 := copying.Decode(d)
		require.Equal(t, fmt.Sprint(t2, err2), fmt.Sprint(t1, err1))
		requireSameView(t, copying.View(t1), inPlace.View(t1), "view %d", t1)
		requireSameView(t, copying.Exact(t1), inPlace.Exact(t1), "exact view %d", t1)
	}
	for tick := uint32(1); tick <= 300; tick++ {
		w.Begin(tick)
		for i := range ships {
			switch r := rng.IntN(100); {
			case r < 1 && rng.IntN(3) == 0:
				live[i] = !live[i]
				gen[i]++
			case r < 1:
				tagged[i] = !tagged[i]
			case r < 60:
				ships[i].Pos.X += 0.3
				ships[i].Rot = ships[i].Rot.Mul(components.QuatAxisAngle(components.Vec3{Y: 1}, 0.05)).Normalize()
			case r < 65:
				ships[i].HP++
				tags[i].On = !tags[i].On
			}
			if !live[i] {
				continue
			}
			set := uint64(1)
			ptrs := []unsafe.Pointer{unsafe.Pointer(&ships[i])}
			if tagged[i] {
				set |= 2
				ptrs = append(ptrs, unsafe.Pointer(&tags[i]))
			}
			w.Put(uint32(i), entity.Meta{Gen: gen[i], Owner: uint8(i % 4), Set: set}, ptrs)
		}
		w.Commit()
		enc.Build(c, encode.BuildOptions{Budget: encode.MinBudget + rng.IntN(400)}, &pk)
		w.EndTick()
		for i := range pk.Len() {
			pending = append(pending, append([]byte(nil), pk.At(i)...))
		}
		// The link: a datagram in 10 lost, 1 in 20 duplicated, and up to 6
		// delivered out of order.
		rng.Shuffle(len(pending), func(i, j int) {
			if rng.IntN(3) == 0 {
				pending[i], pending[j] = pending[j], pending[i]
			}
		})
		keep := max(0, len(pending)-6)
		for _, d := range pending[:keep] {
			if rng.IntN(10) == 0 {
				continue
			}
			deliver(d)
			if rng.IntN(20) == 0 {
				deliver(d)
			}
		}
		pending = slices.Delete(pending, 0, keep)
		for back := range uint32(depth) {
			requireSameView(t, copying.View(tick-back), inPlace.View(tick-back), "view %d", tick-back)
			requireSameView(t, copying.Exact(tick-back), inPlace.Exact(tick-back), "exact view %d", tick-back)
		}
		a1, a2 := inPlace.Ack(), copying.Ack()
		require.Equal(t, a2, a1)
		if rng.IntN(4) != 0 {
			c.Ack(&a1)
		}
	}
	t.Logf("later parts: %d in place, %d merged", inPlace.inPlaceN, inPlace.combinedN)
	require.Greater(t, inPlace.inPlaceN, 500, "later parts were written in place")
	require.Greater(t, inPlace.combinedN, 100, "later parts that add or remove entities were merged")
	require.Zero(t, copying.inPlaceN+copying.combinedN)
}

// requireSameView requires a and b to hold the same view.
func requireSameView(t *testing.T, want, got *View, msg string, args ...any) {
	t.Helper()
	m := fmt.Sprintf(msg, args...)
	if want == nil || got == nil {
		require.Equal(t, want == nil, got == nil, m)
		return
	}
	require.Equal(t, want.Tick, got.Tick, m)
	if !slices.Equal(want.Slots, got.Slots) || !slices.Equal(want.Metas, got.Metas) || !slices.Equal(want.Srcs, got.Srcs) {
		require.Equal(t, [3]any{want.Slots, want.Metas, want.Srcs}, [3]any{got.Slots, got.Metas, got.Srcs}, m)
	}
	for i := range want.Slots {
		if !slices.Equal(want.EntityLanes(i), got.EntityLanes(i)) {
			require.Equal(t, want.EntityLanes(i), got.EntityLanes(i), "%s: entry %d", m, i)
		}
	}
	require.Equal(t, [6]any{want.InputAck, want.HasInputAck, want.InputHeld, want.InputDepth, want.HasInputFeedback, want.coding},
		[6]any{got.InputAck, got.HasInputAck, got.InputHeld, got.InputDepth, got.HasInputFeedback, got.coding}, m)
}

type poseOwnRot struct {
	Pos components.Vec3 `net:"world,step=0.001"`
	Rot components.Quat `net:"quat,bits=10,owner"`
}

type poseOwnPos struct {
	Pos components.Vec3 `net:"world,step=0.001,owner"`
	Rot components.Quat `net:"quat,bits=9"`
}

// A pose record's predicted field masks are codec.ChangedGroups', for its
// owner and for others, with owner-only groups or without.
func TestPoseMasks(t *testing.T) {
	reg := schema.NewRegistry()
	schema.MustRegister[fuzzPose](reg)
	schema.MustRegister[poseOwnRot](reg)
	schema.MustRegister[poseOwnPos](reg)
	r := NewReceiver(reg, 1, 0)
	require.Equal(t, uint64(7), r.poses)
	rng := rand.New(rand.NewPCG(31, 32))
	for i := range 3000 {
		id := rng.IntN(3)
		a, b := make([]uint64, 7), make([]uint64, 7)
		for l := range a {
			a[l] = rng.Uint64N(4)
			b[l] = a[l]
			if rng.IntN(3) == 0 {
				b[l] = rng.Uint64N(4)
			}
		}
		owner := rng.IntN(2) == 0
		require.Equal(t, codec.ChangedGroups(reg.Plans()[id], a, b, owner), r.poseMasks(1<<id, a, b, owner), "case %d", i)
	}
}
