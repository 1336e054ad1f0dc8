package main

import (
	"bytes"
	"compress/gzip"
	"errors"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const goodTrace = "# transform trace v1 rate=60\n" +
	"tick,id,px,py,pz,qx,qy,qz,qw\n" +
	"10,1,1.5,2,-3,0,0,0,1\r\n" +
	"10,4,0,0,0,0,0.7071068,0,0.7071068\n" +
	"11,1,1.6,2,-3,0,0,0,1\n" +
	"11,7,1e3,-2.5,0.25,0,0,1,0\n"

func TestParseTrace(t *testing.T) {
	tr, err := ParseTrace(strings.NewReader(goodTrace))
	require.NoError(t, err)
	require.Equal(t, 60, tr.Rate)
	require.Len(t, tr.Frames, 2)
	require.Equal(t, 10, tr.Frames[0].Tick)
	require.Equal(t, 11, tr.Frames[1].Tick)
	require.Equal(t, []int{1, 4}, ids(tr.Frames[0]))
	require.Equal(t, []int{1, 7}, ids(tr.Frames[1]))
	b, ok := tr.Frames[1].Body(7)
	require.True(t, ok)
	require.Equal(t, 1000.0, b.Pos.X)
	require.Equal(t, 1.0, b.Rot.Z)
	q := tr.Frames[0].Bodies[1].Rot
	require.InDelta(t, 1, q.Dot(q), 1e-12, "normalized")
	_, ok = tr.Frames[1].Body(4)
	require.False(t, ok, "id 4 despawned at tick 11")
	require.Equal(t, 2, tr.MaxBodies())

	// The same, gzip-compressed.
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	_, _ = zw.Write([]byte(goodTrace))
	require.NoError(t, zw.Close())
	tz, err := ParseTrace(&z)
	require.NoError(t, err)
	require.Equal(t, tr, tz)
}

func ids(f TraceFrame) []int {
	var out []int
	for _, b := range f.Bodies {
		out = append(out, b.ID)
	}
	return out
}

func TestParseTraceErrors(t *testing.T) {
	const head = "# transform trace v1 rate=60\ntick,id,px,py,pz,qx,qy,qz,qw\n"
	const row = "0,0,0,0,0,0,0,0,1\n"
	for _, tc := range []struct {
		name, in string
		line     int
		msg      string
	}{
		{"empty", "", 1, "empty trace"},
		{"bad magic", "# transform trace v2 rate=60\n", 1, "header"},
		{"no rate", "# transform trace v1\n", 1, "missing rate"},
		{"bad rate", "# transform trace v1 rate=fast\n", 1, "rate"},
		{"zero rate", "# transform trace v1 rate=0\n", 1, "rate"},
		{"not key=value", "# transform trace v1 rate=60 junk\n", 1, "key=value"},
		{"no column line", "# transform trace v1 rate=60\n", 2, "missing column line"},
		{"bad column line", "# transform trace v1 rate=60\ntick,id,x,y,z\n", 2, "column line"},
		{"no rows", head, 3, "no rows"},
		{"empty line", head + row + "\n" + row, 4, "empty line"},
		{"few fields", head + "0,0,0,0,0,0,0,1\n", 3, "8 fields"},
		{"many fields", head + "0,0,0,0,0,0,0,0,1,9\n", 3, "more than 9"},
		{"bad tick", head + "x,0,0,0,0,0,0,0,1\n", 3, "tick"},
		{"negative tick", head + "-1,0,0,0,0,0,0,0,1\n", 3, "tick"},
		{"bad id", head + "0,1.5,0,0,0,0,0,0,1\n", 3, "id"},
		{"bad float", head + "0,0,0,abc,0,0,0,0,1\n", 3, "py"},
		{"nan", head + "0,0,NaN,0,0,0,0,0,1\n", 3, "px"},
		{"inf", head + "0,0,0,0,0,0,0,inf,1\n", 3, "qz"},
		{"far", head + "0,0,0,0,2e6,0,0,0,1\n", 3, "pz"},
		{"not unit", head + "0,0,0,0,0,0,0,0,0.9\n", 3, "quaternion"},
		{"zero quat", head + "0,0,0,0,0,0,0,0,0\n", 3, "quaternion"},
		{"id repeat", head + row + row, 4, "ids must ascend"},
		{"id descending", head + "0,5,0,0,0,0,0,0,1\n0,2,0,0,0,0,0,0,1\n", 4, "ids must ascend"},
		{"tick backwards", head + "5,0,0,0,0,0,0,0,1\n4,0,0,0,0,0,0,0,1\n", 4, "ticks must ascend"},
		{"tick gap", head + "5,0,0,0,0,0,0,0,1\n7,0,0,0,0,0,0,0,1\n", 4, "ticks must ascend"},
		{"long line", head + strings.Repeat("1", 5000) + "\n", 3, "longer than"},
		{"bad gzip", "\x1f\x8bnot gzip", 1, "gzip"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseTrace(strings.NewReader(tc.in))
			require.Error(t, err)
			require.True(t, errors.Is(err, ErrTrace))
			var te *TraceError
			require.ErrorAs(t, err, &te)
			require.Equal(t, tc.line, te.Line, err.Error())
			require.Contains(t, err.Error(), "line ")
			require.Contains(t, err.Error(), tc.msg)
		})
	}
}

func TestWriteParseRoundTrip(t *testing.T) {
	tr := GenerateTrace(TraceGenConfig{Seed: 3, Bodies: 10, Seconds: 3, Rate: 30})
	require.Len(t, tr.Frames, 90)
	var b bytes.Buffer
	require.NoError(t, WriteTrace(&b, tr))
	back, err := ParseTrace(&b)
	require.NoError(t, err)
	require.Equal(t, tr.Rate, back.Rate)
	require.Len(t, back.Frames, len(tr.Frames))
	spawned, despawned := false, false
	for i, f := range tr.Frames {
		g := back.Frames[i]
		require.Equal(t, f.Tick, g.Tick)
		require.Equal(t, ids(f), ids(g))
		for j, body := range f.Bodies {
			require.InDelta(t, 0, body.Pos.Sub(g.Bodies[j].Pos).Len(), 1e-4)
			require.Less(t, body.Rot.AngleTo(g.Bodies[j].Rot), 1e-4)
		}
		if i > 0 {
			spawned = spawned || len(f.Bodies) > len(tr.Frames[i-1].Bodies)
			despawned = despawned || len(f.Bodies) < len(tr.Frames[i-1].Bodies)
		}
	}
	require.True(t, spawned && despawned, "the generator exercises spawn and despawn")
}

// The shipped trace is what the generator makes (go generate).
func TestShippedTraceIsGenerated(t *testing.T) {
	shipped := loadShipped(t)
	var b bytes.Buffer
	require.NoError(t, WriteTrace(&b, GenerateTrace(TraceGenConfig{Seed: 1})))
	want, err := ParseTrace(&b)
	require.NoError(t, err)
	require.Equal(t, want, shipped)
	require.Equal(t, 60, shipped.Rate)
	require.Len(t, shipped.Frames, 300)
	require.Equal(t, 50, shipped.MaxBodies())
}

func loadShipped(t testing.TB) *Trace {
	f, err := os.Open("testdata/falling.trace.gz")
	require.NoError(t, err)
	defer f.Close()
	tr, err := ParseTrace(f)
	require.NoError(t, err)
	return tr
}

// Replaying the shipped trace, every client shows the server's state within
// the precision of components.Transform (1 mm steps: ≤ 0.5 mm per axis;
// 10-bit smallest-three) on every tick from one second after the join: no
// stale sample, every mirror counted.
func TestReplayShippedTrace(t *testing.T) {
	tr := loadShipped(t)
	rep, err := Run(Config{Transport: "sim", Clients: 2, World: 1, Ticks: 1, Rate: 60, Seed: 1, Trace: tr, TraceName: "falling"})
	require.NoError(t, err)
	require.True(t, rep.Converged, rep.ConvergeError)
	tp := rep.TraceReport
	require.NotNil(t, tp)
	require.Equal(t, 300, tp.TraceFrames)
	f := rep.FidelityReport
	require.Greater(t, f.Samples, 2*240*40)
	require.Zero(t, f.StaleFraction, "%+v", f)
	require.Zero(t, f.MissingMirrors)
	require.LessOrEqual(t, f.PosErrMaxM, f.PosBoundM)
	require.LessOrEqual(t, f.RotErrMaxDeg, f.RotBoundDeg)
	require.Greater(t, tp.DownKbitPerS, 10.0)
	require.LessOrEqual(t, tp.SettledPosErrMaxM, 0.0005+1e-9)
	require.LessOrEqual(t, tp.SettledRotErrMax, 0.15)
	require.Equal(t, rep.SpawnsSent, rep.SpawnsApplied)
	require.Equal(t, uint64(2*5), rep.DespawnsApplied, "five bodies vanish, for two clients")
}

// A lower precision replicates the same trace in fewer bytes, and the
// fidelity bounds follow it.
func TestReplayAtAnotherPrecision(t *testing.T) {
	tr := loadShipped(t)
	base, err := Run(Config{Transport: "sim", Clients: 1, World: 1, Ticks: 1, Rate: 60, Seed: 1, Trace: tr})
	require.NoError(t, err)
	coarse, err := Run(Config{Transport: "sim", Clients: 1, World: 1, Ticks: 1, Rate: 60, Seed: 1, Trace: tr, PosStep: 1.0 / 512, QuatBits: 9})
	require.NoError(t, err)
	require.True(t, coarse.Converged, coarse.ConvergeError)
	require.Less(t, coarse.SnapshotBytes, base.SnapshotBytes)
	require.InDelta(t, 1.0/1024, coarse.PosBoundM, 1e-6)
	require.Greater(t, coarse.RotBoundDeg, base.RotBoundDeg)
	require.Zero(t, coarse.StaleFraction)
}

func TestReplayWithInterest(t *testing.T) {
	tr := loadShipped(t)
	rep, err := Run(Config{Transport: "sim", Clients: 1, World: 1, Interest: 8, Ticks: 1, Rate: 60, Seed: 1, Trace: tr})
	require.NoError(t, err)
	require.True(t, rep.Converged, rep.ConvergeError)
	require.Less(t, rep.MirrorsPerClient, 45.0)
}

func FuzzParseTrace(f *testing.F) {
	f.Add([]byte(goodTrace))
	f.Add([]byte("# transform trace v1 rate=60\ntick,id,px,py,pz,qx,qy,qz,qw\n0,0,0,0,0,0,0,0,1\n1,0,1,0,0,0,0,0,1\n1,3,1,0,0,0,1,0,0\n"))
	f.Add([]byte("# transform trace v1 rate=60\ntick,id,px,py,pz,qx,qy,qz,qw\n0,1,0,0,0,0,0,0,1\n0,0,0,0,0,0,0,0,1\n"))
	var b bytes.Buffer
	_ = WriteTrace(&b, GenerateTrace(TraceGenConfig{Seed: 2, Bodies: 3, Seconds: 0.1, Rate: 30}))
	f.Add(b.Bytes())
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	_, _ = zw.Write(b.Bytes())
	_ = zw.Close()
	f.Add(z.Bytes())
	f.Fuzz(func(t *testing.T, in []byte) {
		tr, err := ParseTrace(bytes.NewReader(in))
		if err != nil {
			var te *TraceError
			if !errors.As(err, &te) || te.Line < 1 {
				t.Fatalf("error without a line: %v", err)
			}
			return
		}
		if tr.Rate < 1 || len(tr.Frames) == 0 {
			t.Fatalf("accepted a trace without rate or rows")
		}
		for i, fr := range tr.Frames {
			if i > 0 && fr.Tick != tr.Frames[i-1].Tick+1 {
				t.Fatalf("ticks not consecutive")
			}
			for j, body := range fr.Bodies {
				if j > 0 && body.ID <= fr.Bodies[j-1].ID {
					t.Fatalf("ids not ascending")
				}
				if math.Abs(body.Rot.Dot(body.Rot)-1) > 1e-9 {
					t.Fatalf("quaternion not normalized")
				}
			}
		}
		// What parses, writes and parses again to the same shape.
		var out bytes.Buffer
		if err := WriteTrace(&out, tr); err != nil {
			t.Fatal(err)
		}
		back, err := ParseTrace(&out)
		if err != nil {
			t.Fatalf("rewritten trace does not parse: %v", err)
		}
		if len(back.Frames) != len(tr.Frames) || back.Rate != tr.Rate {
			t.Fatalf("round trip changed the shape")
		}
	})
}

// The high-motion scene (250 bodies all moving, 30 Hz) over 50 ms of
// one-way latency: from one second after the join, every client shows the
// server's state within precision on every tick, every datagram of a tick
// (several per tick) included.
func TestDrumSceneFullFidelity(t *testing.T) {
	tr := scenes["drum"](1)
	moving := 0
	for i, b := range tr.Frames[100].Bodies {
		prev := tr.Frames[99].Bodies[i]
		if b.Pos != prev.Pos && b.Rot != prev.Rot {
			moving++
		}
	}
	require.Equal(t, 250, moving, "every body moves and turns every tick")
	rep, err := Run(Config{Transport: "sim", Clients: 2, World: 1, Ticks: 1, Rate: 30, Seed: 1, Latency: 50 * time.Millisecond, Trace: tr})
	require.NoError(t, err)
	require.True(t, rep.Converged, rep.ConvergeError)
	f := rep.FidelityReport
	t.Logf("drum: %.1f KB/s per client, %.0f B/tick p50, %.2f datagrams/tick; error %.3f mm / %.4f° max",
		rep.DownKBpsMean, rep.BytesPerTickP50, rep.DatagramsPerTickMean, f.PosErrMaxM*1e3, f.RotErrMaxDeg)
	require.Greater(t, rep.DatagramsPerTickMean, 1.2) // a quarter of the ticks or more in two datagrams
	require.Greater(t, f.Samples, 2*250*250)
	require.Zero(t, f.StaleFraction)
	require.LessOrEqual(t, f.PosErrMaxM, f.PosBoundM)
	require.LessOrEqual(t, f.RotErrMaxDeg, f.RotBoundDeg)
}

// An explosion sets well over a hundred resting bodies in motion at once:
// none of them is shown stale.
func TestBurstSceneFullFidelity(t *testing.T) {
	tr := scenes["falling-burst"](1)
	burst := 5 * tr.Rate
	resting, thrown := 0, 0
	for i, b := range tr.Frames[burst].Bodies {
		before, after := tr.Frames[burst-2].Bodies[i], tr.Frames[burst-1].Bodies[i]
		if before.Pos == after.Pos && before.Rot == after.Rot {
			resting++
			if b.Pos != after.Pos {
				thrown++
			}
		}
	}
	t.Logf("burst: %d of %d resting bodies thrown at once", thrown, resting)
	require.GreaterOrEqual(t, thrown, 100)
	rep, err := Run(Config{Transport: "sim", Clients: 1, World: 1, Ticks: 1, Rate: 60, Seed: 1, Latency: 50 * time.Millisecond, Trace: tr})
	require.NoError(t, err)
	require.True(t, rep.Converged, rep.ConvergeError)
	require.Zero(t, rep.StaleFraction, "%+v", rep.FidelityReport)
}

// A client capped at 16 KiB/s on the high-motion scene stays within its
// cap, the budget decides what goes, and it converges once motion stops.
func TestCappedClientStaysWithinItsCap(t *testing.T) {
	const limit = 16 << 10
	rep, err := Run(Config{Transport: "sim", Clients: 1, World: 1, Ticks: 1, Rate: 30, Seed: 1, Latency: 50 * time.Millisecond,
		Trace: scenes["drum"](1), MaxBytesPerSecond: limit})
	require.NoError(t, err)
	t.Logf("capped at %d B/s: %.0f B/s mean, %.0f p99 (one-second windows); %d records deferred; stale %.1f%%",
		limit, rep.DownKBpsMean*1000, rep.DownKBpsP99*1000, rep.RecordsDeferred, rep.StaleFraction*100)
	require.LessOrEqual(t, rep.DownKBpsMean*1000, float64(limit))
	require.LessOrEqual(t, rep.DownKBpsP99*1000, float64(limit)*1.01)
	require.Greater(t, rep.RecordsDeferred, uint64(0))
	require.True(t, rep.Converged, rep.ConvergeError)
}
