package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSplitArgs(t *testing.T) {
	revs, flags := splitArgs([]string{"HEAD~1", ".", "--", "-clients", "8"})
	require.Equal(t, []string{"HEAD~1", "."}, revs)
	require.Equal(t, []string{"-clients", "8"}, flags)
	revs, flags = splitArgs([]string{"HEAD"})
	require.Equal(t, []string{"HEAD"}, revs)
	require.Empty(t, flags)
}

func TestParseReportAndMedian(t *testing.T) {
	var runs []map[string]any
	for _, out := range []string{
		"progress line\n{\"server_ms_per_tick_mean\": 1.5, \"snapshot_bytes\": 10}\n",
		"{\"server_ms_per_tick_mean\": 1.1}",
		"x\n{\"server_ms_per_tick_mean\": 1.3}\n\n",
		"{\"server_ms_per_tick_mean\": 2.0}",
	} {
		rep, err := parseReport([]byte(out))
		require.NoError(t, err)
		runs = append(runs, rep)
	}
	med, lo, hi := median(runs, "server_ms_per_tick_mean")
	require.InDelta(t, 1.4, med, 1e-9) // (even count: the mean of the middle two)
	require.Equal(t, 1.1, lo)
	require.Equal(t, 2.0, hi)
	med, _, _ = median(runs[:3], "server_ms_per_tick_mean")
	require.Equal(t, 1.3, med)
	_, err := parseReport([]byte("no report"))
	require.Error(t, err)
}
