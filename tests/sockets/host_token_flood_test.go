package sockets_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/replication/host"
	"github.com/archenet/archenet/replication/host/token"
	"github.com/archenet/archenet/tests/internal/harness"
	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/quic"
	"github.com/stretchr/testify/require"
)

// TestHostTokenFlood: four matches admit their players with connect tokens;
// then attackers open 250 connections a second with expired, wrong-key,
// replayed, junk and unknown-match tokens for 4 s. Every bad token is refused
// with its reason; the good clients stay, and their matches' mean frame
// time does not move (the p99 is reported): the flood windows are interleaved with quiet ones in
// which the same attackers flood a decoy, a second host in the same process
// with the same verifier, so that both kinds of window load the machine
// alike.
func TestHostTokenFlood(t *testing.T) {
	key := token.NewKey()
	const addr = "game.example:7777"
	v, err := token.NewVerifier(token.VerifierConfig{Keys: map[uint32]token.Key{1: key}, Addresses: []string{addr}})
	require.NoError(t, err)
	r := newHostRig(t, host.Config{Tokens: v})
	minter := token.NewMinter(1, key)
	mint := func(m *token.Minter, match string, exp time.Duration) []byte {
		tok, err := m.Mint(token.Claims{Match: match, ClientID: rand.Uint64(), Expires: time.Now().Add(exp), Servers: []string{addr}})
		require.NoError(t, err)
		return tok
	}
	var names []string
	for i := range 4 {
		name := fmt.Sprintf("t%d", i)
		names = append(names, name)
		r.open(name, 300, uint64(i))
		r.join(name, mint(minter, name, time.Minute))
		r.join(name, mint(minter, name, time.Minute))
	}
	r.until("8 clients ready", 20*time.Second, func() bool { return r.ready.Load() == 8 })
	// The decoy: none under the race detector, where the figures are
	// reported, not bounded (the machine has enough to do there).
	var decoy *hostRig
	if !harness.RaceEnabled {
		decoy = newHostRig(t, host.Config{Tokens: v})
	}
	time.Sleep(time.Second) // (settle)

	used := mint(minter, "t0", time.Minute)
	_, err = v.Verify(used, nil) // spent
	require.NoError(t, err)
	bad := [][]byte{
		mint(minter, "t0", -time.Second),                            // expired
		mint(token.NewMinter(1, token.NewKey()), "t0", time.Minute), // wrong key
		used,                           // replayed
		make([]byte, 1000),             // junk
		mint(minter, "x", time.Minute), // unknown match
	}
	// The attackers run in this process too, on the same two cores: paced
	// at 250 connections a second in all (each costs a QUIC handshake on
	// both ends), so that what is measured is the host, not the attackers'
	// own CPU. They attack r in the troubled windows and the decoy in the
	// quiet ones, interleaved.
	var target atomic.Pointer[hostRig]
	target.Store(decoy)
	stop := make(chan struct{})
	var attackers sync.WaitGroup
	// (attempts on r, those whose QUIC connection was established, and
	// those answered: refused with a reason, as the client sees it)
	var attempts, dialled, answered atomic.Int64
	for i := range 8 {
		attackers.Add(1)
		go func() {
			defer attackers.Done()
			pace := time.NewTicker(time.Second * 8 / 250)
			defer pace.Stop()
			for j := 0; ; j++ {
				select {
				case <-stop:
					return
				case <-pace.C:
				}
				at := target.Load()
				if at == nil {
					continue
				}
				if at == r {
					attempts.Add(1)
				}
				attackers.Add(1)
				go func() {
					defer attackers.Done()
					d, ok := badClient(at, bad[(i+j)%len(bad)])
					if at == r && d {
						dialled.Add(1)
					}
					if at == r && ok {
						answered.Add(1)
					}
				}()
			}
		}()
	}
	quiet, flood, base, during := r.phases(4, time.Second, names, func(here bool) {
		if here {
			target.Store(r)
		} else {
			target.Store(decoy)
		}
	})
	close(stop)
	attackers.Wait()
	st := r.h.Stats()
	t.Logf("4 matches' frame time p99 %s in quiet windows (the decoy flooded), %s during a flood of %d connections with bad tokens (the windows' median p99 %s / %s; mean %s / %s; %d connected, %d refusals seen by the attackers); refused %v",
		ms(pct(quiet, 99)), ms(pct(flood, 99)), attempts.Load(), ms(base), ms(during), ms(mean(quiet)), ms(mean(flood)), dialled.Load(), answered.Load(), st.Refused)
	require.Zero(t, r.closed.Load(), "a good client was disconnected: %q", r.closedWhy())
	require.Equal(t, int32(8), r.ready.Load())
	for _, why := range []string{"token expired", "token wrong key", "token replayed", "token malformed", "unknown match"} {
		require.Positive(t, st.Refused[why], why)
	}
	require.Equal(t, uint64(8), st.Routed, "only the good clients were routed")
	// Every attempt that got an answer was refused, and counted by the
	// host. (How many got one within their 5 s depends on the machine's
	// load: the attackers' own handshakes share its cores. A run with
	// other work on the machine answered 78% of them, runs with two CPU
	// hogs beside it 21-61%: most never got their QUIC connection within
	// the 5 s. Of those that did, at least half got their answer.)
	require.GreaterOrEqual(t, int64(refused(st)), answered.Load(), "refusals the host did not count")
	if harness.RaceEnabled {
		// (Under the race detector beside two CPU hogs a frame took 1.8 s
		// and 48 of 109 connected attackers had their answer within 5 s:
		// the share answered is bounded in the real-time run only.)
		return
	}
	require.GreaterOrEqual(t, answered.Load(), dialled.Load()/2, "bad tokens not answered (%d attempts, %d connected)", attempts.Load(), dialled.Load())
	// The mean frame time, not the p99: on a machine that the attackers'
	// own QUIC handshakes (both ends of them) and other work saturate, the
	// p99 of a window is that of whichever stall of the whole machine hit
	// it (8 to 1,300 ms measured with two CPU hogs beside the test, in
	// either kind of window), while the token checks are microseconds. A
	// flood that held up the matches would take whole frames of 33 ms.
	// (10 ms, not 2: the decoy puts the handshakes in the quiet windows
	// too, but not frame for frame.)
	baseMean, duringMean := mean(quiet), mean(flood)
	require.LessOrEqual(t, duringMean, max(2*baseMean, baseMean+10*time.Millisecond), "the flood moved the good matches' mean frame time (p99 %s in its windows against %s, the windows' median)", ms(during), ms(base))
}

// badClient presents tok and waits for the host's refusal (blocking, not
// polling: the attackers must not load the machine by themselves); it
// reports whether its QUIC connection was established within 5 s (on a
// saturated machine many are not), and whether the host refused it (and
// not a timeout or a dial error).
func badClient(r *hostRig, tok []byte) (dialled, answered bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := quic.Dial(ctx, r.addr, &quic.Config{TLS: r.cert.ClientTLS(), Logger: harness.Quiet})
	if err != nil {
		return false, false
	}
	defer conn.Close()
	_, err = transport.ClientHandshake(ctx, conn, transport.Hello{Version: replication.ProtocolVersion, ProtocolHash: r.reg.Hash(), Token: tok})
	var he *transport.HandshakeError
	return true, errors.As(err, &he) && he.Kind == transport.HandshakeRejected
}

func refused(st host.Stats) uint64 {
	var n uint64
	for _, v := range st.Refused {
		n += v
	}
	return n
}
