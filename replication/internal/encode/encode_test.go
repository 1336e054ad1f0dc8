package encode

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/archenet/archenet/replication/bitio"
	"github.com/archenet/archenet/replication/internal/baseline"
	"github.com/archenet/archenet/replication/internal/congestion"
	"github.com/archenet/archenet/replication/internal/entity"
	"github.com/archenet/archenet/replication/internal/receive"
	"github.com/archenet/archenet/replication/internal/store"
	"github.com/archenet/archenet/replication/internal/wire"
	"github.com/archenet/archenet/replication/schema"
	"github.com/stretchr/testify/require"
)

// refEnt is the reference design's entity: x, y, z (18 bits each), yaw (9
// bits, wrapping).
type refEnt struct {
	X   uint32  `net:"range=0:262143"`
	Y   uint32  `net:"range=0:262143"`
	Z   uint32  `net:"range=0:262143"`
	Yaw float64 `net:"angle,bits=9"`
}

// ptr returns a pointer to a copy of v.
func ptr[T any](v T) *T { return &v }

func refRegistry(t testing.TB) *schema.Registry {
	reg := schema.NewRegistry()
	_, err := schema.Register[refEnt](reg)
	require.NoError(t, err)
	return reg
}

// requireSameView checks that a receiver view equals a world frame exactly.
func requireSameView(t testing.TB, want *store.Frame, got *receive.View) {
	t.Helper()
	require.NotNil(t, got)
	require.Equal(t, want.Tick, got.Tick)
	require.Equal(t, want.Slots, got.Slots)
	require.Equal(t, want.Metas, got.Metas)
	require.Equal(t, len(want.Lanes), len(got.Lanes))
	for i := range want.Slots {
		require.Equal(t, want.EntityLanes(i), got.EntityLanes(i), "slot %d", want.Slots[i])
	}
}

// buildOne builds the tick's datagrams for c and returns the only one (nil
// if there is none); more than one fails t.
func buildOne(t testing.TB, enc *Encoder, c *baseline.Tracker, opt BuildOptions) ([]byte, BuildInfo) {
	t.Helper()
	var p Packets
	info := enc.Build(c, opt, &p)
	switch p.Len() {
	case 0:
		return nil, info
	case 1:
		return p.At(0), info
	}
	t.Fatalf("%d datagrams for tick %d, want one", p.Len(), info.Tick)
	return nil, info
}

// refSetup returns the reference registry with a world, an encoder, a
// client and a receiver at default depths.
func refSetup(t *testing.T) (*schema.Registry, *store.Ring, *Encoder, *baseline.Tracker, *receive.Receiver) {
	reg := refRegistry(t)
	w := store.New(reg, 0)
	return reg, w, newEncoder(w), baseline.NewTracker(0, 0), receive.NewReceiver(reg, 0, 0)
}

// TestReferenceCase is the reference design's delta test: 200 entities as
// baseline; every 10th moves x by 3 steps and yaw by 1; entity 5 removed;
// entity 900 added. The reference encodes it in 96 bytes; the goal is ≤ 64.
func TestReferenceCase(t *testing.T) {
	_, w, enc, c, rcv := refSetup(t)
	m := entity.Meta{Gen: 0, Set: 1}

	w.Begin(1)
	for i := uint32(0); i < 200; i++ {
		w.PutLanes(i, m, []uint64{uint64(i) * 100, 5000, 7, 300})
	}
	f1 := w.Commit()
	dg, info := buildOne(t, enc, c, BuildOptions{Budget: 64 << 10})
	require.Equal(t, 200, info.Fulls)
	_, err := rcv.Decode(dg)
	require.NoError(t, err)
	requireSameView(t, f1, rcv.Latest())
	c.Ack(ptr(rcv.Ack()))

	w.Begin(2)
	for i := uint32(0); i < 200; i++ {
		if i == 5 {
			continue
		}
		x, yaw := uint64(i)*100, uint64(300)
		if i%10 == 0 {
			x += 3
			yaw = (yaw + 1) % 512
		}
		w.PutLanes(i, m, []uint64{x, 5000, 7, yaw})
	}
	w.PutLanes(900, m, []uint64{1, 2, 3, 4})
	f2 := w.Commit()
	dg, info = buildOne(t, enc, c, BuildOptions{})
	require.Equal(t, uint32(1), info.Baseline)
	require.Equal(t, 20, info.Deltas)
	require.Equal(t, 1, info.Fulls)
	require.Equal(t, 1, info.Removals)
	_, err = rcv.Decode(dg)
	require.NoError(t, err)
	requireSameView(t, f2, rcv.Latest())
	t.Logf("reference case: %d bytes including the %d-byte header region (reference design: 96 bytes; full quantized snapshot: 1800 bytes)", len(dg), 7)
	require.LessOrEqual(t, len(dg), 64)
	require.Equal(t, 55, len(dg), "pin the size: a change must be deliberate")
}

func TestByteRateBudget(t *testing.T) {
	reg := refRegistry(t)
	w := store.New(reg, 0)
	enc := newEncoder(w)
	c := baseline.NewTracker(0, 0)
	var rate congestion.Bucket
	rate.Set(3000, 1200) // 3 KB/s: at 30 Hz about 100 B per tick
	rcv := receive.NewReceiver(reg, 0, 0)
	sent := 0
	for tick := uint32(1); tick <= 90; tick++ {
		w.Begin(tick)
		for i := uint32(0); i < 300; i++ {
			w.PutLanes(i, entity.Meta{Set: 1}, []uint64{uint64(i) + uint64(tick), 1, 2, 3})
		}
		w.Commit()
		rate.Refill(1.0 / 30)
		allow, limited := rate.Allowance(1<<30), rate.Limited()
		dg, info := buildOne(t, enc, c, BuildOptions{Allowance: allow, Limited: limited})
		rate.Spend(info.Bytes)
		w.EndTick()
		sent += len(dg)
		if len(dg) > 0 {
			_, err := rcv.Decode(dg)
			require.NoError(t, err)
			c.Ack(ptr(rcv.Ack()))
		} else {
			require.True(t, info.Starved)
		}
	}
	// 3 s at 3000 B/s plus the initial burst.
	require.LessOrEqual(t, sent, 3*3000+1200)
	require.Greater(t, sent, 3*3000-1200)
}

func TestInputAckExtension(t *testing.T) {
	_, w, enc, c, rcv := refSetup(t)
	w.Begin(1)
	w.PutLanes(0, entity.Meta{Set: 1}, []uint64{1, 2, 3, 4})
	w.Commit()
	dg, _ := buildOne(t, enc, c, BuildOptions{InputAck: 123456, HasInputAck: true})
	_, err := rcv.Decode(dg)
	require.NoError(t, err)
	v := rcv.Latest()
	require.True(t, v.HasInputAck)
	require.Equal(t, uint32(123456), v.InputAck)
	w.Begin(2)
	w.PutLanes(0, entity.Meta{Set: 1}, []uint64{1, 2, 3, 4})
	w.Commit()
	dg, _ = buildOne(t, enc, c, BuildOptions{})
	_, err = rcv.Decode(dg)
	require.NoError(t, err)
	require.False(t, rcv.Latest().HasInputAck)
}

// The input feedback rides with the input ack: the held tick relative to
// it, clamped to ±wire.MaxInputLead, and the depth, clamped to ±wire.MaxInputDepth; a
// datagram claiming more is corrupt.
func TestInputFeedbackExtension(t *testing.T) {
	reg, w, enc, c, rcv := refSetup(t)
	fb := func(ack, held uint32, depth int) BuildOptions {
		return BuildOptions{InputAck: ack, HasInputAck: true, InputHeld: held, InputDepth: depth, HasInputFeedback: true}
	}
	for i, tc := range []struct {
		opt   BuildOptions
		has   bool
		held  uint32
		depth int
	}{
		{fb(7, 12, 3), true, 12, 3},
		{fb(8, 6, -2), true, 6, -2},
		{fb(9, 9, 0), true, 9, 0},
		{fb(1<<32-2, 3, 0), true, 3, 0}, // across the wrap
		{fb(10, 10+wire.MaxInputLead+5, 5000), true, 10 + wire.MaxInputLead, wire.MaxInputDepth},
		{fb(100000, 100000-wire.MaxInputLead-5, -5000), true, 100000 - wire.MaxInputLead, -wire.MaxInputDepth},
		{BuildOptions{InputAck: 12, HasInputAck: true, InputHeld: 13, InputDepth: 4}, false, 0, 0},
		{BuildOptions{InputHeld: 13, InputDepth: 4, HasInputFeedback: true}, false, 0, 0}, // no ack: no feedback
	} {
		w.Begin(uint32(i + 1))
		w.PutLanes(0, entity.Meta{Set: 1}, []uint64{1, 2, 3, uint64(i)})
		w.Commit()
		dg, _ := buildOne(t, enc, c, tc.opt)
		_, err := rcv.Decode(dg)
		require.NoError(t, err)
		v := rcv.Latest()
		require.Equal(t, tc.opt.HasInputAck, v.HasInputAck, "case %d", i)
		require.Equal(t, tc.opt.InputAck*b2u(tc.opt.HasInputAck), v.InputAck, "case %d", i)
		require.Equal(t, tc.has, v.HasInputFeedback, "case %d", i)
		require.Equal(t, tc.held, v.InputHeld*b2u(tc.has), "case %d", i)
		require.Equal(t, tc.depth, v.InputDepth, "case %d", i)
	}
	// Hand-made headers with a lead or a depth past its bound.
	for _, bad := range [][2]int64{{wire.MaxInputLead + 1, 0}, {-wire.MaxInputLead - 1, 0}, {0, wire.MaxInputDepth + 1}, {0, -wire.MaxInputDepth - 1}} {
		bw := extHeader()
		bw.WriteBool(false)  // input ack in full
		bw.WriteBits(99, 32) // input ack
		bw.WriteBool(true)   // feedback follows
		bw.WriteExpGolomb(bitio.ZigZag(bad[0]), 2)
		bw.WriteExpGolomb(bitio.ZigZag(bad[1]), 2)
		_, err := receive.NewReceiver(reg, 0, 0).Decode(bw.Bytes())
		require.ErrorIs(t, err, wire.ErrCorrupt, "lead %d depth %d", bad[0], bad[1])
	}
}

// Once the client holds a baseline whose datagram carried an ack, the ack
// travels as a small step from it (a few bits instead of 32); a relative ack
// without such a baseline is corrupt.
func TestInputAckRelativeToBaseline(t *testing.T) {
	reg, w, enc, c, rcv := refSetup(t)
	sizes := map[bool][]int{}
	for tick := uint32(1); tick <= 12; tick++ {
		w.Begin(tick)
		w.PutLanes(0, entity.Meta{Set: 1}, []uint64{1, 2, 3, 4})
		w.Commit()
		ack := 1000 + 2*tick
		dg, info := buildOne(t, enc, c, BuildOptions{InputAck: ack, HasInputAck: tick != 5})
		_, err := rcv.Decode(dg)
		require.NoError(t, err)
		v := rcv.Latest()
		require.Equal(t, tick != 5, v.HasInputAck, "tick %d", tick)
		if tick != 5 {
			require.Equal(t, ack, v.InputAck, "tick %d", tick)
		}
		c.Ack(ptr(rcv.Ack()))
		if tick != 5 { // tick 6's baseline (5) carried no ack: 6 sends it in full
			rel := info.Baseline != 0 && tick != 6
			sizes[rel] = append(sizes[rel], len(dg))
		}
	}
	// Same records (none), so the size difference is the ack: 32 bits in
	// full, 4 bits (rel flag + a 3-bit step) relative.
	require.Less(t, slices.Max(sizes[true]), slices.Min(sizes[false]))

	// Hand-made headers: a relative ack without a baseline.
	bw := extHeader()
	bw.WriteBool(true) // relative ack
	bw.WriteExpGolomb(bitio.ZigZag(2), 2)
	bw.WriteBool(false) // no feedback
	_, err := receive.NewReceiver(reg, 0, 0).Decode(bw.Bytes())
	require.ErrorIs(t, err, wire.ErrCorrupt)
}

// extHeader starts a hand-made snapshot header for tick 100 with no
// baseline and no records, up to and including the extension bit.
func extHeader() *bitio.Writer {
	var bw bitio.Writer
	bw.WriteBits(uint64(wire.KindSnapshot), 8)
	bw.WriteBits(100, 32)   // tick
	bw.WriteBits(0, 1)      // one part
	bw.WriteExpGolomb(0, 0) // no baseline
	bw.WriteExpGolomb(0, 0) // no records
	bw.WriteBits(0, 3)      // gap code order
	bw.WriteBits(1, 1)      // extension
	return &bw
}

func b2u(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

// bestGapK's histogram form must find the same order and total as trying
// all 8 orders gap by gap.
func TestBestGapKMatchesExhaustive(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	for iter := 0; iter < 2000; iter++ {
		gaps := make([]uint64, 1+rng.IntN(200))
		scale := uint64(1) << rng.IntN(48)
		for i := range gaps {
			gaps[i] = rng.Uint64N(scale + 1)
			if rng.IntN(8) == 0 { // runs of ones carry: 2^j − 1, 2^j − 2^i
				j := rng.IntN(48)
				gaps[i] = 1<<j - 1<<rng.IntN(j+1)
			}
		}
		best, bestK := math.MaxInt, uint(0)
		for k := uint(0); k < 8; k++ {
			n := 0
			for _, g := range gaps {
				n += bitio.ExpGolombLen(g, k)
			}
			if n < best {
				best, bestK = n, k
			}
		}
		k, got := bestGapK(gaps)
		require.Equal(t, best, got, "gaps %v", gaps[:min(len(gaps), 10)])
		require.Equal(t, bestK, k, "gaps %v", gaps[:min(len(gaps), 10)])
	}
}

// An ack that names a one-datagram tick but holds none of its parts (an
// honest client never sends one) leaves the view unusable as a baseline;
// an ack holding a two-datagram tick's first part makes the view exactly
// that part's records.
func TestAckPartsOfTick(t *testing.T) {
	s := newBenchScene(40)
	enc := newEncoder(s.w)
	c := baseline.NewTracker(0, 0)
	var pk Packets
	s.step(0)
	enc.Build(c, BuildOptions{}, &pk)
	require.Equal(t, 1, pk.Len())
	c.Ack(&wire.Ack{Newest: s.tick, Partial: 1, PartCount: [wire.AckWindow]uint8{1}})
	require.Zero(t, c.Acked, "a one-part tick acked without its part")

	s.step(0)
	info := enc.Build(c, BuildOptions{Budget: 400}, &pk)
	require.Equal(t, uint32(0), info.Baseline, "the unusable view is no baseline")
	require.Greater(t, pk.Len(), 1)
	c.Ack(&wire.Ack{Newest: s.tick, Partial: 1, Parts: [wire.AckWindow]uint64{1}, PartCount: [wire.AckWindow]uint8{uint8(pk.Len())}})
	require.EqualValues(t, 1, c.Acked)
	require.EqualValues(t, 1, c.AckedPartial)
	rcv := receive.NewReceiver(s.reg, 0, 0)
	_, err := rcv.Decode(pk.At(0))
	require.NoError(t, err)

	// The next tick is built on the partial view: decoded on top of the
	// first part alone, it gives the full frame.
	f := s.step(1)
	enc.Build(c, BuildOptions{}, &pk)
	for i := range pk.Len() {
		_, err := rcv.Decode(pk.At(i))
		require.NoError(t, err)
	}
	requireSameView(t, f, rcv.View(f.Tick))
}

// newEncoder returns the encoder of a new group over r (one encoder per
// ring; tests with several make them of one Group).
func newEncoder(r *store.Ring) *Encoder { return NewGroup(r).NewEncoder() }
