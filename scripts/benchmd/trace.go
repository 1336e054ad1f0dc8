package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

// traceRow is one way of replicating the physics trace: an archenet replay
// (a load test's report) or a line of the kit's colyseus.mjs / naive.mjs.
type traceRow struct {
	Label, Precision string
	Mean, P99        float64 // bytes per tick
	KBps             float64
	Fidelity         string
	Archenet         bool
	Baseline         bool // no delta coding at all
	Lossless         bool
}

// kitModes names the kit's JSON lines ("mode").
var kitModes = map[string][2]string{
	"quant":                   {"@colyseus/schema quant", "1/512 m int32, 9-bit smallest-three"},
	"quant16":                 {"@colyseus/schema quant16", "1/512 m int16, 9-bit smallest-three"},
	"float":                   {"@colyseus/schema float", "7 float32"},
	"quantized_full_snapshot": {"full snapshot, quantized (no delta)", "93 bits per entity"},
	"naive_full_snapshot":     {"full snapshot, naive (no delta)", "32 B per entity"},
}

// kitOrder is the order of the kit's rows in the table and the plot.
var kitOrder = []string{"quant16", "quant", "quantized_full_snapshot", "float", "naive_full_snapshot"}

// readKit reads the kit's JSON lines (one per mode).
func readKit(file string) (map[string]map[string]any, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]map[string]any{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "{") {
			continue
		}
		m := map[string]any{}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			return nil, fmt.Errorf("%s: %v", file, err)
		}
		if mode, ok := m["mode"].(string); ok {
			out[mode] = m
		}
	}
	return out, sc.Err()
}

// traceTable renders the physics-trace comparison: archenet's replays
// ("label=file", each a load test's -trace report) beside the kit's
// colyseus and no-delta lines, as a table and, if svgPath is set, a bar
// chart of bytes per tick.
func traceTable(w io.Writer, runs []string, kitFile, svgPath, note string) error {
	var rows []traceRow
	for _, r := range runs {
		label, file, ok := strings.Cut(r, "=")
		if !ok {
			return fmt.Errorf("-trace %q: want label=file", r)
		}
		m, err := readReport(file)
		if err != nil {
			return err
		}
		rate := f64(m, "net_rate_hz")
		if rate == 0 {
			return fmt.Errorf("%s: no net_rate_hz", file)
		}
		fid := fmt.Sprintf("error max %s mm, %s°, p99 %s mm, %s°; stale %s%%", format("pos_err_max_m", m["pos_err_max_m"]),
			format("rot_err_max_deg", m["rot_err_max_deg"]), format("pos_err_p99_m", m["pos_err_p99_m"]),
			format("rot_err_p99_deg", m["rot_err_p99_deg"]), format("", 100*f64(m, "stale_fraction")))
		if c, _ := m["converged"].(bool); !c {
			fid += "; **not converged**"
		}
		rows = append(rows, traceRow{
			Label: label, Precision: fmt.Sprintf("error bound %s mm, %s°", format("pos_bound_m", 1000*f64(m, "pos_bound_m")), format("rot_bound_deg", m["rot_bound_deg"])),
			Mean: f64(m, "down_kbytes_per_s_mean") * 1000 / rate, P99: f64(m, "bytes_per_tick_p99"),
			KBps: f64(m, "down_kbytes_per_s_mean"), Fidelity: fid, Archenet: true, Lossless: f64(m, "loss") == 0,
		})
	}
	kit, err := readKit(kitFile)
	if err != nil {
		return err
	}
	quant, ok := kit["quant"]
	if !ok {
		return fmt.Errorf("%s: no colyseus quant line", kitFile)
	}
	for _, mode := range kitOrder {
		m, ok := kit[mode]
		if !ok {
			continue
		}
		fid := "exact at its precision (decoded and checked every tick)"
		base := strings.HasSuffix(mode, "_snapshot")
		if base {
			fid = "–"
		}
		rows = append(rows, traceRow{Label: kitModes[mode][0], Precision: kitModes[mode][1],
			Mean: f64(m, "mean_bytes_per_tick"), P99: f64(m, "p99_bytes_per_tick"), KBps: f64(m, "kbytes_per_s"),
			Fidelity: fid, Baseline: base, Lossless: true})
	}
	qmean := f64(quant, "mean_bytes_per_tick")
	fmt.Fprintf(w, "| | precision | bytes per tick, mean | p99 | KB/s | × colyseus quant | fidelity |\n|---|---|---:|---:|---:|---:|---|\n")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s |\n", r.Label, r.Precision, num(round1(r.Mean)), num(r.P99),
			num(r.KBps), ratio(r.Mean, qmean), r.Fidelity)
	}
	fmt.Fprintln(w)
	if svgPath == "" {
		return nil
	}
	chart := barChart{
		Title:      "Physics trace (600 Rapier bodies, 60 Hz): bytes per tick",
		Note:       note,
		XLabel:     "bytes per tick",
		BackLegend: "p99 of ticks (lighter)",
		Legend:     [][2]string{{palette[0], "archenet"}, {palette[1], "@colyseus/schema 5.0.34"}, {palette[6], "no delta coding"}},
	}
	for _, r := range rows {
		if !r.Lossless {
			continue
		}
		col := 1
		switch {
		case r.Archenet:
			col = 0
		case r.Baseline:
			col = 6
		}
		back := r.P99
		if back <= r.Mean {
			back = 0
		}
		chart.Bars = append(chart.Bars, bar{Label: r.Label, Value: r.Mean, Back: back, Colour: col,
			ValueLabel: num(round1(r.Mean)) + " mean (" + ratio(r.Mean, qmean) + " colyseus quant)"})
	}
	chart.LabelWidthHint = 300
	return writeFile(svgPath, func(w io.Writer) error { return writeBarChart(w, chart) })
}

func round1(v float64) float64 { return float64(int64(v + 0.5)) }

func ratio(a, b float64) string {
	if b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.3g×", a/b)
}
