package tests

import (
	"math"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/transport/netem"
	"github.com/archenet/archenet/transport/quic"
)

// TestQUICJitterSoak is a long run for investigation, not CI: set
// ARCHENET_SOAK=seconds. Two clients through an impairment proxy (50 ± 20 ms
// each way, reordering, 1% loss), 200 moving bodies; it logs each
// client's budget, RTT, loss and send-queue drops every second.
func TestQUICJitterSoak(t *testing.T) {
	secs, _ := strconv.Atoi(os.Getenv("ARCHENET_SOAK"))
	if secs == 0 {
		t.Skip("set ARCHENET_SOAK=seconds")
	}
	seed, _ := strconv.Atoi(os.Getenv("ARCHENET_SOAK_SEED"))
	r := newQUICRig(t, quic.Config{}, nil)
	ents := r.movers(200, 11)
	r.game = func(int) {
		for i, e := range ents {
			p := r.pos(e)
			p.X += 0.05 * math.Sin(float64(r.tick+i)/10)
			p.Z += 0.05 * math.Cos(float64(r.tick+i)/10)
		}
	}
	path := netem.Conditions{Latency: 50 * time.Millisecond, Jitter: 20 * time.Millisecond, JitterReorders: true, Loss: 0.01}
	for i := range 2 {
		p, err := netem.Listen(r.l.Addr().String(), uint64(seed*10+i+1))
		require.NoError(t, err)
		defer p.Close()
		p.SetConditions(path, path)
		r.good = append(r.good, r.dial(p.Addr().String(), ""))
	}
	r.until("clients ready", 20*time.Second, func() bool { return r.clients[0].c.Ready() && r.clients[1].c.Ready() })
	last := time.Now()
	r.runFor(time.Duration(secs)*time.Second, func() bool {
		if time.Since(last) < time.Second {
			return false
		}
		last = time.Now()
		for _, id := range r.srv.Clients() {
			ci, _ := r.srv.Client(id)
			t.Logf("client %d: budget %6d B/s, RTT %v, ack delay %v, loss %.3f, send dropped %d, acked %d, snapshot bytes %d",
				id, ci.BytesPerSecond, ci.RTT.Round(time.Millisecond), ci.AckDelay.Round(time.Millisecond), ci.Loss,
				ci.Transport.DatagramsSendDropped, ci.NewestAck, ci.SnapshotBytes)
		}
		return false
	})
	_ = replication.ClientID(0)
}
