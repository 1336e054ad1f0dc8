package encode

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/internal/baseline"
	"github.com/archenet/archenet/replication/internal/entity"
	"github.com/archenet/archenet/replication/internal/receive"
	"github.com/archenet/archenet/replication/internal/store"
	"github.com/archenet/archenet/replication/schema"
	"github.com/stretchr/testify/require"
)

type acctStats struct {
	HP   int16  `net:"range=0:1000"`
	Ammo uint16 `net:"range=0:500,owner"`
	Up   bool
}

// acctScene is a world of transforms, some with stats (owned by clients 1
// and 2), that move, change and come and go.
type acctScene struct {
	reg   *schema.Registry
	w     *store.Ring
	tr    []benchTransform
	st    []acctStats
	alive []bool
	gen   []uint32
	rng   *rand.Rand
	tick  uint32
	// ownEvery: every ownEvery-th entity has stats and an owner (0: 2)
	ownEvery int
	ptrs     []unsafe.Pointer
}

func newAcctScene(n int) *acctScene {
	reg := schema.NewRegistry()
	schema.MustRegister[benchTransform](reg)
	schema.MustRegister[acctStats](reg)
	s := &acctScene{reg: reg, w: store.New(reg, 0), tr: make([]benchTransform, n), st: make([]acctStats, n), alive: make([]bool, n), gen: make([]uint32, n), rng: rand.New(rand.NewPCG(3, 4))}
	for i := range s.tr {
		s.tr[i].Pos = components.Vec3{X: s.rng.Float64() * 100, Z: s.rng.Float64() * 100}
		s.tr[i].Rot = components.QuatIdentity()
		s.st[i] = acctStats{HP: 100, Ammo: 50}
		s.alive[i] = true
	}
	return s
}

func (s *acctScene) step() {
	s.tick++
	s.w.Begin(s.tick)
	if s.ptrs == nil {
		s.ptrs = make([]unsafe.Pointer, 2)
	}
	ptrs := s.ptrs
	for i := range s.tr {
		if s.rng.Float64() < 0.02 {
			s.alive[i] = !s.alive[i]
			s.gen[i]++ // a new incarnation when it comes back
		}
		if !s.alive[i] {
			continue
		}
		if s.rng.Float64() < 0.5 {
			s.tr[i].Pos.X += s.rng.Float64() - 0.3
		}
		if s.rng.Float64() < 0.1 {
			s.st[i].HP = int16(s.rng.IntN(1000))
			s.st[i].Ammo = uint16(s.rng.IntN(500))
			s.st[i].Up = !s.st[i].Up
		}
		ptrs[0], ptrs[1] = unsafe.Pointer(&s.tr[i]), unsafe.Pointer(&s.st[i])
		m := entity.Meta{Set: 1, Gen: s.gen[i]}
		if every := max(s.ownEvery, 2); i%every == 0 {
			m = entity.Meta{Set: 3, Owner: uint8(1 + i%(2*every)/every), Gen: s.gen[i]}
		}
		s.w.Put(uint32(i), m, ptrs[:bitsSet(m.Set)])
	}
	s.w.Commit()
}

func bitsSet(set uint64) int {
	n := 0
	for ; set != 0; set &= set - 1 {
		n++
	}
	return n
}

// TestAccountAttributesEveryBit checks that accounting changes no datagram
// and that it attributes every bit the datagrams carry, except each
// datagram's padding to whole bytes.
func TestAccountAttributesEveryBit(t *testing.T) {
	s := newAcctScene(300)
	g := NewGroup(s.w)
	on, off := g.NewEncoder(), g.NewEncoder()
	on.SetAccounting(true)
	type side struct {
		c   *baseline.Tracker
		rcv *receive.Receiver
	}
	var sides [2][2]side // [encoder][client]
	for e := range sides {
		for k := range sides[e] {
			sides[e][k] = side{baseline.NewTracker(uint8(k+1), 0), receive.NewReceiver(s.reg, uint8(k+1), 0)}
		}
	}
	var bitsOut, parts uint64
	var pa, pb Packets
	for tick := 0; tick < 60; tick++ {
		s.step()
		for k := 0; k < 2; k++ {
			a, b := &sides[0][k], &sides[1][k]
			opt := BuildOptions{Budget: 600}
			ia := on.Build(a.c, opt, &pa)
			ib := off.Build(b.c, opt, &pb)
			// (how a Build was shared may differ: with accounting on, one
			// takes another's records but does not patch its datagrams)
			ia.Shared, ia.SharedCands, ib.Shared, ib.SharedCands = false, false, false, false
			require.Equal(t, ib, ia)
			require.True(t, bytes.Equal(pa.buf, pb.buf), "tick %d client %d: accounting changed the datagrams", tick, k+1)
			bitsOut += uint64(pa.Bytes()) * 8
			parts += uint64(pa.Len())
			// Drop some datagrams so that baselines and deltas vary.
			for j := range pa.Len() {
				if s.rng.Float64() < 0.2 {
					continue
				}
				_, err := a.rcv.Decode(pa.At(j))
				require.NoError(t, err)
				_, err = b.rcv.Decode(pb.At(j))
				require.NoError(t, err)
			}
			a.c.Ack(ptr(a.rcv.Ack()))
			b.c.Ack(ptr(b.rcv.Ack()))
		}
		s.w.EndTick()
	}
	acct := on.Account()
	require.NotNil(t, acct)
	require.Nil(t, off.Account())
	total := acct.Total()
	require.LessOrEqual(t, total, bitsOut)
	require.Less(t, bitsOut-total, 8*parts, "more than a byte of padding per datagram unaccounted")
	require.Zero(t, acct.Unattributed)
	require.Len(t, acct.Components, 2)
	require.NotZero(t, acct.Components[0])
	require.NotZero(t, acct.Components[1])
	require.NotZero(t, acct.Records)
	require.NotZero(t, acct.Headers)
	// Transforms change more often and carry more bits.
	require.Greater(t, acct.Components[0], acct.Components[1])

	var sum Account
	sum.Add(acct)
	sum.Add(acct)
	require.Equal(t, 2*total, sum.Total())
}

// TestAccountTurnedOnMidTick: records cached before accounting was on are
// counted as unattributed, and the totals still add up.
func TestAccountTurnedOnMidTick(t *testing.T) {
	s := newAcctScene(100)
	enc := newEncoder(s.w)
	c1, c2 := baseline.NewTracker(1, 0), baseline.NewTracker(1, 0)
	var pk Packets
	s.step()
	enc.Build(c1, BuildOptions{Budget: 1 << 16}, &pk)
	enc.SetAccounting(true)
	enc.Build(c2, BuildOptions{Budget: 1 << 16}, &pk)
	acct := enc.Account()
	require.NotZero(t, acct.Unattributed)
	require.LessOrEqual(t, acct.Total(), uint64(pk.Bytes())*8)
	require.Less(t, uint64(pk.Bytes())*8-acct.Total(), 8*uint64(pk.Len()))
	enc.SetAccounting(false)
	require.Nil(t, enc.Account())
}

// BenchmarkAccounting is BenchmarkClientBuild (records cached) and a build
// that encodes every record itself, with bit accounting off and on: the
// accounting's cost when a debugger has it on.
func BenchmarkAccounting(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "on"
		}
		b.Run("cached-"+name, func(b *testing.B) {
			_, enc, c, _ := syncedClient(b)
			enc.SetAccounting(on)
			other := c.Clone()
			var pk Packets
			enc.Build(other, BuildOptions{}, &pk)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				enc.Build(c, BuildOptions{}, &pk)
			}
		})
		b.Run("encode-"+name, func(b *testing.B) {
			s, enc, c, _ := syncedClient(b)
			enc.SetAccounting(on)
			var pk Packets
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				b.StopTimer()
				enc.cache.tick = 0 // a fresh record cache, as on a new tick
				clear(enc.cache.entries)
				clear(enc.cache.tags)
				b.StartTimer()
				enc.Build(c, BuildOptions{}, &pk)
			}
			_ = s
		})
	}
}
