// Command benchmd turns `go test -bench` output and examples/loadtest -json
// lines into the markdown tables and SVG plots of BENCHMARKS.md.
// scripts/benchmarks.sh runs it; it is not meant to be run by hand. Each
// flag prints its section's markdown to stdout, in this order:
//
//	benchmd -load "name=file" [-load ...]          the load-test table
//	benchmd -sweep "clients=file" [...] -sweep-svg F  server time against clients
//	benchmd -trace "label=file" [...] -kit FILE -trace-svg F  the physics trace against @colyseus/schema
//	benchmd -keys bench.txt                        the key package benchmarks (fails if one is missing)
//	benchmd -bench bench.txt                       every package benchmark
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

type loads []string

func (l *loads) String() string     { return strings.Join(*l, ",") }
func (l *loads) Set(s string) error { *l = append(*l, s); return nil }

func main() {
	bench := flag.String("bench", "", "go test -bench output: every benchmark")
	keys := flag.String("keys", "", "go test -bench output: the key benchmarks")
	var runs, sweep, traces loads
	flag.Var(&runs, "load", "name=file: a load test's output (its last line is the JSON report); repeatable")
	flag.Var(&sweep, "sweep", "clients=file: a load test's output, one of the client sweep; repeatable")
	sweepSVG := flag.String("sweep-svg", "", "write the client sweep's plot to this SVG file")
	flag.Var(&traces, "trace", "label=file: a load test's -trace output on the physics trace; repeatable")
	kit := flag.String("kit", "", "the physics-trace kit's JSON lines (colyseus.mjs, naive.mjs)")
	traceSVG := flag.String("trace-svg", "", "write the physics-trace plot to this SVG file")
	note := flag.String("plot-note", "", "a line under each plot's title: when and where it was measured")
	flag.Parse()
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	fail := func(err error) {
		if err != nil {
			w.Flush()
			fmt.Fprintln(os.Stderr, "benchmd:", err)
			os.Exit(1)
		}
	}
	if len(runs) > 0 {
		fail(loadTable(w, runs))
	}
	if len(sweep) > 0 {
		fail(sweepTable(w, sweep, *sweepSVG, *note))
	}
	if len(traces) > 0 {
		fail(traceTable(w, traces, *kit, *traceSVG, *note))
	}
	for _, f := range []struct {
		file  string
		table func(io.Writer, io.Reader) error
	}{{*keys, keyTable}, {*bench, benchTable}} {
		if f.file == "" {
			continue
		}
		r, err := os.Open(f.file)
		fail(err)
		fail(f.table(w, r))
		r.Close()
	}
}

// rows of the load-test table: JSON key, label.
var rows = [][2]string{
	{"transport", "transport"},
	{"clients", "clients"},
	{"entities", "entities (+ one avatar per client)"},
	{"moving_fraction", "moving fraction"},
	{"interest_radius_m", "interest radius (m, 0 = all)"},
	{"net_rate_hz", "net rate (Hz)"},
	{"ticks", "measured net ticks"},
	{"loss", "loss per direction"},
	{"latency_ms", "one-way latency (ms)"},
	{"jitter_ms", "jitter (ms)"},
	{"mirrors_per_client_mean", "mirrors per client"},
	{"down_kbytes_per_s_mean", "**downstream KB/s per client, mean**"},
	{"down_kbytes_per_s_p99", "downstream KB/s per client, p99 (1 s windows)"},
	{"up_kbytes_per_s_mean", "upstream KB/s per client, mean"},
	{"server_ms_per_tick_mean", "**server ms per net tick, mean** (Receive + Send)"},
	{"server_ms_per_tick_p99", "server ms per net tick, p99"},
	{"snapshot_build_ms_per_tick_mean", "snapshot build ms per tick, mean"},
	{"client_build_ms_per_tick_mean", "per-client packets ms per tick, mean"},
	{"client_build_us_per_client_mean", "per-client packets µs per client"},
	{"snapshot_ns_per_entity", "snapshot build ns per entity"},
	{"bytes_per_entity_update", "bytes per entity update"},
	{"entity_updates_per_client_per_tick", "entity updates per client per tick"},
	{"spawns_sent", "spawns sent / applied"},
	{"despawns_sent", "despawns sent / applied"},
	{"heap_mbytes", "heap in use (MB, whole process)"},
	{"wall_seconds", "wall time (s)"},
	{"down_kbit_per_s", "trace: kbit/s per client"},
	{"pos_err_mean_m", "trace: position error mean (mm, per axis)"},
	{"pos_err_max_m", "trace: position error max (mm, per axis)"},
	{"rot_err_max_deg", "trace: rotation error max (°)"},
	{"settled_pos_err_max_m", "trace: settled position error max (mm)"},
	{"settled_rot_err_max_deg", "trace: settled rotation error max (°)"},
	{"converged", "**converged**"},
}

func loadTable(w io.Writer, runs []string) error {
	var names []string
	var reports []map[string]any
	var raw []string
	for _, r := range runs {
		name, file, ok := strings.Cut(r, "=")
		if !ok {
			return fmt.Errorf("-load %q: want name=file", r)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		last := lines[len(lines)-1]
		m := map[string]any{}
		if err := json.Unmarshal([]byte(last), &m); err != nil {
			m = map[string]any{"error": strings.TrimSpace(string(b))}
			last = "(no JSON report: " + strings.TrimSpace(string(b)) + ")"
		}
		names, reports, raw = append(names, name), append(reports, m), append(raw, last)
	}
	fmt.Fprintf(w, "| | %s |\n|---|%s\n", strings.Join(names, " | "), strings.Repeat("---|", len(names)))
	for _, row := range rows {
		key, label := row[0], row[1]
		any := false
		cells := make([]string, len(reports))
		for i, m := range reports {
			v, ok := m[key]
			if !ok {
				cells[i] = "–"
				continue
			}
			any = true
			cells[i] = format(key, v)
			switch key {
			case "spawns_sent":
				cells[i] += " / " + format(key, m["spawns_applied"])
			case "despawns_sent":
				cells[i] += " / " + format(key, m["despawns_applied"])
			}
		}
		if any {
			fmt.Fprintf(w, "| %s | %s |\n", label, strings.Join(cells, " | "))
		}
	}
	fmt.Fprintf(w, "\n<details><summary>JSON reports</summary>\n\n")
	for i, r := range raw {
		fmt.Fprintf(w, "%s:\n\n```json\n%s\n```\n\n", names[i], r)
	}
	fmt.Fprintf(w, "</details>\n\n")
	return nil
}

func format(key string, v any) string {
	switch x := v.(type) {
	case float64:
		if strings.HasSuffix(key, "_m") && strings.Contains(key, "err") {
			x *= 1000 // metres → mm
		}
		switch {
		case x == float64(int64(x)) && !strings.Contains(key, "err"):
			return strconv.FormatInt(int64(x), 10)
		case x >= 100:
			return strconv.FormatFloat(x, 'f', 0, 64)
		case x >= 1:
			return strconv.FormatFloat(x, 'f', 2, 64)
		default:
			return strconv.FormatFloat(x, 'f', 3, 64)
		}
	case bool:
		if x {
			return "yes"
		}
		return "**NO**"
	case nil:
		return "–"
	}
	return fmt.Sprint(v)
}

// benchTable renders benchmark lines grouped by package.
func benchTable(w io.Writer, r io.Reader) error {
	fmt.Fprintf(w, "| package | benchmark | ns/op | B/op | allocs/op | other |\n|---|---|---:|---:|---:|---|\n")
	sc := bufio.NewScanner(r)
	pkg := ""
	for sc.Scan() {
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = strings.TrimPrefix(p, "github.com/archenet/archenet/")
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name := f[0]
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			name = name[:i]
		}
		var ns, bop, allocs string
		var other []string
		for i := 2; i+1 < len(f); i += 2 {
			switch f[i+1] {
			case "ns/op":
				ns = f[i]
			case "B/op":
				bop = f[i]
			case "allocs/op":
				allocs = f[i]
			default:
				other = append(other, f[i]+" "+f[i+1])
			}
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", pkg, strings.TrimPrefix(name, "Benchmark"), ns, bop, allocs, strings.Join(other, ", "))
	}
	return sc.Err()
}
