package sockets_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	quicgo "github.com/quic-go/quic-go"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
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

// TestHostConnectionRateFlood: four matches on a host with the listener's
// default bounds; attackers in a child process try 1,000 connections a
// second with bad connect tokens from 64 source addresses. The listener's
// new-connection rate lets at most 256 a second through to their TLS
// handshake, asks for a Retry once half of that is spent, and refuses the
// rest at their first packet, so the good matches' frame p99 stays within
// 3 ms of its quiet windows' (the windows interleaved: in the quiet ones
// the same attackers flood a decoy host in the same process).
func TestHostConnectionRateFlood(t *testing.T) {
	if testing.Short() || harness.RaceEnabled {
		t.Skip("1,000 connections a second, with a bound on frame times: run without -short and the race detector (.ci/run does)")
	}
	key := token.NewKey()
	const addr = "game.example:7777"
	v, err := token.NewVerifier(token.VerifierConfig{Keys: map[uint32]token.Key{1: key}, Addresses: []string{addr}})
	require.NoError(t, err)
	r := newHostRigOn(t, host.Config{Tokens: v}, quic.Config{})
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
	decoy := newHostRigOn(t, host.Config{Tokens: v}, quic.Config{})

	bad := []string{
		hex.EncodeToString(mint(minter, "t0", -time.Second)),                            // expired
		hex.EncodeToString(mint(token.NewMinter(1, token.NewKey()), "t0", time.Minute)), // wrong key
		hex.EncodeToString(make([]byte, 1000)),                                          // junk
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHostRateAttacker$", "-test.v")
	cmd.Env = append(os.Environ(), "ARCHENET_RATE_ADDRS="+r.addr+","+decoy.addr, "ARCHENET_RATE_TOKENS="+strings.Join(bad, ","),
		fmt.Sprintf("ARCHENET_RATE_HASH=%d", r.reg.Hash()))
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var childErr strings.Builder
	cmd.Stderr = &childErr
	require.NoError(t, cmd.Start())
	done := false
	defer func() {
		if !done {
			stdin.Close()
			_ = cmd.Wait()
		}
	}()
	say := func(what string) {
		_, err := fmt.Fprintln(stdin, what)
		require.NoError(t, err)
	}
	say("decoy")
	time.Sleep(time.Second) // (the attack's own load settles in)
	before, cpu0 := r.l.Admission(), harness.ReadCPU()
	quiet, flood, base, during := r.phases(4, time.Second, names, func(here bool) {
		if here {
			say("target")
		} else {
			say("decoy")
		}
	})
	after, idle := r.l.Admission(), harness.ReadCPU().IdleShare(cpu0)
	stdin.Close()
	var summary string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "attack: ") {
			summary = line[len("attack: "):]
		}
	}
	require.NoError(t, cmd.Wait(), childErr.String())
	done = true
	st := r.h.Stats()
	t.Logf("attackers: %s; the machine's CPU %.0f%% idle while measured", summary, 100*idle)
	t.Logf("4 matches' frame p99 (the windows' median) %s quiet, %s during the flood (pooled %s / %s, mean %s / %s); the listener refused %d for the rate, %d for their source's rate, asked %d for a Retry; the host refused %d bad tokens",
		ms(base), ms(during), ms(pct(quiet, 99)), ms(pct(flood, 99)), ms(mean(quiet)), ms(mean(flood)),
		after.RefusedRate-before.RefusedRate, after.RefusedRatePerAddress-before.RefusedRatePerAddress, after.Retries-before.Retries, refused(st))
	require.Zero(t, r.closed.Load(), "a good client was disconnected: %q", r.closedWhy())
	require.Equal(t, int32(8), r.ready.Load())
	require.Positive(t, refused(st), "bad tokens were answered")
	// (How many of the attempts reach the host's TLS depends on the
	// attackers' own CPU on the same cores: the listener's refusals are
	// tested in transport/quic. A busy machine raises every window's p99:
	// twice the quiet windows' is allowed then. A saturated one, with no
	// CPU idle while measured (beside two busy loops on two cores), hands
	// the attack's handshakes the good matches' time slices, whatever the
	// limits: there only a stall is caught.)
	if idle >= 0 && idle < saturated {
		t.Logf("the machine was saturated (%.1f%% idle): frame p99 bounded by the quiet windows' + %v only, not + 3 ms", 100*idle, saturatedSlack)
		require.LessOrEqual(t, during, base+saturatedSlack, "the flood stalled the good matches' frames on a saturated machine")
		return
	}
	require.LessOrEqual(t, during, max(base+3*time.Millisecond, 2*base), "the flood moved the good matches' frame p99")
}

// The machine is saturated when less than this share of its CPU time was
// idle (the flood test itself leaves 25–40% idle on an otherwise idle
// 2-core machine; beside two busy loops, 0%); a frame p99 then may exceed
// its quiet windows' by saturatedSlack.
const (
	saturated      = 0.05
	saturatedSlack = 50 * time.Millisecond
)

// TestHostRateAttacker is the child process of TestHostConnectionRateFlood:
// 1,000 connections a second from 127.0.1.1 to 127.0.1.64 (a QUIC transport
// each), each presenting one of ARCHENET_RATE_TOKENS (hex) in a Hello, to the
// first address of ARCHENET_RATE_ADDRS after a line "target" on stdin and to
// the second after "decoy", until stdin closes. At most 2,000 are in flight
// (each waits up to 2 s for its refusal); more are skipped, and counted.
func TestHostRateAttacker(t *testing.T) {
	addrs := strings.Split(os.Getenv("ARCHENET_RATE_ADDRS"), ",")
	if len(addrs) != 2 {
		t.Skip("run by TestHostConnectionRateFlood")
	}
	var hellos [][]byte
	hash, err := strconv.ParseUint(os.Getenv("ARCHENET_RATE_HASH"), 10, 64)
	require.NoError(t, err)
	for _, h := range strings.Split(os.Getenv("ARCHENET_RATE_TOKENS"), ",") {
		tok, err := hex.DecodeString(h)
		require.NoError(t, err)
		hellos = append(hellos, frame(transport.Hello{Version: replication.ProtocolVersion, ProtocolHash: hash, Token: tok}.Append(nil)))
	}
	raddrs := make([]net.Addr, 2)
	for i, a := range addrs {
		raddrs[i], err = net.ResolveUDPAddr("udp", a)
		require.NoError(t, err)
	}
	trs := make([]*quicgo.Transport, 64)
	for i := range trs {
		trs[i] = newRawTransportOn(t, net.IPv4(127, 0, 1, byte(i+1)))
	}
	var target atomic.Int32 // 0: none, 1: the first address, 2: the second
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var attempts, skipped, refusedEarly, answered atomic.Int64
	var wg sync.WaitGroup
	inFlight := make(chan struct{}, 2000)
	// Ten every 10 ms, to the schedule: a tick that came late sends those it
	// missed.
	pace := time.NewTicker(10 * time.Millisecond)
	defer pace.Stop()
	start, sent := time.Now(), 0
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				wg.Wait()
				fmt.Printf("attack: %d attempts (%d skipped: 2,000 in flight), %d refused at the transport, %d answered with a refusal\n",
					attempts.Load(), skipped.Load(), refusedEarly.Load(), answered.Load())
				return
			}
			target.Store(map[bool]int32{true: 2, false: 1}[l == "decoy"])
			continue
		case <-pace.C:
		}
		due := int(time.Since(start) / time.Millisecond)
		to := target.Load()
		for ; sent < due; sent++ {
			if to == 0 {
				continue
			}
			attempts.Add(1)
			select {
			case inFlight <- struct{}{}:
			default:
				skipped.Add(1)
				continue
			}
			wg.Add(1)
			go func(n int) {
				defer wg.Done()
				defer func() { <-inFlight }()
				early, ok := rateAttack(trs[n%len(trs)], raddrs[to-1], hellos[n%len(hellos)])
				if early {
					refusedEarly.Add(1)
				}
				if ok {
					answered.Add(1)
				}
			}(sent)
		}
	}
}

// rateAttack dials addr from tr, sends hello and waits up to 2 s for the
// answer: a refusal at the transport (early), or a Reject (answered).
func rateAttack(tr *quicgo.Transport, addr net.Addr, hello []byte) (early, answered bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	tlsConf := &tls.Config{InsecureSkipVerify: true, NextProtos: []string{quic.ALPN}, ServerName: "127.0.0.1"}
	qc, err := tr.Dial(ctx, addr, tlsConf, &quicgo.Config{EnableDatagrams: true, HandshakeIdleTimeout: 2 * time.Second})
	if err != nil {
		var te *quicgo.TransportError
		return errors.As(err, &te) && te.ErrorCode == quicgo.ConnectionRefused, false
	}
	defer qc.CloseWithError(0, "")
	st, err := qc.OpenStreamSync(ctx)
	if err != nil {
		return false, false
	}
	_ = st.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := st.Write(append([]byte{0xA1}, hello...)); err != nil {
		return false, false
	}
	br := bufio.NewReader(st)
	n, err := binary.ReadUvarint(br)
	if err != nil || n == 0 || n > transport.MaxHandshakeMessageSize {
		return false, false
	}
	m := make([]byte, n)
	if _, err := io.ReadFull(br, m); err != nil {
		return false, false
	}
	_, err = transport.ParseReject(m)
	return false, err == nil
}
