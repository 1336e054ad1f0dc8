package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/replication/host"
	"github.com/archenet/archenet/replication/schema"
	"github.com/archenet/archenet/transport/quic"
	"github.com/mlange-42/arche/ecs"
)

// HostingConfig is a hosting load test: Matches matches of Clients clients
// and Entities entities each, on one host (package replication/host) over
// QUIC on 127.0.0.1, in this process; the clients run in a child process.
type HostingConfig struct {
	Matches, Clients, Entities int
	Moving                     float64
	Rate                       int
	Workers                    int // ServerConfig.Workers of every match (0: 1, host.Match.Configure's)
	Duration                   time.Duration
	Settle                     time.Duration
}

func (c HostingConfig) validate() error {
	switch {
	case c.Matches < 1 || c.Matches > 256:
		return fmt.Errorf("matches %d: want 1..256", c.Matches)
	case c.Clients < 1 || c.Clients > 254:
		return fmt.Errorf("clients %d: want 1..254", c.Clients)
	case c.Entities < 0 || c.Rate < 1 || c.Rate > 1000 || c.Duration <= 0 || c.Workers < 0:
		return errors.New("entities, rate, duration or workers out of range")
	}
	return nil
}

// hostedScene is one match: entities wandering over a 1 km square, every
// client sees every entity; one net tick per frame. Receive+Send times are
// recorded while measuring.
type hostedScene struct {
	world  *ecs.World
	srv    *replication.Server
	tid    ecs.ID
	movers []ecs.Entity
	rng    *rand.Rand
	meas   *measure
}

type measure struct {
	mu      sync.Mutex
	on      bool
	server  []time.Duration // Receive + Send, every match's ticks
	byMatch map[*hostedScene][]time.Duration
}

func (g *hostedScene) Frame(time.Time) {
	t0 := time.Now()
	g.srv.Receive()
	t1 := time.Now()
	for _, e := range g.movers {
		tr := (*components.Transform)(g.world.Get(e, g.tid))
		tr.Pos.X = math.Mod(tr.Pos.X+g.rng.Float64()*0.2+1000, 1000)
		tr.Pos.Z = math.Mod(tr.Pos.Z+g.rng.Float64()*0.2+1000, 1000)
	}
	t2 := time.Now()
	g.srv.Send()
	d := t1.Sub(t0) + time.Since(t2)
	m := g.meas
	m.mu.Lock()
	if m.on {
		m.server = append(m.server, d)
		m.byMatch[g] = append(m.byMatch[g], d)
	}
	m.mu.Unlock()
}

func (g *hostedScene) Replication() *replication.Server { return g.srv }
func (g *hostedScene) Close()                           {}

func hostingRegistry() *schema.Registry {
	reg := schema.NewRegistry()
	schema.MustRegister[components.Transform](reg)
	return reg
}

// runHosting runs the hosting load test and prints its report (markdown
// with md).
func runHosting(c HostingConfig, md bool, stdout, stderr io.Writer) int {
	if err := c.validate(); err != nil {
		fmt.Fprintf(stderr, "loadtest: %v\n", err)
		return 2
	}
	rep, err := hosting(c, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "loadtest: %v\n", err)
		return 2
	}
	rep.write(stdout, md)
	if rep.Ready != c.Matches*c.Clients || rep.Closed > 0 {
		return 1
	}
	return 0
}

// hostingReport is what a hosting run measured.
type hostingReport struct {
	Cfg                              HostingConfig
	Ready, Closed                    int
	ServerMean, ServerP99, ServerMax time.Duration // per match tick, pooled
	WorstMatchP99                    time.Duration
	FrameMean, FrameP99              time.Duration // host.MatchStats, whole frames
	Ticks                            int           // measured ticks, all matches
	CPUCores                         float64       // process CPU / wall time
	CPUPerTick                       time.Duration // process CPU / measured match-ticks
	HeapPerMatch, RSSPerMatch        float64       // bytes
	DownKBps                         float64       // per client
}

func hosting(c HostingConfig, stderr io.Writer) (*hostingReport, error) {
	_ = os.Setenv("QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING", "true")
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir, err := os.MkdirTemp("", "loadtest-hosting")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	cert, err := quic.GenerateDevCert(time.Hour)
	if err != nil {
		return nil, err
	}
	if err := cert.WriteFiles(filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")); err != nil {
		return nil, err
	}
	l, err := quic.Listen("127.0.0.1:0", &quic.Config{TLS: cert.ServerTLS(), MaxPendingPerAddress: -1, NewConnectionRate: -1, Logger: quiet})
	if err != nil {
		return nil, err
	}
	h, err := host.New(l, host.Config{Logger: quiet})
	if err != nil {
		return nil, err
	}
	defer h.Close()
	heap0, rss0 := heapInUse(), rss()
	meas := &measure{byMatch: map[*hostedScene][]time.Duration{}}
	reg := hostingRegistry()
	for i := range c.Matches {
		if err := openHosted(h, reg, c, i, meas, quiet); err != nil {
			return nil, err
		}
	}
	child, err := startClients(c, l.Addr().String(), dir, stderr)
	if err != nil {
		return nil, err
	}
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	want := c.Matches * c.Clients
	deadline := time.Now().Add(60 * time.Second)
	for h.Stats().Clients < want {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("only %d of %d clients joined within 60 s", h.Stats().Clients, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(c.Settle) // (clients past their initial world)
	return measureHosting(c, h, meas, heap0, rss0)
}

func openHosted(h *host.Host, reg *schema.Registry, c HostingConfig, i int, meas *measure, log *slog.Logger) error {
	_, err := h.Open(fmt.Sprintf("m%03d", i), host.MatchConfig{FrameRate: c.Rate, Start: func(m *host.Match) (host.Game, error) {
		w := ecs.NewWorld()
		// (JoinTimeout 10 s: 256 clients joining at once on a loaded 2-core
		// machine may take longer than 2 s to ack their first snapshot.)
		cfg := replication.ServerConfig{Registry: reg, NetRate: c.Rate, Workers: c.Workers, Logger: log,
			Limits: replication.ServerLimits{MaxClientsPerAddress: -1, JoinTimeout: 10 * time.Second}}
		m.Configure(&cfg)
		srv, err := replication.NewServer(&w, m.Listener(), cfg)
		if err != nil {
			return nil, err
		}
		g := &hostedScene{world: &w, srv: srv, tid: ecs.ComponentID[components.Transform](&w), rng: rand.New(rand.NewPCG(uint64(i), 7)), meas: meas}
		idR := ecs.ComponentID[components.Replicated](&w)
		nMoving := int(math.Round(c.Moving * float64(c.Entities)))
		for k := range c.Entities {
			e := w.NewEntity(idR, g.tid)
			tr := (*components.Transform)(w.Get(e, g.tid))
			tr.Pos, tr.Rot = components.Vec3{X: g.rng.Float64() * 1000, Z: g.rng.Float64() * 1000}, components.QuatIdentity()
			if k < nMoving {
				g.movers = append(g.movers, e)
			}
		}
		return g, nil
	}})
	return err
}

// measureHosting measures c.Duration of the running host.
func measureHosting(c HostingConfig, h *host.Host, meas *measure, heap0, rss0 uint64) (*hostingReport, error) {
	bytes0 := downBytes(h)
	cpu0, wall0 := cpuTime(), time.Now()
	meas.mu.Lock()
	meas.on = true
	meas.mu.Unlock()
	time.Sleep(c.Duration) // (the measurement window)
	meas.mu.Lock()
	meas.on = false
	meas.mu.Unlock()
	wall, cpu := time.Since(wall0), cpuTime()-cpu0
	st := h.Stats()
	rep := &hostingReport{Cfg: c, Ready: st.Clients, Ticks: len(meas.server)}
	rep.Closed = c.Matches*c.Clients - st.Clients
	rep.ServerMean, rep.ServerP99, rep.ServerMax = figures(meas.server)
	for _, ds := range meas.byMatch {
		_, p, _ := figures(ds)
		rep.WorstMatchP99 = max(rep.WorstMatchP99, p)
	}
	var fm, fp time.Duration
	for _, m := range st.Matches {
		fm += m.FrameMean
		fp = max(fp, m.FrameP99)
	}
	rep.FrameMean, rep.FrameP99 = fm/time.Duration(max(len(st.Matches), 1)), fp
	rep.CPUCores = cpu.Seconds() / wall.Seconds()
	rep.CPUPerTick = cpu / time.Duration(max(rep.Ticks, 1))
	rep.HeapPerMatch = float64(heapInUse()-min(heap0, heapInUse())) / float64(c.Matches)
	rep.RSSPerMatch = float64(rss()-min(rss0, rss())) / float64(c.Matches)
	rep.DownKBps = float64(downBytes(h)-bytes0) / 1000 / wall.Seconds() / float64(c.Matches*c.Clients)
	return rep, nil
}

func figures(ds []time.Duration) (mean, p99, worst time.Duration) {
	if len(ds) == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return sum / time.Duration(len(s)), s[(len(s)*99+99)/100-1], s[len(s)-1]
}

// downBytes sums the snapshot and spawn bytes the matches' servers sent
// (read through the host's stats: each server's own counters are its
// goroutine's).
func downBytes(h *host.Host) uint64 {
	var n uint64
	for _, m := range h.Matches() {
		n += m.Stats().BytesDown
	}
	return n
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// rss is the process's resident set (Linux; 0 elsewhere).
func rss() uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseUint(f[1], 10, 64)
	return pages * uint64(os.Getpagesize())
}

// due is how many match-ticks were due while measuring.
func (r *hostingReport) due() int {
	return int(r.Cfg.Duration.Seconds() * float64(r.Cfg.Rate*r.Cfg.Matches))
}

func (r *hostingReport) write(w io.Writer, md bool) {
	c := r.Cfg
	msf := func(d time.Duration) string { return fmt.Sprintf("%.3f", float64(d.Nanoseconds())/1e6) }
	workers := "1 (host.Match.Configure)"
	if c.Workers > 0 {
		workers = strconv.Itoa(c.Workers)
	}
	if md {
		fmt.Fprintf(w, "| matches × clients × entities | workers/match | clients joined | server ms/tick mean | p99 | worst | worst match p99 | frame ms mean / p99 (worst match) | process CPU (cores) | match-ticks run of due | CPU ms per match-tick run | heap per match | RSS per match | KB/s per client |\n")
		fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		fmt.Fprintf(w, "| %d × %d × %d at %d Hz | %s | %d of %d | %s | %s | %s | %s | %s / %s | %.2f | %d of %d | %s | %.1f MB | %.1f MB | %.1f |\n",
			c.Matches, c.Clients, c.Entities, c.Rate, workers, r.Ready, c.Matches*c.Clients, msf(r.ServerMean), msf(r.ServerP99), msf(r.ServerMax),
			msf(r.WorstMatchP99), msf(r.FrameMean), msf(r.FrameP99), r.CPUCores, r.Ticks, r.due(), msf(r.CPUPerTick),
			r.HeapPerMatch/1e6, r.RSSPerMatch/1e6, r.DownKBps)
		return
	}
	fmt.Fprintf(w, "hosting: %d matches × %d clients × %d entities at %d Hz, workers per match %s, measured %v\n", c.Matches, c.Clients, c.Entities, c.Rate, workers, c.Duration)
	fmt.Fprintf(w, "clients joined:       %d of %d\n", r.Ready, c.Matches*c.Clients)
	fmt.Fprintf(w, "server time per tick: mean %s ms, p99 %s ms, worst %s ms (Receive+Send, %d match-ticks); worst match's p99 %s ms\n",
		msf(r.ServerMean), msf(r.ServerP99), msf(r.ServerMax), r.Ticks, msf(r.WorstMatchP99))
	fmt.Fprintf(w, "frame time:           mean %s ms, worst match's p99 %s ms (host.MatchStats)\n", msf(r.FrameMean), msf(r.FrameP99))
	fmt.Fprintf(w, "process CPU:          %.2f cores (%s ms per match-tick run; %d of %d due ran)\n", r.CPUCores, msf(r.CPUPerTick), r.Ticks, r.due())
	fmt.Fprintf(w, "memory per match:     heap %.1f MB, RSS %.1f MB\n", r.HeapPerMatch/1e6, r.RSSPerMatch/1e6)
	fmt.Fprintf(w, "downstream:           %.1f KB/s per client\n", r.DownKBps)
}

// startClients runs the clients in a child process (this binary with
// -hosting-clients), so that the server process's CPU and memory are its
// own.
func startClients(c HostingConfig, addr, dir string, stderr io.Writer) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, "-hosting-clients", addr, "-cert-dir", dir, "-matches", strconv.Itoa(c.Matches),
		"-clients", strconv.Itoa(c.Clients), "-rate", strconv.Itoa(c.Rate))
	cmd.Stderr = stderr
	// The child ends when this pipe closes (with this process).
	if _, err := cmd.StdinPipe(); err != nil {
		return nil, err
	}
	return cmd, cmd.Start()
}

// runHostingClients is the child: Matches × Clients clients of the host at
// addr, stepped at the net rate until the parent kills it.
func runHostingClients(addr, dir string, matches, clients, rate int, stderr io.Writer) int {
	_ = os.Setenv("QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING", "true")
	cert, err := quic.LoadDevCert(filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"))
	if err != nil {
		fmt.Fprintln(stderr, "loadtest clients:", err)
		return 2
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := hostingRegistry()
	// One stepping goroutine per core, each with its share of the clients,
	// stepping them from the moment they are dialled (a welcomed client
	// that acks nothing for 2 s is dropped: ServerConfig.Limits.JoinTimeout).
	n := runtime.GOMAXPROCS(0)
	shares := make([][]*replication.Client, n)
	var mu sync.Mutex
	for k := range n {
		go func() {
			t := time.NewTicker(time.Second / time.Duration(rate))
			for range t.C {
				mu.Lock()
				mine := shares[k]
				mu.Unlock()
				for _, c := range mine {
					c.Receive()
					c.Send()
				}
			}
		}()
	}
	for i := range matches * clients {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		conn, err := quic.Dial(ctx, addr, &quic.Config{TLS: cert.ClientTLS(), Logger: quiet})
		cancel()
		if err != nil {
			fmt.Fprintln(stderr, "loadtest clients:", err)
			return 2
		}
		w := ecs.NewWorld()
		c, err := replication.NewClient(&w, conn, replication.ClientConfig{Registry: reg, Match: fmt.Sprintf("m%03d", i/clients), Logger: quiet})
		if err != nil {
			fmt.Fprintln(stderr, "loadtest clients:", err)
			return 2
		}
		mu.Lock()
		shares[i%n] = append(shares[i%n], c)
		mu.Unlock()
	}
	// The parent kills this process; stdin closing ends it too.
	_, _ = bufio.NewReader(os.Stdin).ReadByte()
	return 0
}
