package encode

import (
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"testing"

	"github.com/archenet/archenet/replication/internal/baseline"
	"github.com/archenet/archenet/replication/internal/receive"
	"github.com/archenet/archenet/replication/internal/store"
	"github.com/archenet/archenet/replication/internal/wire"
	"github.com/stretchr/testify/require"
)

// goldenRun drives encoders for clients with different ack lags and ack
// loss over a scene for ticks ticks, decodes every datagram, and returns
// the SHA-256 of all of them in order. With pre, two encoders take turns
// (as a server's workers do), pre-encoding the records of the most common
// key first (Group.BeginPreencode) in two halves.
func goldenRun(t *testing.T, w *store.Ring, reg func(id uint8) *receive.Receiver, step func(), ticks int, pre bool) string {
	t.Helper()
	g := NewGroup(w)
	encs := []*Encoder{g.NewEncoder()}
	if pre {
		encs = append(encs, g.NewEncoder())
		g.pre.minShare = 1 // (three clients of different lags share no key)
	}
	preHits := 0
	rng := rand.New(rand.NewPCG(9, 9))
	type peer struct {
		c    *baseline.Tracker
		r    *receive.Receiver
		lag  int
		acks []wire.Ack
		opt  BuildOptions
	}
	peers := []*peer{
		{c: baseline.NewTracker(1, 0), r: reg(1), lag: 1},
		{c: baseline.NewTracker(2, 0), r: reg(2), lag: 3},
		{c: baseline.NewTracker(3, 0), r: reg(3), lag: 5, opt: BuildOptions{Budget: 300}},
	}
	h := sha256.New()
	var pk Packets
	for range ticks {
		step()
		if n := g.BeginPreencode(); n > 0 {
			encs[0].Preencode(0, n/2)
			encs[len(encs)-1].Preencode(n/2, n)
		}
		for i, p := range peers {
			enc := encs[i%len(encs)]
			enc.Build(p.c, p.opt, &pk)
			for j := range pk.Len() {
				d := pk.At(j)
				h.Write(d)
				if rng.IntN(10) == 0 {
					continue // lost
				}
				_, err := p.r.Decode(d)
				require.NoError(t, err, "client %d tick %d part %d", p.c.ID, w.Current().Tick, j)
			}
			p.acks = append(p.acks, p.r.Ack())
			if len(p.acks) > p.lag && rng.IntN(8) != 0 {
				p.c.Ack(&p.acks[len(p.acks)-1-p.lag])
			}
		}
		for _, e := range encs {
			preHits += e.PreHits
			e.EndTick()
		}
		g.EndPreencode(nil)
		w.EndTick()
	}
	if pre {
		require.Positive(t, preHits, "no Build used a pre-encoded record")
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TestEncoderBytesGolden pins the bytes the encoder sends for two scenes
// (tumbling poses: the pose kernel with linear and quadratic prediction;
// poses with owner-only stats coming and going: the general path), so a
// change that alters a single bit shows. A deliberate change of the
// coding updates the hashes and says so in its commit.
func TestEncoderBytesGolden(t *testing.T) {
	for _, pre := range []bool{false, true} {
		s := newBenchScene(250)
		tumble := s.tumbler(true)
		poses := goldenRun(t, s.w, func(id uint8) *receive.Receiver { return receive.NewReceiver(s.reg, id, 0) }, tumble, 150, pre)

		a := newAcctScene(300)
		mixed := goldenRun(t, a.w, func(id uint8) *receive.Receiver { return receive.NewReceiver(a.reg, id, 0) }, a.step, 150, pre)

		require.Equal(t, "5b3ee6bc0ff21515f6fc887879f700e2cae80a6278dce5acfe5437865b58faa5", poses, "pose scene, pre-encoding %v", pre)
		require.Equal(t, "0ed354e5725e80feac9f621b375b81f7d912c877d464444c55beae506dd6c6e4", mixed, "mixed scene, pre-encoding %v", pre)
	}
}
