#!/usr/bin/env bash
# Measures retry beside go-retryablehttp and failsafe-go, side by side in one
# run, and writes everything into results/ (or $OUT):
#
#   bench     the benchmarks (bench_test.go), COUNT rounds of every one,
#             interleaved so that a busy moment of the machine hits every
#             library alike; benchstat tables against the bare transport
#             and against each peer; ratios.txt with the ratios of medians
#             and the targets of issue 5, checked
#   s3copy    S3 over loopback three ways: bare, bare through a reader that
#             only copies the body as retry does, and retry (also in bench)
#   coldburst 100 concurrent GETs to a healthy host new to the Pacer:
#             no Pacer, the Pacer (slow start), the Pacer without slow start
#   coldrtt   the same burst to a server answering 20 ms late: slow start's
#             initial window of 10 against 4, 2 and none
#   hedge     GETs to a server with a heavy latency tail (5 % of answers 20x
#             slower): p50, p99 and extra requests, retry without hedging,
#             retry hedging, and failsafe-go's hedge policy
#   peakrss   peak RSS of one 64 MiB upload through each library
#   storm     the retry-storm harness (ends within two minutes)
#
# Usage: ./run.sh [all|bench|s3copy|coldburst|coldrtt|hedge|peakrss|storm]...   (default: all)
# Environment: COUNT (10), BENCHTIME (0.5s), CPU (1: GOMAXPROCS of the
# benchmarks), OUT (results).
#
# Needs only Go and the Go module proxy: benchstat is installed at a pinned
# version if missing. Everything runs on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")"

COUNT=${COUNT:-10}
BENCHTIME=${BENCHTIME:-0.5s}
CPU=${CPU:-1}
OUT=${OUT:-results}
BENCHSTAT_VERSION=v0.0.0-20260908200009-22c9c6c9d4da
export GOFLAGS=${GOFLAGS:--buildvcs=false}
GOBIN_DIR=$(go env GOPATH)/bin

steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(all)
want() { for s in "${steps[@]}"; do [ "$s" = all ] || [ "$s" = "$1" ] && return 0; done; return 1; }

mkdir -p "$OUT"
step() { printf '\n== %s\n' "$*"; }
load() { cut -d' ' -f1-3 /proc/loadavg; }

machine() {
	echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(free -g | awk '/^Mem:/ {print $2 " GiB"}')"
	echo "go: $(go version | cut -d' ' -f3-)"
	echo "load average (1, 5, 15 min) at the start: $(load)"
}

if want bench || want s3copy || want coldburst || want coldrtt || want hedge; then
	if ! [ -x "$GOBIN_DIR/benchstat" ]; then
		GOWORK=off go install "golang.org/x/perf/cmd/benchstat@$BENCHSTAT_VERSION"
	fi
	bs="$GOBIN_DIR/benchstat"
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	go test -c -o "$tmp/bench.test" .
	bench() { # pattern file: one round, appended to file
		"$tmp/bench.test" -test.run '^$' -test.bench "$1" -test.benchmem \
			-test.benchtime "$BENCHTIME" -test.cpu "$CPU" -test.count 1 >>"$2"
	}
fi

if want bench; then
	step "benchmarks: $COUNT rounds, -benchtime $BENCHTIME -cpu $CPU"
	machine | tee "$OUT/machine.txt"
	: >"$OUT/bench.txt"
	for i in $(seq "$COUNT"); do
		bench '^Benchmark(Loopback|InMemory)$' "$OUT/bench.txt"
		echo "round $i of $COUNT done; load average $(load)"
	done
	echo "load average (1, 5, 15 min) at the end: $(load)" | tee -a "$OUT/machine.txt"
	echo "command: COUNT=$COUNT BENCHTIME=$BENCHTIME CPU=$CPU ./run.sh bench" >>"$OUT/machine.txt"

	"$bs" -col '/lib@(bare retry retryablehttp failsafe)' "$OUT/bench.txt" >"$OUT/benchstat-vs-bare.txt"
	"$bs" -col '/lib@(retryablehttp retry)' "$OUT/bench.txt" >"$OUT/benchstat-vs-retryablehttp.txt"
	"$bs" -col '/lib@(failsafe retry)' "$OUT/bench.txt" >"$OUT/benchstat-vs-failsafe.txt"
	for f in vs-bare vs-retryablehttp vs-failsafe; do
		step "benchstat $f"
		cat "$OUT/benchstat-$f.txt"
	done
fi

# rounds name pattern: COUNT rounds of the benchmarks matching pattern into
# $OUT/name.txt, with the machine and the command in $OUT/name-machine.txt.
rounds() {
	{ machine; echo "command: COUNT=$COUNT BENCHTIME=$BENCHTIME CPU=$CPU ./run.sh $1"; } >"$OUT/$1-machine.txt"
	: >"$OUT/$1.txt"
	for i in $(seq "$COUNT"); do
		bench "$2" "$OUT/$1.txt"
	done
}

if want s3copy; then
	step "S3 three ways: $COUNT rounds, -benchtime $BENCHTIME -cpu $CPU"
	rounds s3copy '^BenchmarkS3Copy$'
	"$bs" -col '/lib@(bare copy retry)' "$OUT/s3copy.txt" | tee "$OUT/benchstat-s3copy.txt"
	"$bs" -col '/lib@(copy retry)' "$OUT/s3copy.txt" | tee -a "$OUT/benchstat-s3copy.txt"
fi

if want coldburst; then
	step "a cold burst of 100 to a healthy host, with and without the Pacer's slow start: $COUNT rounds"
	rounds coldburst '^BenchmarkColdBurst$'
	"$bs" -col '/pacer@(none default slow-start)' "$OUT/coldburst.txt" | tee "$OUT/benchstat-coldburst.txt"
fi

if want coldrtt; then
	step "a cold burst of 100 to a host 20 ms away, by slow start's initial window: $COUNT rounds"
	rounds coldrtt '^BenchmarkColdBurstRTT$'
	"$bs" -col '/window@(10 4 2 off)' "$OUT/coldrtt.txt" | tee "$OUT/benchstat-coldrtt.txt"
fi

if want hedge; then
	step "a latency tail, with and without hedging: $COUNT rounds of 1000 calls"
	BENCHTIME=1000x rounds hedge '^BenchmarkHedge$'
	"$bs" -col '/lib@(none retry retry-p90 failsafe)' "$OUT/hedge.txt" | tee "$OUT/benchstat-hedge.txt"
fi

if want peakrss; then
	step "peak RSS of one 64 MiB upload"
	go run ./peakrss -runs 3 -csv "$OUT/peakrss.csv" | tee "$OUT/peakrss.txt"
fi

if [ -s "$OUT/bench.txt" ] && { want bench || want peakrss; }; then
	step "ratios of medians, and the targets"
	peak=()
	[ -s "$OUT/peakrss.csv" ] && peak=(-peakrss "$OUT/peakrss.csv")
	go run ./ratios "${peak[@]}" "$OUT/bench.txt" | tee "$OUT/ratios.txt"
fi

if want storm; then
	step "retry storm"
	mkdir -p "$OUT/storm"
	machine | tee "$OUT/storm/machine.txt"
	echo "command: ./run.sh storm (go run ./storm -out $OUT/storm)" >>"$OUT/storm/machine.txt"
	go run ./storm -out "$OUT/storm"
	echo "load average (1, 5, 15 min) at the end: $(load)" | tee -a "$OUT/storm/machine.txt"
fi
