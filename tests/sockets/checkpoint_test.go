package sockets_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/replication/replicationtest"
	"github.com/archenet/archenet/tests/internal/harness"
	"github.com/archenet/archenet/tests/internal/loopback"
	"github.com/archenet/archenet/transport/quic"
	"github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/require"
)

// checkpointDirEnv names the directory process B of
// TestCheckpointAcrossProcesses restores from (set only in process B).
const checkpointDirEnv = "ARCHENET_TEST_CHECKPOINT_DIR"

// A match of 8 clients × 500 moving entities is checkpointed in this
// process (A) and restored in another (B: this test binary again, running
// TestCheckpointProcessB), over QUIC on loopback. A drains the match to B's
// address; every client follows the notice and resumes its seat in B within
// 2 s (the same ClientID), and its mirrors converge to B's world. The other
// match of A (the rig's control, with its own clients) goes on unaffected.
func TestCheckpointAcrossProcesses(t *testing.T) {
	if os.Getenv(checkpointDirEnv) != "" {
		t.Skip("(process B runs TestCheckpointProcessB only)")
	}
	r := loopback.NewQUIC(t, quic.Config{}, nil)
	ents := r.Movers(500, 17)
	r.Game = func(int) {
		for _, e := range ents {
			r.Pos(e).X += 0.1
		}
	}
	for range 8 {
		r.Good = append(r.Good, r.Dial(r.QUIC.Addr().String(), ""))
	}
	r.Until("clients ready", 20*time.Second, func() bool {
		for _, c := range r.Clients {
			if !c.Client.Ready() {
				return false
			}
		}
		return true
	})
	r.RunFor(time.Second, nil)
	ids := make([]replication.ClientID, len(r.Clients))
	for i, c := range r.Clients {
		ids[i] = c.Client.ID()
	}

	dir := t.TempDir()
	require.NoError(t, r.Cert.WriteFiles(filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")))
	t0 := time.Now()
	cp, err := r.Server.Checkpoint(nil, binary.LittleEndian.AppendUint32(nil, uint32(r.Tick))) // (the game's state: its tick)
	took := time.Since(t0)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "checkpoint"), cp, 0o600))
	t.Logf("checkpoint of %d entities and %d seats: %d bytes in %v", len(ents)+1, len(r.Clients), len(cp), took)

	b := startProcessB(t, dir)
	r.ResetLag()
	r.Server.DrainTo(b.addr, "moving to another process", time.Now().Add(time.Minute))
	drained := time.Now()
	resumedIn := make([]time.Duration, len(r.Clients))
	r.Until("every client resumed in B", 20*time.Second, func() bool {
		done := true
		for i, c := range r.Clients {
			if d, ok := c.Client.Draining(); ok && d.Address != "" && c.Client.Stats.Resumes == 0 {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				conn, err := quic.Dial(ctx, d.Address, &quic.Config{TLS: r.Cert.ClientTLS(), Logger: harness.Quiet})
				cancel()
				require.NoError(t, err)
				t.Cleanup(func() { _ = conn.Close() })
				require.NoError(t, c.Client.Resume(conn))
			}
			if resumedIn[i] == 0 && c.Client.Stats.Resumes == 1 && c.Client.State() == replication.StateReady {
				resumedIn[i] = time.Since(drained)
			}
			done = done && resumedIn[i] > 0
		}
		return done
	})
	worst := time.Duration(0)
	for i, c := range r.Clients {
		require.Equal(t, ids[i], c.Client.ID(), "client %d keeps its seat", i)
		worst = max(worst, resumedIn[i])
	}
	t.Logf("every client resumed in B within %v of the drain notice (the longest step of this process: %v)", worst.Round(time.Millisecond), r.LongestGap.Round(time.Millisecond))
	require.LessOrEqual(t, worst, 2*time.Second+r.LongestGap, "resumed within 2 s of the drain notice")
	r.Until("A let the seats go", 5*time.Second, func() bool { return len(r.Server.Clients()) == 0 && len(r.Server.Suspended()) == 0 })
	require.LessOrEqual(t, r.Control.LagMax, loopback.MaxLag, "A's other match went on unaffected")

	// B stops its movers and sends its state: every client holds it.
	state := b.still(t)
	world, netID, err := state.World(r.Registry)
	require.NoError(t, err)
	r.Until("every client converged on B's world", 10*time.Second, func() bool {
		for _, c := range r.Clients {
			if replicationtest.Converged(replicationtest.Check{Registry: r.Registry, Server: world, NetID: netID, Client: c.World, Me: c.Client.ID()}) != nil {
				return false
			}
		}
		return true
	})
	require.Len(t, state.Entities, len(ents)+1)
	require.Equal(t, 8, b.resumed(t), "B counted 8 resumes")
}

// processB is TestCheckpointProcessB running in another process.
type processB struct {
	addr  string
	cmd   *exec.Cmd
	in    *os.File
	lines chan string
}

// startProcessB runs this test binary's TestCheckpointProcessB on dir and
// waits for the address it serves.
func startProcessB(t *testing.T, dir string) *processB {
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe, "-test.run=^TestCheckpointProcessB$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), checkpointDirEnv+"="+dir)
	inR, inW, err := os.Pipe()
	require.NoError(t, err)
	cmd.Stdin = inR
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	_ = inR.Close()
	b := &processB{cmd: cmd, in: inW, lines: make(chan string, 16)}
	t.Cleanup(func() {
		_ = inW.Close() // (B ends at the end of its input)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
		}
	})
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			if l := sc.Text(); strings.HasPrefix(l, "B: ") {
				b.lines <- strings.TrimPrefix(l, "B: ")
			}
		}
		close(b.lines)
	}()
	l := b.next(t, "listening ")
	b.addr = l
	return b
}

// next returns the rest of B's next line that starts with prefix.
func (b *processB) next(t *testing.T, prefix string) string {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-b.lines:
			require.True(t, ok, "process B ended before saying %q", prefix)
			if strings.HasPrefix(l, prefix) {
				return strings.TrimPrefix(l, prefix)
			}
		case <-timeout:
			t.Fatalf("process B did not say %q within 30 s", prefix)
		}
	}
}

// still asks B to stop its movers and returns its state once still.
func (b *processB) still(t *testing.T) replicationtest.State {
	_, err := fmt.Fprintln(b.in, "still")
	require.NoError(t, err)
	var s replicationtest.State
	require.NoError(t, json.Unmarshal([]byte(b.next(t, "state ")), &s))
	return s
}

// resumed asks B how many seats resumed there.
func (b *processB) resumed(t *testing.T) int {
	_, err := fmt.Fprintln(b.in, "stats")
	require.NoError(t, err)
	var n int
	_, err = fmt.Sscan(b.next(t, "resumed "), &n)
	require.NoError(t, err)
	return n
}

// TestCheckpointProcessB is process B of TestCheckpointAcrossProcesses (it
// skips in a plain run): it restores the checkpoint in $dir on a new QUIC
// listener, says "B: listening <address>", and serves the match at the net
// rate, moving every entity as A's game did, until its input ends. Told
// "still", it stops moving and says "B: state <JSON>" (its quantized
// state, replicationtest.State) a few ticks later; told "stats", "B:
// resumed <n>".
func TestCheckpointProcessB(t *testing.T) {
	dir := os.Getenv(checkpointDirEnv)
	if dir == "" {
		t.Skip("process B of TestCheckpointAcrossProcesses")
	}
	cert, err := quic.LoadDevCert(filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"))
	require.NoError(t, err)
	l, err := quic.Listen("127.0.0.1:0", &quic.Config{TLS: cert.ServerTLS(), Logger: harness.Quiet})
	require.NoError(t, err)
	cp, err := os.ReadFile(filepath.Join(dir, "checkpoint"))
	require.NoError(t, err)
	reg := harness.NewRegistry()
	w := ecs.NewWorld()
	srv, game, err := replication.Restore(&w, l, replication.ServerConfig{Registry: reg, NetRate: harness.NetRate, Logger: harness.Quiet, Limits: loopback.Limits}, cp)
	require.NoError(t, err)
	require.Len(t, game, 4)
	defer srv.Close()
	fmt.Printf("B: listening %s\n", l.Addr())

	cmds := make(chan string)
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			cmds <- sc.Text()
		}
		close(cmds)
	}()
	var still atomic.Bool
	stillFor := 0
	idT := ecs.ComponentID[components.Transform](&w)
	filter := ecs.All(ecs.ComponentID[components.Replicated](&w), idT)
	tk := time.NewTicker(harness.TickDt)
	defer tk.Stop()
	for {
		select {
		case c, ok := <-cmds:
			if !ok {
				return
			}
			switch c {
			case "still":
				still.Store(true)
			case "stats":
				fmt.Printf("B: resumed %d\n", srv.Stats.Resumed)
			}
			continue
		case <-tk.C:
		}
		srv.Receive()
		if !still.Load() {
			q := w.Query(filter)
			for q.Next() {
				(*components.Transform)(q.Get(idT)).Pos.X += 0.1
			}
		} else if stillFor++; stillFor == 5 {
			s, err := replicationtest.Capture(reg, &w, srv.NetID)
			require.NoError(t, err)
			b, err := json.Marshal(s)
			require.NoError(t, err)
			fmt.Printf("B: state %s\n", b)
		}
		srv.Send()
	}
}
