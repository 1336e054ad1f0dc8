package schema

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/bitio"
	"github.com/stretchr/testify/require"
)

type transform struct {
	Pos components.Vec3 `net:"world,step=0.001"`
	Rot components.Quat `net:"quat,bits=10"`
}

type inner struct {
	Heat  float32 `net:"range=0:1,bits=6"`
	Flags uint8   `net:"range=0:15"`
}

type ship struct {
	Yaw      float32         `net:"angle,bits=12"`
	Throttle float64         `net:"range=0:1,step=0.01"`
	Health   int32           `net:"range=-10:200"`
	Score    int64           // varint
	Kills    uint16          // uvarint
	Alive    bool            //
	Ammo     uint8           `net:"range=0:200,owner"`
	Spin     [3]float32      `net:"range=-20:20,step=0.01,owner"`
	Vel      components.Vec3 `net:"vel,max=100,step=0.01"`
	Engines  [2]inner
	Exact    float64    `net:"raw"`
	Exact32  float32    `net:"raw"`
	Scale    [4]float64 `net:"quat,bits=12"`
	Local    float64    `net:"-"`
	internal int
}

func newShip(rng *rand.Rand) ship {
	x, y, z, w := rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()
	s := ship{
		Yaw:      float32(rng.Float64()*20 - 10),
		Throttle: rng.Float64()*1.2 - 0.1,
		Health:   int32(rng.IntN(300) - 50),
		Score:    rng.Int64() >> rng.IntN(64),
		Kills:    uint16(rng.Uint32()),
		Alive:    rng.IntN(2) == 1,
		Ammo:     uint8(rng.Uint32()),
		Exact:    rng.NormFloat64() * 1e6,
		Exact32:  float32(rng.NormFloat64()),
		Scale:    [4]float64{x, y, z, w},
	}
	for i := range s.Spin {
		s.Spin[i] = float32(rng.Float64()*50 - 25)
	}
	if rng.IntN(3) > 0 {
		s.Vel = components.Vec3{X: rng.NormFloat64() * 30, Y: rng.NormFloat64(), Z: rng.NormFloat64() * 30}
	}
	for i := range s.Engines {
		s.Engines[i] = inner{Heat: float32(rng.Float64()), Flags: uint8(rng.IntN(20))}
	}
	return s
}

func TestCompileShipLayout(t *testing.T) {
	r := NewRegistry()
	p, err := Register[ship](r)
	require.NoError(t, err)
	names := []string{}
	for _, g := range p.Groups() {
		names = append(names, g.Name)
	}
	require.Equal(t, []string{"Yaw", "Throttle", "Health", "Score", "Kills", "Alive", "Ammo",
		"Spin[0]", "Spin[1]", "Spin[2]", "Vel", "Engines[0].Heat", "Engines[0].Flags",
		"Engines[1].Heat", "Engines[1].Flags", "Exact", "Exact32", "Scale"}, names)
	require.Equal(t, uint64(1<<6|1<<7|1<<8|1<<9), p.OwnerOnlyMask())
	lanes := p.Lanes()
	require.Equal(t, LaneAngle, lanes[0].Kind)
	require.Equal(t, uint8(12), lanes[0].Bits)
	require.Equal(t, uint8(7), lanes[1].Bits) // 0..1 at 0.01 = 101 values
	require.Equal(t, uint8(8), lanes[2].Bits) // -10..200 = 211 values
	require.Equal(t, LaneVarint, lanes[3].Kind)
	require.Equal(t, LaneUvarint, lanes[4].Kind)
	require.Equal(t, uint64(math.MaxUint16), lanes[4].Max)
	require.Equal(t, 24, p.NumLanes()) // 18 groups; Vel and Scale take 4 lanes each
	require.Contains(t, p.describe(), "Ammo u8 int min=0 max=200 owner\n")
}

func TestBadTags(t *testing.T) {
	type noPrec struct{ Speed float32 }
	type badKey struct {
		A float32 `net:"range=0:1,bits=8,frob"`
	}
	type badRange struct {
		A float32 `net:"range=1:0,bits=8"`
	}
	type noStep struct {
		A float32 `net:"range=0:1"`
	}
	type both struct {
		A float32 `net:"range=0:1,bits=8,step=0.1"`
	}
	type str struct{ Name string }
	type slice struct{ Items []int }
	type quatBad struct {
		Q [3]float32 `net:"quat,bits=10"`
	}
	type quatBits struct {
		Q components.Quat `net:"quat,bits=30"`
	}
	type intStep struct {
		N int `net:"range=0:10,step=2"`
	}
	type intRangeTooBig struct {
		N uint8 `net:"range=0:300"`
	}
	type boolPrec struct {
		B bool `net:"bits=3"`
	}
	type angleNoBits struct {
		A float64 `net:"angle"`
	}
	type twoKinds struct {
		A float64 `net:"angle,raw,bits=3"`
	}
	type velNoMax struct {
		V components.Vec3 `net:"vel,step=0.1"`
	}
	type empty struct {
		A float64 `net:"-"`
	}
	type nested struct {
		Inner struct{ Speed float64 }
	}
	cases := []struct {
		f    func(*Registry) error
		want string
	}{
		{func(r *Registry) error { _, err := Register[noPrec](r); return err }, "noPrec.Speed: float has no precision"},
		{func(r *Registry) error { _, err := Register[badKey](r); return err }, `badKey.A: bad net tag "range=0:1,bits=8,frob": unknown option "frob"`},
		{func(r *Registry) error { _, err := Register[badRange](r); return err }, "badRange.A: quant: bad parameters: range 1..0 is empty"},
		{func(r *Registry) error { _, err := Register[noStep](r); return err }, "noStep.A: range needs step=S or bits=N"},
		{func(r *Registry) error { _, err := Register[both](r); return err }, "not both"},
		{func(r *Registry) error { _, err := Register[str](r); return err }, "str.Name: type string cannot be replicated"},
		{func(r *Registry) error { _, err := Register[slice](r); return err }, "slice.Items: type []int cannot be replicated"},
		{func(r *Registry) error { _, err := Register[quatBad](r); return err }, "quatBad.Q: needs [4]float32/float64"},
		{func(r *Registry) error { _, err := Register[quatBits](r); return err }, "quaternion bits 30 not in 4..20"},
		{func(r *Registry) error { _, err := Register[intStep](r); return err }, "intStep.N: an integer range"},
		{func(r *Registry) error { _, err := Register[intRangeTooBig](r); return err }, "range 0:300 does not fit u8"},
		{func(r *Registry) error { _, err := Register[boolPrec](r); return err }, "boolPrec.B: bool takes no precision"},
		{func(r *Registry) error { _, err := Register[angleNoBits](r); return err }, "angle needs bits=N"},
		{func(r *Registry) error { _, err := Register[twoKinds](r); return err }, "exclude each other"},
		{func(r *Registry) error { _, err := Register[velNoMax](r); return err }, "vel needs max=M"},
		{func(r *Registry) error { _, err := Register[empty](r); return err }, "a marker component must be an empty struct"},
		{func(r *Registry) error { _, err := Register[nested](r); return err }, "nested.Inner.Speed: float has no precision"},
		{func(r *Registry) error { _, err := Register[int](r); return err }, "must be a struct"},
		{func(r *Registry) error {
			Register[transform](r)
			_, err := Register[transform](r)
			return err
		}, "registered twice"},
	}
	for _, c := range cases {
		err := c.f(NewRegistry())
		require.Error(t, err, c.want)
		require.Contains(t, err.Error(), c.want)
	}
}

func TestMarkerComponent(t *testing.T) {
	type marker struct{}
	r := NewRegistry()
	p, err := Register[marker](r)
	require.NoError(t, err)
	require.Equal(t, 0, p.NumLanes())
	var m marker
	QuantizeValue(p, &m, nil)
	DequantizeValue(p, nil, &m)
	var w bitio.Writer
	p.Write(&w, nil, true)
	require.Equal(t, 0, w.BitLen())
	require.NoError(t, p.Read(bitio.NewReader(nil), nil, true))
}

func TestRoundTripProperty(t *testing.T) {
	r := NewRegistry()
	p, err := Register[ship](r)
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(11, 12))
	lanes := make([]uint64, p.NumLanes())
	back := make([]uint64, p.NumLanes())
	var w bitio.Writer
	var rd bitio.Reader
	for i := 0; i < 5000; i++ {
		s := newShip(rng)
		QuantizeValue(p, &s, lanes)
		for _, owner := range []bool{true, false} {
			w.Reset(w.Bytes())
			p.Write(&w, lanes, owner)
			require.LessOrEqual(t, w.BitLen(), p.MaxBits())
			rd.Reset(w.Bytes())
			for j := range back {
				back[j] = 0xdead
			}
			require.NoError(t, p.Read(&rd, back, owner))
			for gi, g := range p.Groups() {
				for l := g.First; l < g.First+g.Count; l++ {
					if !owner && g.OwnerOnly {
						require.Equal(t, uint64(0xdead), back[l], "owner-only lane written")
					} else {
						require.Equal(t, lanes[l], back[l], "group %d %s", gi, g.Name)
					}
				}
			}
		}
		var d ship
		d.Local = 42
		DequantizeValue(p, lanes, &d)
		require.Equal(t, 42.0, d.Local, "non-replicated fields are untouched")
		// Requantizing the dequantized value gives the same codes, so a
		// server that rounds its state each tick does not drift.
		again := make([]uint64, p.NumLanes())
		QuantizeValue(p, &d, again)
		require.Equal(t, lanes, again)
		checkErrors(t, s, d)
	}
}

func checkErrors(t *testing.T, s, d ship) {
	t.Helper()
	yawErr := math.Abs(math.Remainder(float64(s.Yaw)-float64(d.Yaw), 2*math.Pi))
	require.LessOrEqual(t, yawErr, math.Pi/4096+1e-6)
	clamped := math.Max(0, math.Min(1, s.Throttle))
	require.InDelta(t, clamped, d.Throttle, 0.005+1e-12)
	require.Equal(t, max(-10, min(200, s.Health)), d.Health)
	require.Equal(t, s.Score, d.Score)
	require.Equal(t, s.Kills, d.Kills)
	require.Equal(t, s.Alive, d.Alive)
	require.Equal(t, min(200, s.Ammo), d.Ammo)
	require.Equal(t, math.Float64bits(s.Exact), math.Float64bits(d.Exact))
	require.Equal(t, math.Float32bits(s.Exact32), math.Float32bits(d.Exact32))
	for i := range s.Spin {
		require.InDelta(t, math.Max(-20, math.Min(20, float64(s.Spin[i]))), float64(d.Spin[i]), 0.005+1e-5)
	}
	for i := range s.Engines {
		require.InDelta(t, s.Engines[i].Heat, d.Engines[i].Heat, 1.0/126+1e-6)
		require.Equal(t, min(15, s.Engines[i].Flags), d.Engines[i].Flags)
	}
	for _, c := range [][2]float64{{s.Vel.X, d.Vel.X}, {s.Vel.Y, d.Vel.Y}, {s.Vel.Z, d.Vel.Z}} {
		require.InDelta(t, math.Max(-100, math.Min(100, c[0])), c[1], 0.005+1e-9)
	}
	n := math.Sqrt(s.Scale[0]*s.Scale[0] + s.Scale[1]*s.Scale[1] + s.Scale[2]*s.Scale[2] + s.Scale[3]*s.Scale[3])
	ang := 2 * math.Acos(math.Min(1, math.Abs((s.Scale[0]*d.Scale[0]+s.Scale[1]*d.Scale[1]+s.Scale[2]*d.Scale[2]+s.Scale[3]*d.Scale[3])/n)))
	require.Less(t, ang*180/math.Pi, 0.05)
}

func TestTransformPrecisionFarAway(t *testing.T) {
	r := NewRegistry()
	p := MustRegister[transform](r)
	rng := rand.New(rand.NewPCG(5, 5))
	lanes := make([]uint64, p.NumLanes())
	for _, center := range []float64{0, 1e6, -1e6} {
		for i := 0; i < 2000; i++ {
			in := transform{
				Pos: components.Vec3{X: center + rng.Float64()*100, Y: rng.Float64() * 10, Z: center - rng.Float64()*100},
				Rot: components.Quat{X: rng.NormFloat64(), Y: rng.NormFloat64(), Z: rng.NormFloat64(), W: rng.NormFloat64()}.Normalize(),
			}
			QuantizeValue(p, &in, lanes)
			var out transform
			DequantizeValue(p, lanes, &out)
			for _, e := range []float64{in.Pos.X - out.Pos.X, in.Pos.Y - out.Pos.Y, in.Pos.Z - out.Pos.Z} {
				require.LessOrEqual(t, math.Abs(e), 0.0005*(1+1e-6), "center %v", center)
			}
			require.Less(t, in.Rot.AngleTo(out.Rot)*180/math.Pi, 0.15)
		}
	}
}

func TestSpecialFloatsNeverPanic(t *testing.T) {
	r := NewRegistry()
	p := MustRegister[ship](r)
	tp := MustRegister[transform](r)
	lanes := make([]uint64, p.NumLanes())
	var w bitio.Writer
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), math.MaxFloat64, -math.MaxFloat64} {
		s := ship{Yaw: float32(v), Throttle: v, Spin: [3]float32{float32(v), 0, 0},
			Vel: components.Vec3{X: v, Y: v, Z: v}, Scale: [4]float64{v, v, 0, 1}}
		QuantizeValue(p, &s, lanes)
		w.Reset(nil)
		p.Write(&w, lanes, true)
		back := make([]uint64, p.NumLanes())
		require.NoError(t, p.Read(bitio.NewReader(w.Bytes()), back, true))
		var d ship
		DequantizeValue(p, back, &d)
		require.False(t, math.IsNaN(d.Throttle) || math.IsNaN(float64(d.Yaw)))
		tr := transform{Pos: components.Vec3{X: v, Y: -v, Z: v}, Rot: components.Quat{X: v, W: v}}
		tl := make([]uint64, tp.NumLanes())
		QuantizeValue(tp, &tr, tl)
		var out transform
		DequantizeValue(tp, tl, &out)
		require.False(t, math.IsNaN(out.Pos.X) || math.IsNaN(out.Rot.W))
	}
}

func TestEveryTruncatedPrefixFails(t *testing.T) {
	r := NewRegistry()
	p := MustRegister[ship](r)
	tp := MustRegister[transform](r)
	rng := rand.New(rand.NewPCG(8, 8))
	var w bitio.Writer
	for _, plan := range []*Plan{p, tp} {
		lanes := make([]uint64, plan.NumLanes())
		back := make([]uint64, plan.NumLanes())
		for iter := 0; iter < 50; iter++ {
			s := newShip(rng)
			tr := transform{Pos: components.Vec3{X: rng.NormFloat64() * 1e5}, Rot: components.QuatIdentity()}
			if plan == p {
				QuantizeValue(p, &s, lanes)
			} else {
				QuantizeValue(tp, &tr, lanes)
			}
			w.Reset(nil)
			plan.Write(&w, lanes, true)
			nbits := w.BitLen()
			full := w.Bytes()
			require.NoError(t, plan.Read(bitio.NewReader(full), back, true))
			// Every bit-level truncation, not only whole bytes.
			for cut := 0; cut < nbits; cut++ {
				var tw bitio.Writer
				tw.AppendBits(full, cut)
				// Bit-exact truncation: the reader must see exactly cut bits,
				// so give it a buffer whose tail bits are unreadable.
				rd := newBitLimitedReader(tw.Bytes(), cut)
				err := plan.Read(rd, back, true)
				require.Error(t, err, "%s cut at bit %d of %d", plan.Name, cut, nbits)
			}
		}
	}
}

// newBitLimitedReader returns a reader that fails after nbits bits even when
// the last byte has padding bits: it consumes the padding up front by
// reading from a copy shifted to the end of its buffer.
func newBitLimitedReader(b []byte, nbits int) *bitio.Reader {
	pad := len(b)*8 - nbits
	if pad == 0 {
		return bitio.NewReader(b)
	}
	// Shift the stream left by pad bits so it ends exactly at the buffer end,
	// then skip the pad zero bits at the front.
	var w bitio.Writer
	w.WriteBits(0, uint(pad))
	w.AppendBits(b, nbits)
	r := bitio.NewReader(w.Bytes())
	r.ReadBits(uint(pad))
	return r
}

func TestCorruptValuesRejected(t *testing.T) {
	r := NewRegistry()
	type small struct {
		T float32 `net:"range=0:1,step=0.01"` // 7 bits, max code 100
		N int8    // varint
	}
	p := MustRegister[small](r)
	var w bitio.Writer
	w.WriteBits(127, 7)
	w.WriteVarint(0)
	err := p.Read(bitio.NewReader(w.Bytes()), make([]uint64, 2), true)
	require.True(t, errors.Is(err, ErrCorrupt), "%v", err)
	w.Reset(nil)
	w.WriteBits(5, 7)
	w.WriteVarint(1000) // does not fit int8
	err = p.Read(bitio.NewReader(w.Bytes()), make([]uint64, 2), true)
	require.ErrorIs(t, err, ErrCorrupt)
	tp := MustRegister[transform](r)
	w.Reset(nil)
	w.WriteExpGolomb(bitio.ZigZag(1<<50), 0) // absurd grid cell
	w.WriteBits(0, 16)
	err = tp.Read(bitio.NewReader(w.Bytes()), make([]uint64, tp.NumLanes()), true)
	require.ErrorIs(t, err, ErrCorrupt)
}

func TestProtocolHash(t *testing.T) {
	type a1 struct {
		X float32 `net:"range=0:10,step=0.1"`
	}
	type a2 struct {
		X float32 `net:"range=0:10,step=0.05"`
	}
	type a3 struct {
		X float32 `net:"range=0:10,step=0.1,owner"`
	}
	type a4 struct {
		X float64 `net:"range=0:10,step=0.1"`
	}
	hash := func(f func(r *Registry)) uint64 {
		r := NewRegistry()
		f(r)
		return r.Hash()
	}
	base := hash(func(r *Registry) { MustRegister[a1](r, WithName("A")); MustRegister[transform](r) })
	require.Equal(t, base, hash(func(r *Registry) { MustRegister[a1](r, WithName("A")); MustRegister[transform](r) }))
	others := []uint64{
		hash(func(r *Registry) { MustRegister[a2](r, WithName("A")); MustRegister[transform](r) }),
		hash(func(r *Registry) { MustRegister[a3](r, WithName("A")); MustRegister[transform](r) }),
		hash(func(r *Registry) { MustRegister[a4](r, WithName("A")); MustRegister[transform](r) }),
		hash(func(r *Registry) { MustRegister[a1](r, WithName("B")); MustRegister[transform](r) }),
		hash(func(r *Registry) { MustRegister[transform](r); MustRegister[a1](r, WithName("A")) }),
		hash(func(r *Registry) { MustRegister[a1](r, WithName("A")) }),
	}
	seen := map[uint64]bool{base: true}
	for i, h := range others {
		require.False(t, seen[h], "variant %d collides", i)
		seen[h] = true
	}
}

func TestQuantizeAllocs(t *testing.T) {
	r := NewRegistry()
	p := MustRegister[ship](r)
	s := newShip(rand.New(rand.NewPCG(1, 1)))
	lanes := make([]uint64, p.NumLanes())
	buf := make([]byte, 0, 256)
	var w bitio.Writer
	var rd bitio.Reader
	allocs := testing.AllocsPerRun(100, func() {
		p.quantize(unsafe.Pointer(&s), lanes)
		w.Reset(buf)
		p.Write(&w, lanes, true)
		rd.Reset(w.Bytes())
		_ = p.Read(&rd, lanes, true)
		p.dequantize(lanes, unsafe.Pointer(&s))
	})
	require.Zero(t, allocs)
}

func TestMinBitsIsALowerBound(t *testing.T) {
	r := NewRegistry()
	p := MustRegister[ship](r)
	tp := MustRegister[transform](r)
	rng := rand.New(rand.NewPCG(4, 4))
	var w bitio.Writer
	for i := 0; i < 2000; i++ {
		s := newShip(rng)
		lanes := make([]uint64, p.NumLanes())
		QuantizeValue(p, &s, lanes)
		for _, owner := range []bool{true, false} {
			w.Reset(nil)
			p.Write(&w, lanes, owner)
			require.LessOrEqual(t, p.MinBits(), w.BitLen())
		}
		tr := transform{Pos: components.Vec3{X: rng.NormFloat64() * 100}, Rot: components.QuatIdentity()}
		tl := make([]uint64, tp.NumLanes())
		QuantizeValue(tp, &tr, tl)
		w.Reset(nil)
		tp.Write(&w, tl, true)
		require.LessOrEqual(t, tp.MinBits(), w.BitLen())
	}
	require.Equal(t, 3*17+32, tp.MinBits())
}

// WithTag replicates a type at another precision: a different plan and
// protocol hash, and a typo in the field path is an error.
func TestWithTag(t *testing.T) {
	def := NewRegistry()
	pd := MustRegister[components.Transform](def)
	coarse := NewRegistry()
	pc, err := Register[components.Transform](coarse, WithTag("Pos", "world,step=0.002"), WithTag("Rot", "quat,bits=9"))
	require.NoError(t, err)
	require.NotEqual(t, def.Hash(), coarse.Hash())
	require.Less(t, pc.MinBits(), pd.MinBits())
	tr := components.Transform{Pos: components.Vec3{X: 1.0014}, Rot: components.QuatIdentity()}
	lanes := make([]uint64, pc.NumLanes())
	QuantizeValue(pc, &tr, lanes)
	var back components.Transform
	DequantizeValue(pc, lanes, &back)
	require.InDelta(t, 1.002, back.Pos.X, 1e-9, "2 mm steps")

	_, err = Register[components.Transform](NewRegistry(), WithTag("Position", "world,step=0.002"))
	require.ErrorContains(t, err, "Position: WithTag names no field")
	_, err = Register[components.Transform](NewRegistry(), WithTag("Rot", "quat,bits=99"))
	require.Error(t, err)
}

// The Bytes methods and the typed helpers agree with the typed
// quantization, and refuse memory shorter than the type.
func TestMemoryAccessors(t *testing.T) {
	reg := NewRegistry()
	p := MustRegister[components.Transform](reg)
	tr := components.Transform{Pos: components.Vec3{X: 1.23456, Y: -2, Z: 3}, Rot: components.QuatAxisAngle(components.Vec3{Y: 1}, 0.7)}
	want := make([]uint64, p.NumLanes())
	QuantizeValue(p, &tr, want)
	mem := unsafe.Slice((*byte)(unsafe.Pointer(&tr)), p.Size)
	got := make([]uint64, p.NumLanes())
	p.QuantizeBytes(mem, got)
	require.Equal(t, want, got)

	var back, round components.Transform
	p.DequantizeBytes(got, unsafe.Slice((*byte)(unsafe.Pointer(&back)), p.Size))
	round = tr
	RoundValue(p, &round, make([]uint64, p.NumLanes()))
	require.Equal(t, back, round, "RoundValue is quantize then dequantize")

	var mid, midBytes components.Transform
	InterpolateValue(p, got, got, 0.5, &mid)
	p.InterpolateBytes(got, got, 0.5, unsafe.Slice((*byte)(unsafe.Pointer(&midBytes)), p.Size))
	require.Equal(t, mid, midBytes)
	require.Equal(t, back.Pos, mid.Pos)

	require.Panics(t, func() { p.QuantizeBytes(mem[:p.Size-1], got) })
	require.Panics(t, func() { p.DequantizeBytes(got, make([]byte, 3)) })
	require.Panics(t, func() { RoundValue(p, &components.Vec3{}, got) })
}
