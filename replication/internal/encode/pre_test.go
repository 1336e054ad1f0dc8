package encode

import (
	"testing"

	"github.com/archenet/archenet/replication/internal/baseline"
	"github.com/archenet/archenet/replication/internal/entity"
	"github.com/archenet/archenet/replication/internal/receive"
	"github.com/stretchr/testify/require"
)

// preRig drives two encoders (a server's workers) for clients that ack
// every tick one tick late, pre-encoding before their Builds as a server
// does.
type preRig struct {
	s       *benchScene
	step    func()
	g       *Group
	encs    []*Encoder
	clients []*baseline.Tracker
	rcvs    []*receive.Receiver
	rel     entity.Bitset // every client's interest (nil: everything)
	pk      Packets
	sent    []byte // every datagram built
}

func newPreRig(t *testing.T, n, clients int) *preRig {
	r := &preRig{s: newBenchScene(n)}
	r.step = r.s.tumbler(false)
	r.g = NewGroup(r.s.w)
	r.encs = []*Encoder{r.g.NewEncoder(), r.g.NewEncoder()}
	for i := range clients {
		r.clients = append(r.clients, baseline.NewTracker(uint8(i+1), 0))
		r.rcvs = append(r.rcvs, receive.NewReceiver(r.s.reg, uint8(i+1), 0))
	}
	return r
}

// tick runs one tick and returns how many records were pre-encoded and how
// many candidates used them; wanted goes to EndPreencode.
func (r *preRig) tick(t *testing.T, wanted entity.Bitset) (encoded, hits int) {
	r.step()
	if n := r.g.BeginPreencode(); n > 0 {
		r.encs[0].Preencode(0, n/2)
		r.encs[1].Preencode(n/2, n)
	}
	for _, e := range r.encs {
		encoded += e.pre.encoded
	}
	for i, c := range r.clients {
		r.encs[i%2].Build(c, BuildOptions{Relevant: r.rel}, &r.pk)
		for j := range r.pk.Len() {
			r.sent = append(r.sent, r.pk.At(j)...)
			_, err := r.rcvs[i].Decode(r.pk.At(j))
			require.NoError(t, err)
		}
		a := r.rcvs[i].Ack()
		c.Ack(&a)
	}
	for _, e := range r.encs {
		hits += e.PreHits
		e.EndTick()
	}
	r.g.EndPreencode(wanted)
	r.s.w.EndTick()
	return encoded, hits
}

// TestPreencodeCommonKey: clients that ack at the same pace get their
// records pre-encoded (after the first ticks, which settle the key), only
// for the wanted entities.
func TestPreencodeCommonKey(t *testing.T) {
	const n = 200
	r := newPreRig(t, n, 4)
	for range 30 { // (the key settles as prediction starts: a pause)
		r.tick(t, nil)
	}
	encoded, hits := r.tick(t, nil)
	require.Equal(t, n, encoded, "every moving entity is pre-encoded")
	require.Equal(t, 4*n, hits, "every client's every record came pre-encoded")

	var wanted entity.Bitset
	for slot := uint32(0); slot < n; slot += 4 {
		wanted.Set(slot)
	}
	r.tick(t, wanted)
	encoded, hits = r.tick(t, wanted)
	require.Equal(t, n/4, encoded, "only the wanted entities are pre-encoded")
	require.Equal(t, 4*n/4, hits)
}

// TestPreencodePausesWhenUnused: records no client uses stop pre-encoding
// for preIdle ticks.
func TestPreencodePausesWhenUnused(t *testing.T) {
	const n = 200
	r := newPreRig(t, n, 2)
	for range 30 { // (the key settles as prediction starts: a pause)
		r.tick(t, nil)
	}
	// The clients now see a tenth of the entities, but every one is wanted.
	r.rel = entity.Bitset{}
	for slot := uint32(0); slot < n; slot += 10 {
		r.rel.Set(slot)
	}
	encoded, hits := r.tick(t, nil)
	require.Equal(t, n, encoded)
	require.Less(t, 2*hits, encoded, "a tenth of the records is used")
	for i := range preIdle {
		encoded, _ = r.tick(t, nil)
		require.Zero(t, encoded, "paused tick %d", i)
	}
	encoded, _ = r.tick(t, nil)
	require.Equal(t, n, encoded, "pre-encoding resumes")
}

// TestPreencodeReadAheadKeepsBytes: pre-encoding with reading ahead (as in
// a large world) only reads: its clients get the bytes they get without.
func TestPreencodeReadAheadKeepsBytes(t *testing.T) {
	const n = 300
	a, b := newPreRig(t, n, 3), newPreRig(t, n, 3)
	for _, e := range a.encs {
		e.cands.touchAt = 0
	}
	var wanted entity.Bitset
	for slot := uint32(0); slot < n; slot += 3 {
		wanted.Set(slot)
	}
	pre := 0
	for tick := range 50 {
		w := wanted
		if tick%2 == 0 {
			w = nil
		}
		encoded, _ := a.tick(t, w)
		b.tick(t, w)
		pre += encoded
		require.Equal(t, b.sent, a.sent, "tick %d", tick)
	}
	require.NotZero(t, pre)
	require.NotZero(t, a.encs[0].cands.touched+a.encs[1].cands.touched, "read ahead")
	require.Zero(t, b.encs[0].cands.touched+b.encs[1].cands.touched)
}
