package encode

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/archenet/archenet/replication/internal/baseline"
	"github.com/archenet/archenet/replication/internal/entity"
	"github.com/archenet/archenet/replication/internal/receive"
	"github.com/archenet/archenet/replication/internal/store"
	"github.com/archenet/archenet/replication/internal/wire"
	"github.com/stretchr/testify/require"
)

// shareTick runs one tick of r with per-client options and acks: opt gives
// client i's Build options, ack whether its ack reaches the server. It
// returns the tick's shared Builds.
func shareTick(t *testing.T, r *preRig, opt func(i int) BuildOptions, ack func(i int) bool) int {
	r.step()
	if n := r.g.BeginPreencode(); n > 0 {
		r.encs[0].Preencode(0, n/2)
		r.encs[1].Preencode(n/2, n)
	}
	shared := r.encs[0].SharedBuilds() + r.encs[1].SharedBuilds()
	for i, c := range r.clients {
		// (clients in two contiguous halves, as a server's workers take them)
		r.encs[2*i/len(r.clients)].Build(c, opt(i), &r.pk)
		for j := range r.pk.Len() {
			r.sent = append(r.sent, r.pk.At(j)...)
			_, err := r.rcvs[i].Decode(r.pk.At(j))
			require.NoError(t, err)
		}
		if ack(i) {
			a := r.rcvs[i].Ack()
			c.Ack(&a)
		}
	}
	for _, e := range r.encs {
		e.EndTick()
	}
	r.g.EndPreencode(nil)
	r.s.w.EndTick()
	return r.encs[0].SharedBuilds() + r.encs[1].SharedBuilds() - shared
}

// TestSharedBuildsSameBytes: clients whose Builds repeat another's get,
// byte for byte, the datagrams and views a Build of their own would make:
// with their own input acks in the headers, budgets that defer for some
// of them, acks lost for some, several datagrams a tick, and interest
// that differs for some.
func TestSharedBuildsSameBytes(t *testing.T) {
	const n, clients = 300, 8
	a, b := newPreRig(t, n, clients), newPreRig(t, n, clients)
	for _, e := range b.encs {
		e.NoShare = true
	}
	rng := rand.New(rand.NewPCG(1, 2))
	shared := 0
	for tick := range 120 {
		mtu := 1200
		if tick >= 60 {
			mtu = 300 // several datagrams a tick
		}
		calm := tick%20 < 10      // the same input acks, no deferral, no loss
		lost := rng.IntN(clients) // this tick's client whose ack is lost
		limited := rng.IntN(clients)
		if calm {
			lost, limited = -1, -1
		}
		inputs, leads, depths := make([]uint32, clients), make([]uint32, clients), make([]int, clients)
		for i := range inputs {
			inputs[i] = uint32(100 + tick + rng.IntN(2) + 40*(i/4)*(tick/30%2))
			leads[i], depths[i] = uint32(1+rng.IntN(2)), rng.IntN(2)
			if calm {
				inputs[i], leads[i], depths[i] = uint32(100+tick), 2, 1
			}
		}
		opt := func(i int) BuildOptions {
			o := BuildOptions{Budget: mtu, InputAck: inputs[i], HasInputAck: i != 3, HasInputFeedback: true,
				InputHeld: inputs[i] + leads[i], InputDepth: depths[i]}
			if i == limited && tick%3 == 0 {
				o.Allowance, o.Limited = 200, true // defers
			}
			if i == clients-1 && tick >= 90 {
				o.Relevant = entity.Bitset{}
				for slot := range uint32(n) {
					if slot != 7 { // sees one entity less
						o.Relevant.Set(slot)
					}
				}
			}
			return o
		}
		ack := func(i int) bool { return i != lost || tick%4 != 0 }
		sh := shareTick(t, a, opt, ack)
		if calm && tick%20 >= 8 { // (settled: the views lost or deferred in the storm are gone)
			// Every client repeats the Build of the first of its encoder,
			// but client 3 (no input ack: a shorter header) and, from
			// tick 90, client 7 (its interest).
			want := clients - 3
			if tick >= 90 {
				want--
			}
			require.Equal(t, want, sh, "tick %d: Builds repeated", tick)
			shared += sh
		}
		shareTick(t, b, opt, ack)
		require.Equal(t, b.sent, a.sent, "tick %d", tick)
		for i := range a.clients {
			require.Equal(t, b.rcvs[i].Ack(), a.rcvs[i].Ack(), "tick %d client %d", tick, i)
		}
	}
	require.NotZero(t, shared)
	require.Zero(t, b.encs[0].SharedBuilds()+b.encs[1].SharedBuilds())
}

// TestSharedBuildsAccount: with bit accounting on, a repeated Build adds
// what the repeated one did: the accounts (and bytes) are those without
// shared builds.
func TestSharedBuildsAccount(t *testing.T) {
	const n, clients = 200, 6
	a, b := newPreRig(t, n, clients), newPreRig(t, n, clients)
	for _, e := range b.encs {
		e.NoShare = true
	}
	for _, r := range []*preRig{a, b} {
		for _, e := range r.encs {
			e.SetAccounting(true)
		}
	}
	shared := 0
	for tick := range 40 {
		opt := func(i int) BuildOptions {
			return BuildOptions{Budget: 400, InputAck: uint32(50 + tick), HasInputAck: true}
		}
		shared += shareTick(t, a, opt, func(int) bool { return true })
		shareTick(t, b, opt, func(int) bool { return true })
		require.Equal(t, b.sent, a.sent, "tick %d", tick)
	}
	var accA, accB Account
	for i := range a.encs {
		accA.Add(a.encs[i].Account())
		accB.Add(b.encs[i].Account())
	}
	require.Positive(t, shared)
	require.Equal(t, accB, accA)
	require.Positive(t, accA.Total())
}

// TestSharedCandsSameBytes: clients that own entities with owner-only
// fields (1 and 2) and clients that own none, with entities spawning,
// despawning and changing owner-only fields: Builds that take another's
// candidates (repeatCands) write, byte for byte, the datagrams a Build of
// their own would, whichever client's Build they take them from.
func TestSharedCandsSameBytes(t *testing.T) {
	for _, c := range []struct {
		ownEvery, budget int
		limited          bool
	}{{2, 600, false}, {40, 600, false}, {40, 250, false}, {40, 250, true}} {
		t.Run(fmt.Sprintf("every %d owned, %d-byte datagrams, allowances %v", c.ownEvery, c.budget, c.limited), func(t *testing.T) {
			sharedCandsSameBytes(t, c.ownEvery, c.budget, c.limited)
		})
	}
}

// sharedCandsAllowance is each client's byte allowance when limited: some
// never bind, some defer now and then (a Build whose records need more
// than a later client has is not repeated for it).
var sharedCandsAllowance = []int{0, 3000, 1100, 0, 2600, 1400}

// TestSharedCandsAllocateNothing: in a steady state, the Builds that take
// another's candidates or patch its datagrams allocate nothing. (Only the
// Builds are counted: the test's receivers and ring grow now and then, as
// the scene's owner-only stats come and go.)
func TestSharedCandsAllocateNothing(t *testing.T) {
	s := newAcctScene(300)
	s.ownEvery = 40
	g := NewGroup(s.w)
	encs := []*Encoder{g.NewEncoder(), g.NewEncoder()}
	var cs []*baseline.Tracker
	var rcvs []*receive.Receiver
	for _, id := range []uint8{1, 3, 2, 4, 5, 6} {
		cs = append(cs, baseline.NewTracker(id, 0))
		rcvs = append(rcvs, receive.NewReceiver(s.reg, id, 0))
	}
	var pk Packets
	var ms runtime.MemStats
	count := false
	var buildAllocs uint64
	tick := func() {
		s.step()
		for i, c := range cs {
			if count {
				runtime.ReadMemStats(&ms)
				buildAllocs -= ms.Mallocs
			}
			encs[i/3].Build(c, BuildOptions{Budget: 250}, &pk)
			if count {
				runtime.ReadMemStats(&ms)
				buildAllocs += ms.Mallocs
			}
			for j := range pk.Len() {
				if _, err := rcvs[i].Decode(pk.At(j)); err != nil {
					t.Fatal(err)
				}
			}
			ack := rcvs[i].Ack()
			c.Ack(&ack)
		}
		for _, e := range encs {
			e.EndTick()
		}
		s.w.EndTick()
	}
	for range 120 {
		tick()
	}
	shared := encs[0].SharedBuilds() + encs[0].SharedCands()
	count = true
	for range 30 {
		tick()
	}
	if buildAllocs != 0 && !raceEnabled {
		t.Errorf("%d allocations in 30 ticks' Builds", buildAllocs)
	}
	require.Greater(t, encs[0].SharedBuilds()+encs[0].SharedCands()-shared, 30, "the owners' Builds were shared")
}

func sharedCandsSameBytes(t *testing.T, ownEvery, budget int, limited bool) {
	const n = 300
	type rig struct {
		s    *acctScene
		g    *Group
		encs []*Encoder
		cs   []*baseline.Tracker
		rcvs []*receive.Receiver
		sent []byte
	}
	mk := func(noShare bool) *rig {
		r := &rig{s: newAcctScene(n)}
		r.s.ownEvery = ownEvery
		r.g = NewGroup(r.s.w)
		r.encs = []*Encoder{r.g.NewEncoder(), r.g.NewEncoder()}
		for _, e := range r.encs {
			e.NoShare = noShare
		}
		// Encoder 0 builds for clients 1, 3, 2 (owners first and last),
		// encoder 1 for 4, 5, 6 (no owner).
		for _, id := range []uint8{1, 3, 2, 4, 5, 6} {
			r.cs = append(r.cs, baseline.NewTracker(id, 0))
			r.rcvs = append(r.rcvs, receive.NewReceiver(r.s.reg, id, 0))
		}
		return r
	}
	a, b := mk(false), mk(true)
	var pk Packets
	run := func(r *rig, tick int) {
		r.s.step()
		for i, c := range r.cs {
			opt := BuildOptions{Budget: budget, InputAck: uint32(tick + 10), HasInputAck: true}
			if a := sharedCandsAllowance[i]; limited && a > 0 {
				opt.Allowance, opt.Limited = a, true
			}
			r.encs[i/3].Build(c, opt, &pk)
			for j := range pk.Len() {
				r.sent = append(r.sent, pk.At(j)...)
				_, err := r.rcvs[i].Decode(pk.At(j))
				require.NoError(t, err)
			}
			if (tick+i)%7 != 0 { // (some acks lost: baselines differ for a while)
				ack := r.rcvs[i].Ack()
				c.Ack(&ack)
			}
		}
		endTick(r.encs, r.s.w)
	}
	for tick := range 90 {
		run(a, tick)
		run(b, tick)
		requireSameTick(t, tick, a.encs, b.encs, a.sent, b.sent)
	}
	cands := a.encs[0].SharedCands() + a.encs[1].SharedCands()
	t.Logf("%d Builds took another's candidates, %d repeated its datagrams", cands, a.encs[0].SharedBuilds()+a.encs[1].SharedBuilds())
	require.Greater(t, a.encs[0].SharedBuilds()+a.encs[0].SharedCands(), 60, "the owners' Builds are shared")
	require.Zero(t, b.encs[0].SharedCands()+b.encs[1].SharedCands()+b.encs[0].SharedBuilds()+b.encs[1].SharedBuilds())
}

// BenchmarkOwnerSharedBuild: a client that owns entities with owner-only
// fields (one in 40 of 300 tumbling, changing entities is owned, half by
// it), the second Build of the tick for the same view: "patched" takes the
// first's datagrams and writes the ones with its own records anew, "alone"
// builds its own (shared builds off).
func BenchmarkOwnerSharedBuild(b *testing.B) {
	for _, alone := range []bool{false, true} {
		name := "patched"
		if alone {
			name = "alone"
		}
		b.Run(name, func(b *testing.B) {
			s := newAcctScene(300)
			s.ownEvery = 40
			g := NewGroup(s.w)
			enc := g.NewEncoder()
			enc.NoShare = alone
			cs := []*baseline.Tracker{baseline.NewTracker(2, 0), baseline.NewTracker(1, 0)}
			rcvs := []*receive.Receiver{receive.NewReceiver(s.reg, 2, 0), receive.NewReceiver(s.reg, 1, 0)}
			var pk Packets
			records := 0
			tick := func(timed bool) {
				s.step()
				for i, c := range cs {
					if timed && i == 1 {
						b.StartTimer()
					}
					info := enc.Build(c, BuildOptions{Budget: 600}, &pk)
					if timed && i == 1 {
						b.StopTimer()
						records += info.Deltas + info.Fulls + info.Removals
					}
					for j := range pk.Len() {
						if _, err := rcvs[i].Decode(pk.At(j)); err != nil {
							b.Fatal(err)
						}
					}
					ack := rcvs[i].Ack()
					c.Ack(&ack)
				}
				enc.EndTick()
				s.w.EndTick()
			}
			for range 60 {
				tick(false)
			}
			shared := enc.SharedBuilds()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				b.StopTimer()
				tick(true)
				b.StartTimer()
			}
			if !alone && enc.SharedBuilds() == shared {
				b.Fatal("no Build was shared")
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(records), "ns/record")
			b.ReportMetric(float64(records)/float64(b.N), "records")
		})
	}
}

// TestSharedWithDeferredPredictionViews: clients that lose datagrams of
// multi-datagram ticks hold views with some entities at older values; a
// view of those that a Build extrapolates through (its prediction views)
// makes some of its records differ from another client's. Its Build takes
// the other's candidates and remakes those records (repeatCands), or the
// other takes its; the bytes and the coding's counts are those of Builds
// of their own, tick for tick.
func TestSharedWithDeferredPredictionViews(t *testing.T) {
	const n, clients, ticks = 300, 12, 80
	type rig struct {
		s    *benchScene
		step func()
		encs []*Encoder
		cs   []*baseline.Tracker
		rcvs []*receive.Receiver
		rng  *rand.Rand
		sent []byte
	}
	mk := func(noShare bool) *rig {
		r := &rig{s: newBenchScene(n), rng: rand.New(rand.NewPCG(7, 7))}
		r.step = r.s.tumbler(true)
		g := NewGroup(r.s.w)
		r.encs = []*Encoder{g.NewEncoder(), g.NewEncoder()}
		for _, e := range r.encs {
			e.NoShare = noShare
		}
		for id := range clients {
			r.cs = append(r.cs, baseline.NewTracker(uint8(id+1), 0))
			r.rcvs = append(r.rcvs, receive.NewReceiver(r.s.reg, uint8(id+1), 0))
		}
		return r
	}
	a, b := mk(false), mk(true)
	var pk Packets
	run := func(r *rig, tick int) {
		r.step()
		acks := make([]wire.Ack, len(r.cs))
		for i, c := range r.cs {
			r.encs[i*2/clients].Build(c, BuildOptions{Budget: 400, InputAck: uint32(tick), HasInputAck: true}, &pk)
			for j := range pk.Len() {
				r.sent = append(r.sent, pk.At(j)...)
				if r.rng.IntN(20) == 0 && pk.Len() > 1 {
					continue // lost: the view holds the other datagrams' records
				}
				_, err := r.rcvs[i].Decode(pk.At(j))
				require.NoError(t, err, "tick %d client %d part %d", tick, i, j)
			}
			acks[i] = r.rcvs[i].Ack()
		}
		// (the acks come in after the tick's Builds, as at a server)
		for i, c := range r.cs {
			c.Ack(&acks[i])
		}
		endTick(r.encs, r.s.w)
	}
	for tick := range ticks {
		run(a, tick)
		run(b, tick)
		requireSameTick(t, tick, a.encs, b.encs, a.sent, b.sent)
	}
	pcCands, shared := 0, 0
	for _, e := range a.encs {
		pcCands += e.pcCandsN
		shared += e.SharedBuilds()
	}
	t.Logf("%d of %d Builds repeated another's datagrams; %d took another's candidates past deferred prediction entries", shared, ticks*clients, pcCands)
	require.Greater(t, pcCands, 20, "Builds with deferred entries in a prediction view shared")
}

// endTick ends a tick of a test's encoders and ring.
func endTick(encs []*Encoder, w *store.Ring) {
	for _, e := range encs {
		e.EndTick()
	}
	w.EndTick()
}

// requireSameTick requires what shared Builds (encoders a) sent so far to
// be what Builds of their own (b) did, and the coding's counts to be the
// same (each record counted as often as it was sent).
func requireSameTick(t *testing.T, tick int, a, b []*Encoder, aSent, bSent []byte) {
	t.Helper()
	require.Equal(t, bSent, aSent, "tick %d", tick)
	for k := range a {
		sa, sb := a[k].shard, b[k].shard
		require.Equal(t, [3]any{sb.hist, sb.quadGain, sb.quadN}, [3]any{sa.hist, sa.quadGain, sa.quadN}, "tick %d encoder %d: coding counts", tick, k)
	}
}
