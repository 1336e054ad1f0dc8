package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
)

// readReport returns the JSON report on the last line of a load test's
// output.
func readReport(file string) (map[string]any, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	m := map[string]any{}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &m); err != nil {
		return nil, fmt.Errorf("%s: no JSON report: %s", file, strings.TrimSpace(string(b)))
	}
	return m, nil
}

func f64(m map[string]any, key string) float64 {
	v, _ := m[key].(float64)
	return v
}

// sweepPoint is one number of clients of the sweep: the run of median
// server time among its runs.
type sweepPoint struct {
	Clients, Runs int
	Report        map[string]any
}

// readSweep reads "N=file" pairs (several files for one N are rounds of
// it: the median run by mean server time stands for them), sorted by N.
func readSweep(runs []string) ([]sweepPoint, error) {
	byN := map[int][]map[string]any{}
	for _, r := range runs {
		n, file, ok := strings.Cut(r, "=")
		if !ok {
			return nil, fmt.Errorf("-sweep %q: want clients=file", r)
		}
		c, err := strconv.Atoi(n)
		if err != nil {
			return nil, fmt.Errorf("-sweep %q: %v", r, err)
		}
		m, err := readReport(file)
		if err != nil {
			return nil, err
		}
		byN[c] = append(byN[c], m)
	}
	var pts []sweepPoint
	for c, ms := range byN {
		sort.Slice(ms, func(i, j int) bool {
			return f64(ms[i], "server_ms_per_tick_mean") < f64(ms[j], "server_ms_per_tick_mean")
		})
		pts = append(pts, sweepPoint{c, len(ms), ms[(len(ms)-1)/2]})
	}
	sort.Slice(pts, func(i, j int) bool { return pts[i].Clients < pts[j].Clients })
	return pts, nil
}

// sweepTable renders the client sweep as a table and, if svgPath is set,
// a plot of server time per net tick against the number of clients.
func sweepTable(w io.Writer, runs []string, svgPath, note string) error {
	pts, err := readSweep(runs)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "| clients | runs | server ms/tick, mean | p99 | frame ms, mean | per-client phase ms, mean | µs per client | CPU ms/tick | KB/s down per client | server state KB per client | converged |\n")
	fmt.Fprintf(w, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, p := range pts {
		m := p.Report
		fmt.Fprintf(w, "| %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", p.Clients, p.Runs,
			format("", m["server_ms_per_tick_mean"]), format("", m["server_ms_per_tick_p99"]),
			format("", m["snapshot_build_ms_per_tick_mean"]), format("", m["client_build_ms_per_tick_mean"]),
			format("", m["client_build_us_per_client_mean"]), format("", m["server_cpu_ms_per_tick_mean"]),
			format("", m["down_kbytes_per_s_mean"]), format("", m["server_state_kbytes_per_client_mean"]),
			format("", m["converged"]))
	}
	fmt.Fprintln(w)
	if svgPath == "" {
		return nil
	}
	chart := lineChart{
		Title:  "Server time per net tick against clients (2,000 entities, 30 Hz)",
		Note:   note,
		XLabel: "clients",
		YLabel: "ms per net tick",
	}
	lines := []struct{ key, name string }{
		{"server_ms_per_tick_p99", "p99"},
		{"server_ms_per_tick_mean", "mean"},
		{"client_build_ms_per_tick_mean", "per-client phase, mean"},
		{"snapshot_build_ms_per_tick_mean", "frame, mean"},
	}
	for i, l := range lines {
		s := series{Name: l.name, Dashed: i >= 2}
		for _, p := range pts {
			s.X = append(s.X, float64(p.Clients))
			s.Y = append(s.Y, f64(p.Report, l.key))
		}
		chart.Series = append(chart.Series, s)
	}
	for _, p := range pts {
		chart.XTicks = append(chart.XTicks, float64(p.Clients))
	}
	return writeFile(svgPath, func(w io.Writer) error { return writeLineChart(w, chart) })
}

func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
