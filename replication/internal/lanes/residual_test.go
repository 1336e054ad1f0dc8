package lanes

import (
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/bitio"
	"github.com/archenet/archenet/replication/internal/codec"
	"github.com/archenet/archenet/replication/internal/wire"
	"github.com/archenet/archenet/replication/schema"
	"github.com/stretchr/testify/require"
)

// The reference delta body writer: every changed group's lanes against
// pred (bools and rest flags as 1 bit; a resting velocity sends no axes).
// writeDeltaBody writes, for every changed group, the residuals of its lanes
// (zigzag Rice code of Lane.Delta at the lane's order in orders, as
// predict or plainOrders give them; bools and rest flags as 1 bit; a resting
// velocity sends no axes). It returns false if a residual is too large for
// the code (≥ 2^62, only possible for raw 64-bit lanes); the caller then
// sends a full record.
func writeDeltaBody(w *bitio.Writer, plans []*schema.Plan, set uint64, base, pred, cur []uint64, orders []uint8, owner bool) bool {
	off := 0
	for s := set; s != 0; s &= s - 1 {
		p := plans[bits.TrailingZeros64(s)]
		n := p.NumLanes()
		b, c, pr, ks := base[off:off+n], cur[off:off+n], pred[off:off+n], orders[off:off+n]
		off += n
		lanes := p.Lanes()
		groups := p.Groups()
		for gi := range groups {
			g := &groups[gi]
			if !owner && g.OwnerOnly {
				continue
			}
			changed := false
			for l := g.First; l < g.First+g.Count; l++ {
				if b[l] != c[l] {
					changed = true
					break
				}
			}
			if !changed {
				continue
			}
			for l := g.First; l < g.First+g.Count; l++ {
				ln := &lanes[l]
				switch ln.Kind {
				case schema.LaneBool:
					w.WriteBits(c[l], 1)
				case schema.LaneRest:
					w.WriteBits(c[l], 1)
					if c[l] != 0 {
						l = g.First + g.Count // axes implied zero
					}
				default:
					z := bitio.ZigZag(ln.Delta(pr[l], c[l]))
					if z >= 1<<62 {
						return false
					}
					w.WriteRice(z, uint(ks[l]))
				}
			}
		}
	}
	return true
}

// writeDeltaMask writes the field masks of a delta record: per component of
// the set, 1 bit "changed" and, if changed, one bit per group (owner-only
// groups only when owner). It returns the bits it wrote (their first 64, as
// a number) and whether anything changed.
func writeDeltaMask(w *bitio.Writer, plans []*schema.Plan, set uint64, base, cur []uint64, owner bool) (mask uint64, changed bool) {
	n := 0
	put := func(bit uint64) {
		w.WriteBits(bit, 1)
		if n < 64 {
			mask |= bit << n
		}
		n++
	}
	off := 0
	for s := set; s != 0; s &= s - 1 {
		p := plans[bits.TrailingZeros64(s)]
		nl := p.NumLanes()
		b, c := base[off:off+nl], cur[off:off+nl]
		off += nl
		var gm uint64
		groups := p.Groups()
		for gi := range groups {
			g := &groups[gi]
			if !owner && g.OwnerOnly {
				continue
			}
			if !slices.Equal(b[g.First:g.First+g.Count], c[g.First:g.First+g.Count]) {
				gm |= 1 << gi
			}
		}
		if gm == 0 {
			put(0)
			continue
		}
		changed = true
		put(1)
		for gi := range groups {
			if !owner && groups[gi].OwnerOnly {
				continue
			}
			put(gm >> gi & 1)
		}
	}
	return mask, changed
}

// The encoder's delta writers (deltaMasks, deltaBody) write
// exactly what the reference writers write — the field masks, the residuals
// against the baseline and against predict's extrapolation — and size them
// exactly.
func TestResidualsMatchTheReference(t *testing.T) {
	// (Angles wrap: their deltas and extrapolations are taken modulo a turn.)
	type turret struct {
		Yaw   float64 `net:"angle,bits=10"`
		Pitch float32 `net:"angle,bits=6,owner"`
		Shots int32
	}
	reg := schema.NewRegistry()
	schema.MustRegister[fuzzShip](reg)
	schema.MustRegister[fuzzTag](reg)
	schema.MustRegister[turret](reg)
	e := newTestCoder(reg)
	plans := reg.Plans()
	rng := rand.New(rand.NewPCG(4, 4))
	lanesOf := func(set uint64) int {
		n := 0
		for s := set; s != 0; s &= s - 1 {
			n += plans[bits.TrailingZeros64(s)].NumLanes()
		}
		return n
	}
	random := func(set uint64) []uint64 {
		out := make([]uint64, 0, lanesOf(set))
		for s := set; s != 0; s &= s - 1 {
			p := plans[bits.TrailingZeros64(s)]
			for _, ln := range p.Lanes() {
				var v uint64
				switch ln.Kind {
				case schema.LaneWorld:
					v = uint64(int64(rng.IntN(2000) - 1000))
				case schema.LaneVarint:
					v = uint64(int64(rng.IntN(200) - 100))
				default:
					v = rng.Uint64N(ln.Max + 1)
				}
				out = append(out, v)
			}
		}
		return out
	}
	perturb := func(base []uint64, set uint64) []uint64 {
		out := append([]uint64(nil), base...)
		r := random(set)
		for i := range out {
			if rng.IntN(3) == 0 {
				out[i] = r[i]
			}
		}
		return out
	}
	for iter := range 20000 {
		set := uint64(1 + rng.IntN(7))
		prev := random(set)
		base := perturb(prev, set)
		cur := perturb(base, set)
		owner := rng.IntN(2) == 0
		num, den := int64(1+rng.IntN(5)), int64(1+rng.IntN(4))
		cod := e.coding
		for cl := range wire.NumClasses {
			cod.Off[cl] = int8(wire.MinCodeOff + rng.IntN(wire.MaxCodeOff-wire.MinCodeOff+1))
			cod.Cap[cl] = uint8(rng.IntN(wire.MaxCodeCap + 1))
		}
		e.SetCoding(cod, false)
		// Sometimes a third view: positions extrapolated quadratically
		// (quad), or the quadratic extrapolation only measured.
		var v3, pv3 []uint64
		quad := rng.IntN(2) == 0
		if rng.IntN(2) == 0 {
			v3 = perturb(prev, set)
			if quad {
				pv3 = v3
			}
		}
		var refMask bitio.Writer
		wantMask, _ := writeDeltaMask(&refMask, plans, set, base, cur, owner)
		e.Arena.Reset(nil)
		mask, _ := e.DeltaMasks(set, base, prev, cur, owner)
		require.Equal(t, wantMask, mask, "iter %d", iter)
		require.Equal(t, refMask.BitLen(), e.Arena.BitLen(), "iter %d", iter)
		require.Equal(t, refMask.Bytes(), e.Arena.Bytes(), "iter %d", iter)

		var ref bitio.Writer
		orders := make([]uint8, len(base))
		codec.PlainOrders(plans, set, &e.coding, orders)
		plainOK := writeDeltaBody(&ref, plans, set, base, base, cur, orders, owner)
		plainBits := ref.BitLen()
		e.Arena.Reset(nil)
		r, ok := e.testBody(set, codec.Views{Base: base, Cur: cur}, codec.Extrap{Num: num, Den: den, Quad: quad}, &Stats{})
		require.Equal(t, plainOK, ok, "iter %d", iter)
		if ok {
			require.Equal(t, plainBits, r.Plain, "iter %d", iter)
			require.Equal(t, ref.Bytes(), e.Arena.Bytes(), "iter %d", iter)
		}

		p := append([]uint64(nil), base...)
		codec.Predict(plans, &codec.Shape{Set: set}, &codec.Views{Base: base, Prev: prev, Third: pv3}, codec.Extrap{Num: num, Den: den, Quad: false}, &e.coding, &codec.LanePred{Lanes: p, Orders: orders})
		ref.Reset(nil)
		predOK := writeDeltaBody(&ref, plans, set, base, p, cur, orders, owner)
		e.Arena.Reset(nil)
		r, ok = e.testBody(set, codec.Views{Base: base, Prev: prev, Third: v3, Cur: cur}, codec.Extrap{Num: num, Den: den, Quad: quad}, &Stats{})
		require.Equal(t, plainOK && predOK, ok, "iter %d", iter)
		if ok {
			require.Equal(t, plainBits, r.Plain, "iter %d", iter)
			require.Equal(t, ref.Bytes(), e.Arena.Bytes(), "iter %d", iter)
		}
	}
}

// TestBestOffCapIsTheExhaustiveSearch checks the prefix-sum search of the
// predicted orders' offset and cap against trying every pair over every
// context, ties included (sparse and dense costs, many equal ones).
func TestBestOffCapIsTheExhaustiveSearch(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for trial := range 2000 {
		var cost [wire.MaxCodeCtx + 2][wire.MaxCodeCap + 1]uint64
		for ctx := range cost {
			if trial%3 == 0 && rng.IntN(2) == 0 {
				continue // (contexts without residuals)
			}
			for k := range cost[ctx] {
				cost[ctx][k] = uint64(rng.IntN(1 + trial%50))
			}
		}
		var cod wire.Coding
		want, wantOff, wantCap := ^uint64(0), int8(0), uint8(0)
		for cp := 0; cp <= wire.MaxCodeCap; cp++ {
			for off := wire.MinCodeOff; off <= wire.MaxCodeOff; off++ {
				cod.Off[0], cod.Cap[0] = int8(off), uint8(cp)
				sum := uint64(0)
				for ctx := 0; ctx <= wire.MaxCodeCtx; ctx++ {
					sum += cost[ctx+1][cod.OrderCtx(0, ctx)]
				}
				if sum < want {
					want, wantOff, wantCap = sum, int8(off), uint8(cp)
				}
			}
		}
		off, cp, got := bestOffCap(&cost)
		if off != wantOff || cp != wantCap || got != want {
			t.Fatalf("trial %d: got off %d cap %d (%d bits), want off %d cap %d (%d bits)", trial, off, cp, got, wantOff, wantCap, want)
		}
	}
}

// BenchmarkCodingChoice: choosing a tick's coding parameters from a
// histogram of residuals in every context (World.Commit does it each tick
// once enough residuals were sent).
func BenchmarkCodingChoice(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	var h Hist
	for range 5000 {
		cl, ctx := rng.IntN(wire.NumClasses), rng.IntN(wire.MaxCodeCtx+1)
		z := uint64(rng.ExpFloat64() * float64(uint64(1)<<ctx))
		h.n[cl][ctx+1][bin(z)]++
		h.rows |= 1 << (cl*histCtxs + ctx + 1)
	}
	cur := wire.DefaultCoding
	b.ReportAllocs()
	for b.Loop() {
		c, _, _ := h.Best(&cur)
		cur.Plain = c.Plain
	}
}

type fuzzShip struct {
	Pos  components.Vec3 `net:"world,step=0.01"`
	Rot  components.Quat `net:"quat,bits=9"`
	Vel  components.Vec3 `net:"vel,max=50,step=0.05"`
	Ammo uint8           `net:"range=0:100,owner"`
	HP   int16
}

type fuzzTag struct {
	Team uint8 `net:"range=0:3"`
	On   bool
}
