// Command loadcompare times examples/loadtest at several git revisions in
// interleaved runs and prints the medians. The 2-core VMs this project is
// developed on drift between fast and slow phases (the same binary swings
// 20–40 %), so only runs that take turns compare; single runs of two builds
// do not.
//
//	go run ./scripts/loadcompare [-rounds 6] REV... -- LOADTEST FLAGS
//	go run ./scripts/loadcompare -rounds 8 HEAD~1 . -- -clients 254 -entities 2000 -ticks 300 -workers 2
//
// Each revision is built in a temporary git worktree; "." is the working
// tree as it is. Rounds alternate the order of the revisions. Besides the
// times it checks that every revision sent the same snapshot bytes (a
// change meant to be a pure speed-up must not change them).
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
)

// fields are the load test's JSON report fields compared, in print order.
var fields = []struct{ key, name string }{
	{"server_ms_per_tick_mean", "wall ms"},
	{"server_cpu_ms_per_tick_mean", "CPU ms"},
	{"receive_ms_per_tick_mean", "receive"},
	{"snapshot_build_ms_per_tick_mean", "frame"},
	{"client_build_ms_per_tick_mean", "clients"},
}

func main() {
	rounds := flag.Int("rounds", 6, "runs of each revision, taken in turns")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: loadcompare [-rounds n] REV... -- LOADTEST FLAGS")
		flag.PrintDefaults()
	}
	flag.Parse()
	revs, args := splitArgs(flag.Args())
	if len(revs) == 0 || *rounds < 1 {
		flag.Usage()
		os.Exit(2)
	}
	tmp, err := os.MkdirTemp("", "loadcompare")
	check(err)
	defer os.RemoveAll(tmp)
	bins := make([]string, len(revs))
	for i, rev := range revs {
		bins[i] = filepath.Join(tmp, fmt.Sprintf("loadtest%d", i))
		check(build(rev, bins[i], tmp))
	}
	runs := make([][]map[string]any, len(revs))
	for r := range *rounds {
		for k := range revs {
			i := k
			if r%2 == 1 { // (alternate the order: a drift favours neither)
				i = len(revs) - 1 - k
			}
			rep, err := run(bins[i], args)
			check(err)
			runs[i] = append(runs[i], rep)
			fmt.Fprintf(os.Stderr, "loadcompare: round %d/%d %s: %.3f ms\n", r+1, *rounds, revs[i], num(rep, fields[0].key))
		}
	}
	report(os.Stdout, revs, runs)
}

// splitArgs splits the arguments at "--" into revisions and load test flags.
func splitArgs(a []string) (revs, flags []string) {
	if i := slices.Index(a, "--"); i >= 0 {
		return a[:i], a[i+1:]
	}
	return a, nil
}

// build builds examples/loadtest at rev into bin ("." the working tree).
func build(rev, bin, tmp string) error {
	dir := "."
	if rev != "." {
		dir = filepath.Join(tmp, "wt")
		if out, err := exec.Command("git", "worktree", "add", "--detach", "-f", dir, rev).CombinedOutput(); err != nil {
			return fmt.Errorf("git worktree add %s: %v: %s", rev, err, out)
		}
		defer exec.Command("git", "worktree", "remove", "--force", dir).Run()
	}
	cmd := exec.Command("go", "build", "-o", bin, "./examples/loadtest")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s: %v: %s", rev, err, out)
	}
	return nil
}

// run runs the load test once and returns its JSON report.
func run(bin string, args []string) (map[string]any, error) {
	out, err := exec.Command(bin, append([]string{"-q", "-json"}, args...)...).Output()
	if err != nil {
		return nil, fmt.Errorf("%s: %v", bin, err)
	}
	return parseReport(out)
}

// parseReport reads the report: the output's last line.
func parseReport(out []byte) (map[string]any, error) {
	lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
	var rep map[string]any
	if err := json.Unmarshal(lines[len(lines)-1], &rep); err != nil {
		return nil, fmt.Errorf("load test report: %v", err)
	}
	return rep, nil
}

func num(rep map[string]any, key string) float64 {
	v, _ := rep[key].(float64)
	return v
}

// median returns the median of key over runs (and its range).
func median(runs []map[string]any, key string) (med, lo, hi float64) {
	v := make([]float64, len(runs))
	for i, r := range runs {
		v[i] = num(r, key)
	}
	slices.Sort(v)
	med = v[len(v)/2]
	if len(v)%2 == 0 {
		med = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return med, v[0], v[len(v)-1]
}

// report prints the medians per revision, and whether the snapshot bytes
// were the same everywhere.
func report(w *os.File, revs []string, runs [][]map[string]any) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := []string{"revision", "runs"}
	for _, f := range fields {
		head = append(head, f.name)
	}
	fmt.Fprintln(tw, strings.Join(append(head, "snapshot bytes"), "\t"))
	bytesSeen := map[float64]bool{}
	for i, rev := range revs {
		row := []string{rev, fmt.Sprint(len(runs[i]))}
		for j, f := range fields {
			med, lo, hi := median(runs[i], f.key)
			cell := fmt.Sprintf("%.3f", med)
			if j == 0 {
				cell += fmt.Sprintf(" (%.3f–%.3f)", lo, hi)
			}
			row = append(row, cell)
		}
		b := num(runs[i][0], "snapshot_bytes")
		bytesSeen[b] = true
		fmt.Fprintln(tw, strings.Join(append(row, fmt.Sprintf("%.0f", b)), "\t"))
	}
	tw.Flush()
	if len(bytesSeen) > 1 {
		fmt.Fprintln(w, "loadcompare: the revisions sent different snapshot bytes")
	}
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadcompare:", err)
		os.Exit(1)
	}
}
