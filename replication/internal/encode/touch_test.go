package encode

import (
	"bytes"
	"testing"

	"github.com/archenet/archenet/replication/internal/baseline"
	"github.com/archenet/archenet/replication/internal/entity"
	"github.com/archenet/archenet/replication/internal/receive"
	"github.com/archenet/archenet/replication/internal/wire"
	"github.com/stretchr/testify/require"
)

// Reading ahead in large worlds (Encoder.touch) only reads: an encoder that
// does it sends the bytes one that does not sends, to clients with lagging
// acks, different interest sets and entities that stop and start moving.
func TestTouchKeepsBytes(t *testing.T) {
	const n, clients = 700, 3
	type side struct {
		s    *benchScene
		enc  *Encoder
		cs   []*baseline.Tracker
		rcvs []*receive.Receiver
		acks [][]wire.Ack
		pk   Packets
	}
	mk := func(touchAt int) *side {
		sd := &side{s: newBenchScene(n)}
		sd.enc = newEncoder(sd.s.w)
		sd.enc.cands.touchAt = touchAt
		for range clients {
			sd.cs = append(sd.cs, baseline.NewTracker(0, 0))
			sd.rcvs = append(sd.rcvs, receive.NewReceiver(sd.s.reg, 0, 0))
			sd.acks = append(sd.acks, nil)
		}
		return sd
	}
	a, b := mk(0), mk(1<<30)
	rel := make([]entity.Bitset, clients)
	for tick := range 90 {
		for _, sd := range []*side{a, b} {
			s := sd.s
			for i := range s.ents {
				if (i+tick/10)%3 != 0 { // a third rests, in turn
					e := &s.ents[i]
					e.Pos.X += 0.05 + float64(i%5)*0.01
					e.Pos.Z -= 0.02 * float64(i%3)
				}
			}
			s.commit()
		}
		for ci := range clients {
			rel[ci] = rel[ci][:0]
			for i := range n {
				if (i+ci*tick)%(ci+2) != 0 {
					rel[ci].Set(uint32(i))
				}
			}
		}
		for ci := range clients {
			var out [2][]byte
			for k, sd := range []*side{a, b} {
				sd.enc.Build(sd.cs[ci], BuildOptions{Relevant: rel[ci]}, &sd.pk)
				for j := range sd.pk.Len() {
					out[k] = append(out[k], sd.pk.At(j)...)
					if _, err := sd.rcvs[ci].Decode(sd.pk.At(j)); err != nil {
						t.Fatal(err)
					}
				}
				sd.acks[ci] = append(sd.acks[ci], sd.rcvs[ci].Ack())
				if lag := 1 + ci; len(sd.acks[ci]) > lag {
					sd.cs[ci].Ack(&sd.acks[ci][len(sd.acks[ci])-1-lag])
				}
			}
			require.True(t, bytes.Equal(out[0], out[1]), "tick %d client %d", tick, ci)
		}
		a.s.w.EndTick()
		b.s.w.EndTick()
	}
	require.NotZero(t, a.enc.cands.touched)
}
