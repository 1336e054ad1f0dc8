package main

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// keyBench is a benchmark the key table shows: where it lives, what it
// measures, and the figure to show (a unit of its output, e.g. "ns/op" or a
// custom metric like "ns/entity").
type keyBench struct {
	Pkg, Name, What, Unit string
}

// keyBenches are the package benchmarks behind the figures users ask about,
// in the order of a net tick: the server's frame, each client's share, the
// client's decode, then the codec's parts. A benchmark renamed or moved to
// another package must be renamed here too: benchmd fails on a missing one.
var keyBenches = []keyBench{
	{"replication", "ServerFrame/50000", "server frame of a net tick without clients, 50,000 entities (a quarter moving), 2 workers", "ns/entity"},
	{"replication", "ServerFrame/2000", "same, 2,000 entities", "ns/entity"},
	{"replication/internal/store", "FrameUnchanged", "frame build per entity, 2,000 transforms, none changed", "ns/entity"},
	{"replication/internal/store", "FrameChanged", "frame build per entity, 2,000 transforms, all changed", "ns/entity"},
	{"replication/internal/peer", "PeerTick/254x2000", "one client's share of a net tick, 254 clients × 2,000 entities (no decoding)", "ns/peer-tick"},
	{"replication/internal/peer", "PeerTick/254x2000", "server state per client, same scene", "state-B/peer"},
	{"replication/internal/encode", "HighMotionBuild/encode", "datagram build per record sent, 250 tumbling bodies, first client", "ns/record"},
	{"replication/internal/encode", "HighMotionBuild/cached", "same, each further client (records shared)", "ns/record"},
	{"replication/internal/encode", "HighMotionBuild/shared", "same, a further client with the same view (its Build shared)", "ns/record"},
	{"replication/internal/encode", "ClientBuild", "one client's datagram, 1,000 entities, 10% changed, records shared", "ns/op"},
	{"replication/internal/lanes", "CodingChoice", "choosing a tick's residual coding", "ns/op"},
	{"replication/internal/receive", "ReceiverDecode", "client: decoding that datagram", "ns/op"},
	{"replication/internal/encode", "HighMotionDecode/250", "client: decoding the 250 tumbling bodies' datagram (the first client's above), per record", "ns/record"},
	{"replication/internal/encode", "HighMotionDecode/2000", "same, 2,000 tumbling bodies, several datagrams a tick", "ns/record"},
	{"replication/schema", "TransformEncode", "quantize + encode one transform (world position, 10-bit quaternion)", "ns/op"},
	{"replication/schema", "TransformDecode", "read + dequantize one transform", "ns/op"},
	{"input/internal/inputlog", "SectionEncode", "steady-state input frame (held keys, moving mouse), redundancy 4", "bytes/frame"},
	{"replication/internal/wire", "MessageSection", "an unreliable game message of 8 bytes in its tick's datagram: bytes beyond its payload", "overhead-B/msg"},
	{"replication/internal/wire", "MessageBatch", "the same message sent reliably, alone in its tick (kind, tick, count, id)", "overhead-B/msg"},
	{"tests/sim", "UnchangedReference", "an unchanged entity reference in a component whose holder moves, per tick", "ref-bits/tick"},
	{"replication/host/token", "Verify/valid", "connect token check, admitted", "ns/op"},
	{"replication/host/token", "Verify/junk", "connect token check, junk refused", "ns/op"},
}

// benchResult is one benchmark line: its figures by unit.
type benchResult map[string]string

// parseBench reads `go test -bench` output into results keyed by
// "package benchmark" (the package relative to the module, the benchmark
// without "Benchmark" and the GOMAXPROCS suffix).
func parseBench(r io.Reader) (map[string]benchResult, []string, error) {
	out := map[string]benchResult{}
	var order []string
	sc := bufio.NewScanner(r)
	pkg := ""
	for sc.Scan() {
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = strings.TrimPrefix(p, "github.com/archenet/archenet/")
			if pkg == "github.com/archenet/archenet" {
				pkg = "."
			}
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name := strings.TrimPrefix(f[0], "Benchmark")
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			name = name[:i]
		}
		res := benchResult{}
		for i := 2; i+1 < len(f); i += 2 {
			res[f[i+1]] = f[i]
		}
		key := pkg + " " + name
		if _, dup := out[key]; !dup {
			order = append(order, key)
		}
		out[key] = res
	}
	return out, order, sc.Err()
}

// keyTable renders keyBenches from the benchmark output; it fails when one
// of them is missing.
func keyTable(w io.Writer, r io.Reader) error {
	res, _, err := parseBench(r)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "| what | figure | benchmark |\n|---|---:|---|\n")
	var missing []string
	for _, k := range keyBenches {
		br, ok := res[k.Pkg+" "+k.Name]
		v, okUnit := br[k.Unit]
		if !ok || !okUnit {
			missing = append(missing, fmt.Sprintf("%s Benchmark%s (%s)", k.Pkg, k.Name, k.Unit))
			continue
		}
		fmt.Fprintf(w, "| %s | %s %s | `%s` `Benchmark%s` |\n", k.What, v, k.Unit, k.Pkg, k.Name)
	}
	if len(missing) > 0 {
		return fmt.Errorf("key benchmarks missing from the output (renamed or moved? update keyBenches): %s", strings.Join(missing, "; "))
	}
	return nil
}
