// Package agonestest starts the real Agones SDK sidecar (local mode) for
// tests: on free ports, with its log counted, stopped at the test's end.
//
// The sidecar binary is $ARCHENET_AGONES_SDK, else ../shared/agones/sdk-server
// beside the module's root (or its .gz, unpacked into the test's temporary
// directory). [Start] skips the test, saying so, when there is none.
package agonestest

import (
	"bufio"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Sidecar is a running sdk-server.
type Sidecar struct {
	// URL is its REST address (http://127.0.0.1:port).
	URL string
	cmd *exec.Cmd

	mu    sync.Mutex
	lines []string
}

// Binary returns the sidecar's path, or "" and why not.
func Binary() (string, string) {
	if p := os.Getenv("ARCHENET_AGONES_SDK"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Sprintf("ARCHENET_AGONES_SDK=%s: %v", p, err)
		}
		return p, ""
	}
	root, err := moduleRoot()
	if err != nil {
		return "", err.Error()
	}
	p := filepath.Join(filepath.Dir(root), "shared", "agones", "sdk-server")
	if st, err := os.Stat(p); err == nil && st.Mode()&0o111 != 0 {
		return p, ""
	}
	if _, err := os.Stat(p + ".gz"); err == nil {
		return p + ".gz", ""
	}
	return "", "no Agones sidecar: set ARCHENET_AGONES_SDK or put it at " + p
}

// moduleRoot is the directory of the go.mod above the working directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = up
	}
}

// Start runs the sidecar with PlayerTracking on, its GameServer described
// by yaml (empty: the sidecar's default, state Ready), and waits until it
// answers. It skips t when there is no sidecar binary.
func Start(t testing.TB, yaml string) *Sidecar {
	t.Helper()
	bin, why := Binary()
	if bin == "" {
		t.Skip("SKIP (Agones): " + why)
	}
	if strings.HasSuffix(bin, ".gz") {
		bin = unpack(t, bin)
	}
	args := []string{"--local", "--address=127.0.0.1", "--feature-gates=PlayerTracking=true"}
	if yaml != "" {
		f := filepath.Join(t.TempDir(), "gameserver.yaml")
		if err := os.WriteFile(f, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "-f", f)
	}
	var last error
	for range 3 { // (a free port may be taken before the sidecar binds it)
		s, err := start(t, bin, args)
		if err == nil {
			return s
		}
		last = err
	}
	t.Fatalf("agones sidecar did not start: %v", last)
	return nil
}

func start(t testing.TB, bin string, args []string) (*Sidecar, error) {
	httpPort, grpcPort := freePort(t), freePort(t)
	args = append(args, "--http-port="+strconv.Itoa(httpPort), "--grpc-port="+strconv.Itoa(grpcPort))
	cmd := exec.Command(bin, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &Sidecar{URL: "http://127.0.0.1:" + strconv.Itoa(httpPort), cmd: cmd}
	go s.read(out)
	stop := func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/gameserver", nil)
		resp, err := http.DefaultClient.Do(req)
		cancel()
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Cleanup(stop)
				return s, nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	return nil, fmt.Errorf("no answer on %s within 10 s; its log:\n%s", s.URL, strings.Join(s.Lines(), "\n"))
}

func (s *Sidecar) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		s.mu.Lock()
		s.lines = append(s.lines, sc.Text())
		s.mu.Unlock()
	}
}

// Lines returns what the sidecar logged so far.
func (s *Sidecar) Lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.lines...)
}

// Count returns how many log lines so far contain text (e.g. "Health Ping
// Received!").
func (s *Sidecar) Count(text string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, l := range s.lines {
		if strings.Contains(l, text) {
			n++
		}
	}
	return n
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// unpack gunzips the sidecar into the test's temporary directory.
func unpack(t testing.TB, gz string) string {
	f, err := os.Open(gz)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "sdk-server")
	out, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o700)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, zr); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}
