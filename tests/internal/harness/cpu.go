package harness

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// CPUTimes is the machine's CPU time so far, in clock ticks: all of it and
// the idle part (Linux's /proc/stat; ok is false elsewhere).
type CPUTimes struct {
	Total, Idle uint64
	OK          bool
}

// ReadCPU reads the machine's CPU times (see CPUTimes).
func ReadCPU() CPUTimes {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return CPUTimes{}
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return CPUTimes{}
	}
	fields := strings.Fields(sc.Text())
	if len(fields) < 6 || fields[0] != "cpu" {
		return CPUTimes{}
	}
	var t CPUTimes
	for i, s := range fields[1:] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return CPUTimes{}
		}
		t.Total += v
		if i == 3 || i == 4 { // idle, iowait
			t.Idle += v
		}
	}
	t.OK = true
	return t
}

// IdleShare is the share of the machine's CPU time that was idle between
// the times from and t (−1 when either could not be read or no time
// passed). Near 0, the machine was saturated: a wall-clock figure measured
// then says more about the other load than about the code.
func (t CPUTimes) IdleShare(from CPUTimes) float64 {
	if !t.OK || !from.OK || t.Total <= from.Total {
		return -1
	}
	return float64(t.Idle-from.Idle) / float64(t.Total-from.Total)
}
