package encode

import (
	"math/rand/v2"
	"testing"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/internal/baseline"
	"github.com/archenet/archenet/replication/internal/codec"
	"github.com/archenet/archenet/replication/internal/receive"
	"github.com/archenet/archenet/replication/internal/store"
	"github.com/archenet/archenet/replication/internal/wire"
	"github.com/archenet/archenet/replication/schema"
	"github.com/stretchr/testify/require"
)

// walkDatagrams runs n ticks of the random-walk scene (entities walkers,
// 10% moving) with acks lagging by lag ticks, and returns the datagrams (the
// first tick's full state takes several; after it, one a tick).
func walkDatagrams(t testing.TB, entities, n, lag int, comp *codec.Compressor, rcv *receive.Receiver) ([][]byte, *store.Ring) {
	reg := schema.NewRegistry()
	schema.MustRegister[walker](reg)
	w := store.New(reg, 0)
	enc := newEncoder(w)
	enc.Compression = comp
	c := baseline.NewTracker(0, 0)
	if rcv == nil {
		rcv = receive.NewReceiver(reg, 0, 0)
	}
	rng := rand.New(rand.NewPCG(3, 3))
	ents := make([]walker, entities)
	for i := range ents {
		ents[i].Pos = components.Vec3{X: rng.Float64() * 500, Z: rng.Float64() * 500}
	}
	var out [][]byte
	var acks []wire.Ack
	var pk Packets
	for tick := uint32(1); tick <= uint32(n); tick++ {
		walkTick(w, rng, ents, tick)
		enc.Build(c, BuildOptions{}, &pk)
		w.EndTick()
		for i := range pk.Len() {
			dg := append([]byte(nil), pk.At(i)...)
			out = append(out, dg)
			_, err := rcv.Decode(dg)
			require.NoError(t, err)
		}
		if v := rcv.View(tick); v != nil {
			// The view is exactly what the server believes the client holds.
			slots, lanes, ok := expectedView(w, c, tick)
			if ok {
				require.Equal(t, slots, v.Slots)
				for i := range slots {
					require.Equal(t, lanes[i], v.EntityLanes(i))
				}
			}
		}
		acks = append(acks, rcv.Ack())
		if len(acks) > lag {
			c.Ack(&acks[len(acks)-1-lag])
		}
	}
	return out, w
}

func meanLen(ds [][]byte) float64 {
	n := 0
	for _, d := range ds {
		n += len(d)
	}
	return float64(n) / float64(len(ds))
}

// TestZstdFigures measures zstd with and without a trained dictionary on
// real datagrams, checks that compressed datagrams decode to the same state,
// and logs the sizes (the closing figures of the snapshot issue).
func TestZstdFigures(t *testing.T) {
	raw, _ := walkDatagrams(t, 1000, 200, 6, nil, nil)
	steady := raw[100:]
	comp, err := codec.NewCompressor(nil)
	require.NoError(t, err)
	reg := schema.NewRegistry()
	schema.MustRegister[walker](reg)
	rcv := receive.NewReceiver(reg, 0, 0)
	require.NoError(t, rcv.EnableZstd(nil))
	zd, _ := walkDatagrams(t, 1000, 200, 6, comp, rcv)
	t.Logf("1000 walkers, acks 6 ticks behind: raw %.0f B/tick, zstd %.0f B/tick (compressed %d of %d)",
		meanLen(steady), meanLen(zd[100:]), comp.Won, comp.Tried)
	require.LessOrEqual(t, meanLen(zd[100:]), meanLen(steady)) // never worse: raw fallback

	dict, err := codec.TrainDictionary(raw[20:100])
	require.NoError(t, err)
	dcomp, err := codec.NewCompressor(dict)
	require.NoError(t, err)
	rcv2 := receive.NewReceiver(reg, 0, 0)
	require.NoError(t, rcv2.EnableZstd(dict))
	dd, _ := walkDatagrams(t, 1000, 200, 6, dcomp, rcv2)
	t.Logf("with a %d-byte dictionary: %.0f B/tick (compressed %d of %d)", len(dict), meanLen(dd[100:]), dcomp.Won, dcomp.Tried)

	// Small datagrams: 100 walkers.
	small, _ := walkDatagrams(t, 100, 200, 2, nil, nil)
	sdict, err := codec.TrainDictionary(small[20:100])
	require.NoError(t, err)
	scomp, _ := codec.NewCompressor(sdict)
	rcv3 := receive.NewReceiver(reg, 0, 0)
	require.NoError(t, rcv3.EnableZstd(sdict))
	sd, _ := walkDatagrams(t, 100, 200, 2, scomp, rcv3)
	t.Logf("100 walkers: raw %.0f B/tick, zstd+dict %.0f B/tick (compressed %d of %d)", meanLen(small[100:]), meanLen(sd[100:]), scomp.Won, scomp.Tried)
}
