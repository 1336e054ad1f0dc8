package sockets_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/replication/host"
	"github.com/archenet/archenet/tests/internal/harness"
	"github.com/archenet/archenet/transport/quic"
	"github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/require"
)

// TestHostIsolation: one process, 16 matches over QUIC (2 clients and 300
// movers each). In troubled windows one of them burns 50 ms of CPU in
// every frame (a slow game tick: at 30 Hz more than its whole period) and a
// hostile client reconnects to it and sends junk datagrams; in quiet
// windows, interleaved with them, it is a match like the others, and the
// same trouble is a decoy's: a match of a second host in the same process,
// so that both kinds of window load the machine alike (a busy machine's
// other work falls on both too). The other 15 matches' frame rate and frame
// time p99 do not move. Under the race detector the figures are reported,
// not bounded.
func TestHostIsolation(t *testing.T) {
	r := newHostRig(t, host.Config{})
	// Under the race detector (everything 5-20 times slower) a smaller
	// scene: one client per match, 50 movers.
	perMatch, movers, window := 2, 300, 1250*time.Millisecond
	if harness.RaceEnabled {
		perMatch, movers, window = 1, 50, time.Second
	}
	var good []string
	for i := range 16 {
		name := fmt.Sprintf("m%02d", i)
		r.open(name, movers, uint64(i))
		if i > 0 {
			good = append(good, name)
		}
		for range perMatch {
			r.join(name, nil)
		}
	}
	r.until("every client ready", 60*time.Second, func() bool { return int(r.ready.Load()) == 16*perMatch })
	// The decoy: none under the race detector, where the figures are
	// reported, not bounded (the machine has enough to do there).
	var decoy *hostRig
	decoyBad := &sceneGame{} // (a stand-in, never run)
	if !harness.RaceEnabled {
		decoy = newHostRig(t, host.Config{})
		decoy.open("m00", movers, 0)
		decoyBad = decoy.games["m00"]
	}
	var target atomic.Pointer[hostRig] // the hostile client's
	stop := make(chan struct{})
	var hostile sync.WaitGroup
	hostile.Add(1)
	go func() {
		defer hostile.Done()
		hostileClient(&target, "m00", stop)
	}()
	defer func() { close(stop); hostile.Wait() }()
	time.Sleep(time.Second) // (settle: every client past its initial world)
	bad := r.games["m00"]
	badFrames := 0
	trouble := func(here bool) { // (one of the two bad matches is slow at a time)
		if here {
			decoyBad.slow.Store(0)
			bad.slow.Store(int64(50 * time.Millisecond))
			target.Store(r)
		} else {
			bad.slow.Store(0)
			bad.mu.Lock()
			badFrames += len(bad.frames)
			bad.mu.Unlock()
			decoyBad.slow.Store(int64(50 * time.Millisecond))
			target.Store(decoy)
		}
	}
	trouble(false)
	quiet, troubled, base, withBad := r.phases(4, window, good, trouble)
	decoyBad.slow.Store(0)
	target.Store(nil)
	m, _ := r.h.Match("m00")
	hostileJoins := m.Stats().Routed - uint64(perMatch)
	t.Logf("15 good matches' frame time p99 %s in quiet windows (the decoy troubled), %s while one match had a 50 ms tick and a hostile client (the windows' median p99 %s / %s; mean %s / %s; %d / %d frames); the bad match ran %d frames in %v of trouble and took %d hostile connections",
		ms(pct(quiet, 99)), ms(pct(troubled, 99)), ms(base), ms(withBad), ms(mean(quiet)), ms(mean(troubled)), len(quiet), len(troubled), badFrames, 4*window, hostileJoins)
	require.Zero(t, r.closed.Load(), "a good client was disconnected")
	require.Positive(t, hostileJoins, "the hostile client never reached the bad match")
	if harness.RaceEnabled {
		return
	}
	require.Greater(t, len(troubled), len(quiet)*9/10, "the good matches did not keep their frame rate beside the bad one")
	require.LessOrEqual(t, withBad, max(2*base, base+2*time.Millisecond), "the bad match moved the others' p99 (the windows' median)")
}

// hostileClient connects to match of the host target holds (none while it
// holds nil) over and over, sending junk datagrams (each connection is
// dropped for them), until stop closes.
func hostileClient(target *atomic.Pointer[hostRig], match string, stop <-chan struct{}) {
	rng := rand.New(rand.NewPCG(9, 9))
	junk := make([]byte, 1000)
	for {
		select {
		case <-stop:
			return
		case <-time.After(10 * time.Millisecond):
		}
		r := target.Load()
		if r == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		conn, err := quic.Dial(ctx, r.addr, &quic.Config{TLS: r.cert.ClientTLS(), Logger: harness.Quiet})
		cancel()
		if err != nil {
			continue
		}
		w := ecs.NewWorld()
		c, err := replication.NewClient(&w, conn, replication.ClientConfig{Registry: r.reg, Match: match, Logger: harness.Quiet})
		if err == nil {
			for range 10 {
				c.Receive()
				for range 20 {
					for i := range junk {
						junk[i] = byte(rng.Uint32())
					}
					_ = conn.SendDatagram(junk)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		_ = conn.Close()
	}
}
