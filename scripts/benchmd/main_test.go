package main

import (
	"bytes"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// wellFormed fails unless b parses as XML to the end.
func wellFormed(t *testing.T, b []byte) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(b))
	for {
		_, err := d.Token()
		if err == io.EOF {
			return
		}
		require.NoError(t, err)
	}
}

func TestNiceTicks(t *testing.T) {
	require.Equal(t, []float64{0, 1, 2, 3, 4, 5}, niceTicks(0, 4.78))
	require.Equal(t, []float64{0, 5000, 10000, 15000, 20000, 25000}, niceTicks(0, 22960))
	require.Equal(t, []float64{0, 0.05, 0.1, 0.15, 0.2}, niceTicks(0, 0.19))
	require.Equal(t, "12,396", num(12396))
	require.Equal(t, "0.248", num(0.248))
}

func TestCharts(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, writeLineChart(&b, lineChart{Title: "a <b>", XLabel: "clients", YLabel: "ms",
		Series: []series{{Name: "mean", X: []float64{16, 64}, Y: []float64{1.1, 1.2}}, {Name: "p99 & co", X: []float64{16, 64}, Y: []float64{4, 5}, Dashed: true}}}))
	wellFormed(t, b.Bytes())
	require.Contains(t, b.String(), "a &lt;b&gt;")
	require.Equal(t, 2, strings.Count(b.String(), "<polyline"))

	b.Reset()
	require.NoError(t, writeBarChart(&b, barChart{Title: "bytes", Bars: []bar{{Label: "x", Value: 944, Back: 3163}, {Label: "y", Value: 3809, Colour: 1}},
		Legend: [][2]string{{palette[0], "archenet"}}, BackLegend: "p99"}))
	wellFormed(t, b.Bytes())
	require.Equal(t, 1+3+2, strings.Count(b.String(), "<rect"), "background, three bars, two legend keys")
}

func TestKeyTableNamesMissingBenchmarks(t *testing.T) {
	in := "pkg: github.com/archenet/archenet/replication\nBenchmarkServerFrame/50000-2   100  819294 ns/op  16.39 ns/entity  0 B/op  0 allocs/op\n"
	var b bytes.Buffer
	err := keyTable(&b, strings.NewReader(in))
	require.ErrorContains(t, err, "replication/internal/peer BenchmarkPeerTick/254x2000 (ns/peer-tick)")
	require.Contains(t, b.String(), "| 16.39 ns/entity | `replication` `BenchmarkServerFrame/50000` |")
}

func TestSweepAndTrace(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(s), 0o644))
		return p
	}
	a := write("a", "progress\n"+`{"server_ms_per_tick_mean":1.1,"server_ms_per_tick_p99":4,"converged":true,"net_rate_hz":60,"down_kbytes_per_s_mean":56.668,"bytes_per_tick_p99":3163,"loss":0,"pos_err_max_m":0.000976,"rot_err_max_deg":0.316,"pos_err_p99_m":0.000973,"rot_err_p99_deg":0.257,"pos_bound_m":0.000977,"rot_bound_deg":0.549}`+"\n")
	b := write("b", `{"server_ms_per_tick_mean":2.1,"server_ms_per_tick_p99":5,"converged":true}`)
	kit := write("kit", `{"mode":"quant","mean_bytes_per_tick":3808.78,"p99_bytes_per_tick":13746,"kbytes_per_s":228.53}`+"\n"+
		`{"mode":"naive_full_snapshot","mean_bytes_per_tick":19200,"p99_bytes_per_tick":19200,"kbytes_per_s":1152}`+"\n")
	var out bytes.Buffer
	svg := filepath.Join(dir, "c.svg")
	c := write("c", `{"server_ms_per_tick_mean":9.9,"server_ms_per_tick_p99":5,"converged":true}`)
	require.NoError(t, sweepTable(&out, []string{"254=" + b, "16=" + a, "254=" + c, "254=" + b}, svg, "a note"))
	require.Regexp(t, `(?s)\| 16 \| 1 \| 1\.10 .*\| 254 \| 3 \| 2\.10 `, out.String(), "254: the median of three runs")
	s, err := os.ReadFile(svg)
	require.NoError(t, err)
	wellFormed(t, s)
	require.Contains(t, string(s), ">a note</text>")

	out.Reset()
	require.NoError(t, traceTable(&out, []string{"archenet=" + a}, kit, svg, ""))
	require.Contains(t, out.String(), "| archenet | error bound 0.977 mm, 0.549° | 944 | 3,163 | 56.7 | 0.248× | error max 0.976 mm, 0.316°, p99 0.973 mm, 0.257°; stale 0% |")
	require.Contains(t, out.String(), "| @colyseus/schema quant | 1/512 m int32, 9-bit smallest-three | 3,809 | 13,746 | 229 | 1× |")
	s, err = os.ReadFile(svg)
	require.NoError(t, err)
	wellFormed(t, s)
}
