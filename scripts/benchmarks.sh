#!/usr/bin/env bash
# Regenerates BENCHMARKS.md and its plots (docs/bench-*.svg): every package
# benchmark (go test -bench), a set of examples/loadtest runs, a sweep of the
# number of clients, and the physics trace against @colyseus/schema, with
# the machine they ran on and its load.
#
#   scripts/benchmarks.sh            # writes BENCHMARKS.md (about 5 minutes)
#   BENCHTIME=1s SWEEP_ROUNDS=5 scripts/benchmarks.sh
#
# The physics trace needs the avalanche kit (a Rapier trace and a
# @colyseus/schema replay, run with node): AVALANCHE_KIT (default: ../shared/bench
# beside the clone) is copied to AVALANCHE_DIR (default:
# ~/.cache/archenet/avalanche), where `npm ci` and the trace (about a minute)
# run once. Without node or the kit the section is left out, and said so.
#
# Run it on an otherwise idle machine; commit the result.
set -euo pipefail
cd "$(dirname "$0")/.."
BENCHTIME=${BENCHTIME:-200ms}
AVALANCHE_KIT=${AVALANCHE_KIT:-../shared/bench}
AVALANCHE_DIR=${AVALANCHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/archenet/avalanche}
out=BENCHMARKS.md
svgdir=docs
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
loadavg() { cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown; }
load_start=$(loadavg)
started=$(date +%s)

pkgs=$(grep -rl --include='*_test.go' '^func Benchmark' . | xargs -n1 dirname | sort -u)
echo "benchmarks: go test -bench over $(echo "$pkgs" | wc -w) packages" >&2
# -p 1: one package's benchmark binary at a time; two at once on a 2-core
# machine slow each other down.
# shellcheck disable=SC2086
go test -p 1 -run '^$' -bench . -benchmem -count 1 -benchtime "$BENCHTIME" $pkgs >"$tmp/bench.txt"

go build -o "$tmp/loadtest" ./examples/loadtest
go build -o "$tmp/benchmd" ./scripts/benchmd
run() { # file, flags...: one load test, its output (the JSON report last) in file
	local file=$1
	shift
	echo "benchmarks: loadtest $*" >&2
	"$tmp/loadtest" -q -json "$@" >"$file" 2>"$file.err" || true
	[ -s "$file" ] || cat "$file.err" >"$file"
}
load() { # name, flags...
	local name=$1
	shift
	run "$tmp/$name.out" "$@"
	loads+=(-load "$name=$tmp/$name.out")
	cmds+=("loadtest $*")
}
loads=()
cmds=()
load acceptance -clients 128 -entities 2000 -ticks 900
load lossy -clients 64 -entities 2000 -ticks 600 -loss 0.05 -latency 50ms -jitter 10ms
load all-visible -clients 16 -entities 2000 -interest 0 -ticks 300
load trace -trace examples/loadtest/testdata/falling.trace.gz
load drum -scene drum -latency 50ms
load quic -transport quic -clients 32 -entities 2000 -ticks 300
load 254-clients-1-worker -clients 254 -entities 2000 -ticks 600 -workers 1
load 254-clients-2-workers -clients 254 -entities 2000 -ticks 600 -workers 2
load 50k-entities-2-workers -clients 64 -entities 50000 -world 4096 -ticks 300 -workers 2

# Server time against the number of clients: short runs of the same scene,
# SWEEP_ROUNDS rounds over every number in turn (a load spike from other work
# then hits one run, not one number's every run); benchmd keeps the median.
sweep_clients=(16 32 64 128 192 254)
sweep_flags=(-entities 2000 -ticks 300)
sweep_rounds=${SWEEP_ROUNDS:-3}
sweep=()
for r in $(seq "$sweep_rounds"); do
	for n in "${sweep_clients[@]}"; do
		run "$tmp/sweep-$n-$r.out" -clients "$n" "${sweep_flags[@]}"
		sweep+=(-sweep "$n=$tmp/sweep-$n-$r.out")
	done
done

# The physics trace (600 Rapier bodies, 60 Hz) against @colyseus/schema.
trace_ok=
trace_note=
if [ -s "$AVALANCHE_DIR/out/avalanche.csv.gz" ] && [ -d "$AVALANCHE_DIR/node_modules" ]; then
	trace_ok=1
elif ! command -v node >/dev/null || ! command -v npm >/dev/null; then
	trace_note="node and npm are not installed"
elif [ ! -f "$AVALANCHE_KIT/avalanche.mjs" ]; then
	trace_note="the avalanche kit is not at $AVALANCHE_KIT (set AVALANCHE_KIT)"
else
	echo "benchmarks: preparing the avalanche kit in $AVALANCHE_DIR (npm ci, the trace: about a minute)" >&2
	mkdir -p "$AVALANCHE_DIR"
	cp -r "$AVALANCHE_KIT"/. "$AVALANCHE_DIR"/
	chmod -R u+w "$AVALANCHE_DIR"
	if (cd "$AVALANCHE_DIR" && npm ci --no-audit --no-fund >&2 && node avalanche.mjs --out out/avalanche.csv.gz >&2); then
		trace_ok=1
	else
		trace_note="preparing the kit in $AVALANCHE_DIR failed"
	fi
fi
traces=()
if [ -n "$trace_ok" ]; then
	avalanche=$AVALANCHE_DIR/out/avalanche.csv.gz
	echo "benchmarks: the kit's @colyseus/schema and no-delta replays" >&2
	(
		cd "$AVALANCHE_DIR"
		for mode in quant quant16 float; do node colyseus.mjs --mode "$mode" --trace out/avalanche.csv.gz --quiet; done
		node naive.mjs --trace out/avalanche.csv.gz
	) >"$tmp/kit.jsonl"
	run "$tmp/av-coly.out" -trace "$avalanche" -latency 50ms -pos-step 0.001953125 -quat-bits 9
	run "$tmp/av-default.out" -trace "$avalanche" -latency 50ms
	run "$tmp/av-lossy.out" -trace "$avalanche" -latency 50ms -loss 0.05 -jitter 20ms
	traces=(-trace "archenet, colyseus's precision=$tmp/av-coly.out" -trace "archenet, default precision=$tmp/av-default.out"
		-trace "archenet, default precision, 5% loss, 20 ms jitter=$tmp/av-lossy.out")
fi

# Hosting: 32 matches on one host, one worker per match (host.Match.Configure)
# and, for comparison, two; the clients run in a child process.
echo "benchmarks: loadtest hosting -matches 32" >&2
hosting=(-matches 32 -clients 8 -entities 500 -rate 30 -duration 10s -md)
"$tmp/loadtest" "${hosting[@]}" >"$tmp/hosting.md" 2>"$tmp/hosting.err" || cat "$tmp/hosting.err" >>"$tmp/hosting.md"
"$tmp/loadtest" "${hosting[@]}" -workers 2 2>>"$tmp/hosting.err" | tail -n 1 >>"$tmp/hosting.md" || true
# Big matches: 4 × 64 clients × 2,000 entities, every entity in every view.
big=(-matches 4 -clients 64 -entities 2000 -rate 30 -duration 10s -md)
"$tmp/loadtest" "${big[@]}" 2>>"$tmp/hosting.err" | tail -n 1 >>"$tmp/hosting.md" || true
load_end=$(loadavg)

mkdir -p "$svgdir"
note="$(date -u +%F), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $(nproc) cores, load average at the start ${load_start% *} (1, 5 min)"
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//' || echo unknown)
{
	echo "# Benchmarks"
	echo
	echo "Generated by \`scripts/benchmarks.sh\` — do not edit by hand; rerun the script and commit."
	echo
	echo "- date: $(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')"
	echo "- $(go version)"
	echo "- CPU: $cpu, $(nproc) cores (GOMAXPROCS $(nproc)), $(uname -sm)"
	echo "- load average (1, 5, 15 min) at the start: ${load_start}; at the end: ${load_end}; the run took $(( ($(date +%s) - started + 30) / 60 )) min. Timings are of this machine at this load: byte counts are exact and repeat, times move with the load (up to 2× between runs on a shared VM)."
	echo "- package benchmarks: \`go test -p 1 -run '^\$' -bench . -benchmem -count 1 -benchtime $BENCHTIME\`"
	echo "- to compare two revisions, take turns: \`go run ./scripts/loadcompare\` runs the load test of each in interleaved rounds, prints the medians and checks that they sent the same bytes."
	echo
	echo "Sections: [key package benchmarks](#key-package-benchmarks) · [server time against clients](#server-time-against-clients) · [physics trace against @colyseus/schema](#physics-trace-against-colyseusschema) · [load test](#load-test-examplesloadtest) · [hosting](#hosting-examplesloadtest--matches) · [every package benchmark](#package-benchmarks)"
	echo
	echo "## Key package benchmarks"
	echo
	"$tmp/benchmd" -keys "$tmp/bench.txt"
	echo
	echo "## Server time against clients"
	echo
	echo "\`go run ./examples/loadtest -clients N ${sweep_flags[*]}\` for N = ${sweep_clients[*]}, ${sweep_rounds} rounds in turn, each row the run of median server time: one process, the simulated network, 2,000 entities (a quarter moving) in a 1,024 m world, interest radius 150 m, 30 Hz, workers = GOMAXPROCS. Server time is the server's Receive + Send per net tick: the frame (reading the world once for every client) and the per-client phase (each client's datagrams, on the workers). CPU adds the helpers' time."
	echo
	echo "![server time per net tick against the number of clients](docs/bench-clients.svg)"
	echo
	"$tmp/benchmd" "${sweep[@]}" -sweep-svg "$svgdir/bench-clients.svg" -plot-note "$note"
	echo "## Physics trace against @colyseus/schema"
	echo
	if [ -n "$trace_ok" ]; then
		echo "The avalanche kit's trace: 600 Rapier bodies (cubes, spheres, planks) slide down a ramp into a basin at 60 Hz, 1,800 ticks, with 8 despawns and 8 spawns every 4 s; a third of the bodies move in an average tick, all of them in the burst. archenet replays it to one client (\`go run ./examples/loadtest -trace avalanche.csv.gz -latency 50ms\`, at colyseus's precision with \`-pos-step 0.001953125 -quat-bits 9\`); @colyseus/schema 5.0.34 encodes the same trace in the kit (\`node colyseus.mjs --mode quant\`), and the kit's no-delta baselines bound both from above. archenet's bytes are its whole datagrams (headers included) and its spawn messages; colyseus's are its patches alone, without tick 0. Errors are against the trace at the tick of the client's newest snapshot."
		echo
		echo "![bytes per tick on the physics trace: archenet against @colyseus/schema](docs/bench-avalanche.svg)"
		echo
		"$tmp/benchmd" "${traces[@]}" -kit "$tmp/kit.jsonl" -trace-svg "$svgdir/bench-avalanche.svg" -plot-note "$note"
	else
		echo "Not run: $trace_note."
		echo
	fi
	echo "## Load test (examples/loadtest)"
	echo
	echo "One process runs the server and every client; server time is srv.Receive + srv.Send only. KB = 1000 bytes of payload."
	echo "Targets for the acceptance run: converged, downstream ≤ 20 KB/s per client, server ≤ 2 ms per net tick."
	echo
	for i in "${!cmds[@]}"; do echo "- ${loads[$((2 * i + 1))]%%=*}: \`go run ./examples/${cmds[$i]}\`"; done
	echo
	"$tmp/benchmd" "${loads[@]}"
	echo "## Hosting (examples/loadtest -matches)"
	echo
	echo "One process runs 32 matches on one host (\`replication/host\`) over QUIC on 127.0.0.1, each a world of 500 entities (a quarter moving) sent whole to its 8 clients at 30 Hz; the 256 clients run in a child process on the same cores. Server ms/tick is one match's Receive + Send (pooled over every match's ticks; the worst match's own p99 beside it); frame is the whole Game.Frame the host times. Process CPU is the server process's user + system time over the wall time. Goal: every match fits, p99 ≤ 5 ms per tick."
	echo
	echo "- \`go run ./examples/loadtest ${hosting[*]}\` (and \`-workers 2\`), then big matches: \`go run ./examples/loadtest ${big[*]}\` (ticks that do not fit are not made up: see \"match-ticks run of due\"; add \`-cpuprofile FILE\` and \`go tool pprof -top -focus=quic-go\` for the transport's share)"
	echo
	cat "$tmp/hosting.md"
	echo
	echo "## Package benchmarks"
	echo
	"$tmp/benchmd" -bench "$tmp/bench.txt"
} >"$out.tmp"
mv "$out.tmp" "$out"
echo "benchmarks: wrote $out" >&2
