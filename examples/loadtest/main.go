package main

import (
	"compress/gzip"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"
)

//go:generate go run . -gen-trace testdata/falling.trace.gz

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main with its exit code: 0 converged, 1 not converged, 2 error.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		cfg     Config
		asJSON  = fs.Bool("json", false, "print the report as one JSON object on the last line")
		trace   = fs.String("trace", "", "replay a transform trace (CSV, optionally .gz) instead of the synthetic scene")
		genPath = fs.String("gen-trace", "", "write the generated trace of -scene to `FILE` (gzip if it ends in .gz) and exit")
		sceneN  = fs.String("scene", "", "replay a generated trace instead of the synthetic scene: "+sceneNames())
		cpuProf = fs.String("cpuprofile", "", "write a CPU profile of the run to `FILE`; server work carries the label side=server")
		verbose = fs.Bool("v", false, "log replication events to stderr")
		quiet   = fs.Bool("q", false, "no progress lines")
	)
	fs.StringVar(&cfg.Transport, "transport", "sim", "sim (in-memory network, simulated time) or quic (127.0.0.1, real time)")
	fs.IntVar(&cfg.Clients, "clients", 64, "clients (1..254; with -trace: 1)")
	fs.IntVar(&cfg.Entities, "entities", 2000, "scene entities, besides one avatar per client")
	fs.Float64Var(&cfg.Moving, "moving", 0.25, "fraction of scene entities moving every tick")
	fs.BoolVar(&cfg.OwnerFields, "owner-fields", false, "each avatar carries a component only its owner gets (owner-only fields, changing every tick: a player's ammunition)")
	fs.Float64Var(&cfg.World, "world", 1024, "side of the square world in metres")
	fs.Float64Var(&cfg.Interest, "interest", 150, "interest radius in metres around each client's avatar; 0 = everything (with -trace: 0)")
	fs.IntVar(&cfg.Ticks, "ticks", 900, "measured net ticks (with -trace: the whole trace)")
	fs.IntVar(&cfg.Rate, "rate", 30, "net ticks per second (with -trace: the trace's rate)")
	fs.Float64Var(&cfg.Loss, "loss", 0, "sim: loss probability per direction (datagrams; reliable messages are retransmitted)")
	fs.DurationVar(&cfg.Latency, "latency", 0, "sim: one-way latency")
	fs.DurationVar(&cfg.Jitter, "jitter", 0, "sim: one-way jitter (uniform)")
	fs.Int64Var(&cfg.Seed, "seed", 1, "random seed (scene and simulated network)")
	fs.IntVar(&cfg.Settle, "settle", 0, "ticks without loss and movement before the convergence check (0: 30 + four one-way delays)")
	fs.Float64Var(&cfg.PosStep, "pos-step", 0, "replicated position step in metres (0: the Transform's 1 mm), e.g. 0.001953125 for 1/512 m")
	fs.IntVar(&cfg.QuatBits, "quat-bits", 0, "replicated quaternion bits per component (0: the Transform's 10)")
	fs.IntVar(&cfg.Workers, "workers", 0, "goroutines building the clients' datagrams (ServerConfig.Workers; 0: GOMAXPROCS)")
	compare := fs.String("workers-compare", "", "run twice with A and B workers (e.g. 1,2) and print both server times and their ratio")
	fs.IntVar(&cfg.MaxBytesPerSecond, "max-rate", 0, "cap of every client's snapshot budget in bytes per second (0: the server's default, 512 KiB/s)")
	fs.IntVar(&cfg.FidelityClients, "fidelity-clients", 0, "clients whose mirrors are checked against the server every tick (0: up to 8)")
	var (
		hc           HostingConfig
		hostingChild = fs.String("hosting-clients", "", "internal: run the clients of a -matches run against this address")
		certDir      = fs.String("cert-dir", "", "internal: the -hosting-clients' certificate directory")
		markdown     = fs.Bool("md", false, "-matches: print the report as a markdown table row")
	)
	fs.IntVar(&hc.Matches, "matches", 0, "run a hosting load test: this many matches on one host (replication/host) over QUIC, -clients clients (in a child process) and -entities entities each, at -rate, for -duration")
	fs.DurationVar(&hc.Duration, "duration", 10*time.Second, "-matches: the measured time")
	var cc CostConfig
	fs.StringVar(&cc.Kind, "cost", "", "run a cost scenario over the simulated network: join (a client joins a board of dormant tiles) or stall (a client's link goes down for -stall while -changes tiles change); prints the bytes it took")
	fs.IntVar(&cc.Side, "side", 64, "-cost: the board is side × side dormant tiles")
	fs.DurationVar(&cc.Stall, "stall", 5*time.Second, "-cost stall: how long the link is down")
	fs.IntVar(&cc.Changes, "changes", 200, "-cost stall: tile changes during the stall")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: loadtest [flags]\n\nRuns an archenet server and many clients in one process and reports bandwidth, server time and convergence.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "loadtest: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if cc.Kind != "" {
		cc.Rate, cc.Latency, cc.Seed = cfg.Rate, cfg.Latency, cfg.Seed
		if !set["latency"] {
			cc.Latency = 20 * time.Millisecond
		}
		return runCost(cc, stdout, stderr)
	}
	if *hostingChild != "" {
		return runHostingClients(*hostingChild, *certDir, hc.Matches, cfg.Clients, cfg.Rate, stderr)
	}
	if *cpuProf != "" {
		f, err := os.Create(*cpuProf)
		if err != nil {
			fmt.Fprintf(stderr, "loadtest: %v\n", err)
			return 2
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(stderr, "loadtest: %v\n", err)
			return 2
		}
		defer pprof.StopCPUProfile()
		cfg.LabelServer = true
	}
	if hc.Matches > 0 {
		hc.Clients, hc.Entities, hc.Moving, hc.Rate, hc.Workers = cfg.Clients, cfg.Entities, cfg.Moving, cfg.Rate, cfg.Workers
		if !set["clients"] {
			hc.Clients = 8
		}
		if !set["entities"] {
			hc.Entities = 500
		}
		hc.Settle = 2 * time.Second
		return runHosting(hc, *markdown, stdout, stderr)
	}

	if *genPath != "" {
		name := *sceneN
		if name == "" {
			name = "falling"
		}
		gen, ok := scenes[name]
		if !ok {
			fmt.Fprintf(stderr, "loadtest: unknown scene %q: %s\n", name, sceneNames())
			return 2
		}
		if err := writeTraceFile(*genPath, gen(uint64(cfg.Seed))); err != nil {
			fmt.Fprintf(stderr, "loadtest: %v\n", err)
			return 2
		}
		return 0
	}
	if *trace != "" || *sceneN != "" {
		if set["rate"] {
			fmt.Fprintln(stderr, "loadtest: -rate cannot be used with -trace or -scene (the trace's rate is used)")
			return 2
		}
		if *trace != "" && *sceneN != "" {
			fmt.Fprintln(stderr, "loadtest: -trace and -scene exclude each other")
			return 2
		}
		var t *Trace
		name := *trace
		if *sceneN != "" {
			gen, ok := scenes[*sceneN]
			if !ok {
				fmt.Fprintf(stderr, "loadtest: unknown scene %q: %s\n", *sceneN, sceneNames())
				return 2
			}
			t, name = gen(uint64(cfg.Seed)), "scene "+*sceneN
		} else {
			var err error
			if t, err = readTraceFile(*trace); err != nil {
				fmt.Fprintf(stderr, "loadtest: %v\n", err)
				return 2
			}
		}
		cfg.Trace, cfg.TraceName, cfg.Rate = t, name, t.Rate
		if !set["clients"] {
			cfg.Clients = 1
		}
		if !set["interest"] {
			cfg.Interest = 0
		}
	}
	if !*quiet {
		cfg.Progress = stderr
	}
	if *verbose {
		cfg.Logger = slog.New(slog.NewTextHandler(stderr, nil))
	}

	if *compare != "" {
		return runCompare(cfg, *compare, stdout, stderr)
	}
	rep, err := Run(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "loadtest: %v\n", err)
		return 2
	}
	rep.WriteText(stdout)
	if *asJSON {
		b, err := json.Marshal(rep)
		if err != nil {
			fmt.Fprintf(stderr, "loadtest: %v\n", err)
			return 2
		}
		fmt.Fprintf(stdout, "%s\n", b)
	}
	if !rep.Converged {
		return 1
	}
	return 0
}

func readTraceFile(path string) (*Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	t, err := ParseTrace(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

func writeTraceFile(path string, t *Trace) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	if !strings.HasSuffix(path, ".gz") {
		return WriteTrace(f, t)
	}
	zw, err := gzip.NewWriterLevel(f, gzip.BestCompression)
	if err != nil {
		return err
	}
	zw.ModTime = time.Time{} // reproducible bytes
	if err := WriteTrace(zw, t); err != nil {
		return err
	}
	return zw.Close()
}

// runCompare runs cfg once per worker count of list ("A,B") and prints the
// server's wall and CPU time per tick of each, and the ratio of the walls.
func runCompare(cfg Config, list string, stdout, stderr io.Writer) int {
	var counts []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			fmt.Fprintf(stderr, "loadtest: -workers-compare %q: want worker counts like 1,2\n", list)
			return 2
		}
		counts = append(counts, n)
	}
	var reps []*Report
	status := 0
	for _, n := range counts {
		cfg.Workers = n
		rep, err := Run(cfg)
		if err != nil {
			fmt.Fprintf(stderr, "loadtest: %v\n", err)
			return 2
		}
		if !rep.Converged {
			status = 1
		}
		reps = append(reps, rep)
	}
	for _, rep := range reps {
		fmt.Fprintf(stdout, "%-10s server %.3f ms/tick wall (p99 %.3f, worst %.3f), %.3f ms/tick CPU; %.2f KB/s per client; stale %.4f%%; converged %v\n",
			workersText(rep.Workers)+":", rep.ServerMsMean, rep.ServerMsP99, rep.ServerMsMax, rep.ServerCPUMsMean, rep.DownKBpsMean, 100*rep.StaleFraction, rep.Converged)
	}
	if len(reps) == 2 && reps[0].ServerMsMean > 0 {
		fmt.Fprintf(stdout, "wall time ratio %s / %s: %.2f\n", workersText(reps[1].Workers), workersText(reps[0].Workers), reps[1].ServerMsMean/reps[0].ServerMsMean)
	}
	return status
}
