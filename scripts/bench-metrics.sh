#!/usr/bin/env bash
# What a Prometheus scrape costs a mount under load: fio's warm 8 KiB random
# reads by 32 jobs (psync, every job its own fully cached file) through
# `multiarc mount`, once with `--metrics` and a scrape every second, once
# without, alternated over several rounds (the medians are compared; one
# configuration moves by up to 1.5x between runs on a shared machine).
#
#   scripts/bench-metrics.sh [--rounds 5] [--jobs 32] [--runtime 10] [--filesize 8m] [--json]
#
# Needs /dev/fuse (root, or fuse3's fusermount3), fio, curl and python3.
# Prints a table (or, with --json, one JSON document) on stdout; progress
# on stderr.
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=5
jobs=32
runtime=10
filesize=8m
json=0
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --runtime) runtime="$2"; shift 2 ;;
    --filesize) filesize="$2"; shift 2 ;;
    --json) json=1; shift ;;
    *) echo "bench-metrics: unknown argument $1" >&2; exit 2 ;;
  esac
done
for tool in fio curl python3; do
  command -v "$tool" >/dev/null || { echo "bench-metrics: $tool is not installed" >&2; exit 1; }
done
[ -e /dev/fuse ] || { echo "bench-metrics: no /dev/fuse on this machine" >&2; exit 1; }
say() { printf 'bench-metrics: %s\n' "$*" >&2; }

say "building the release binary"
cargo build --release -q -p multiarc-cli
bin=$PWD/target/release/multiarc

work=$(mktemp -d "${TMPDIR:-/var/tmp}/multiarc-bench-metrics.XXXXXX")
mnt=$work/mnt
backing=$work/backing
mkdir -p "$mnt" "$backing"
scraper=
cleanup() {
  [ -n "$scraper" ] && kill "$scraper" 2>/dev/null || true
  fusermount3 -u "$mnt" 2>/dev/null || umount "$mnt" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# The files, laid out once in the backing directory.
fio --name=layout --directory="$backing" --rw=write --bs=1m --numjobs="$jobs" \
  --filesize="$filesize" --group_reporting --output-format=json >/dev/null
size_mib=$(python3 -c "s='$filesize'.lower(); m={'k':1/1024,'m':1,'g':1024}; print(int(float(s[:-1])*m[s[-1]]) if s[-1] in m else int(s)>>20)")
cache_mib=$(( jobs * size_mib * 5 / 4 + 64 ))
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

results=$work/results.jsonl
: >"$results"
for round in $(seq 1 "$rounds"); do
  # Alternate which configuration goes first.
  if [ $((round % 2)) = 1 ]; then order="metrics plain"; else order="plain metrics"; fi
  for config in $order; do
    extra=()
    [ "$config" = metrics ] && extra=(--metrics "127.0.0.1:$port")
    "$bin" mount "$backing" "$mnt" --max-bytes "${cache_mib}MiB" "${extra[@]}"
    scrapes=0
    if [ "$config" = metrics ]; then
      ( while :; do curl -sf "http://127.0.0.1:$port/metrics" >/dev/null || true; sleep 1; done ) &
      scraper=$!
    fi
    # Warm: every file read once, then the measured random reads.
    fio --name=warm --directory="$mnt" --rw=read --bs=1m --numjobs="$jobs" --filesize="$filesize" \
      --invalidate=0 --group_reporting --output-format=json >/dev/null
    say "round $round/$rounds, $config: $jobs jobs, ${runtime}s"
    out=$(fio --name=randread --directory="$mnt" --rw=randread --bs=8k --ioengine=psync \
      --numjobs="$jobs" --filesize="$filesize" --invalidate=0 --group_reporting \
      --time_based --runtime="$runtime" --output-format=json)
    if [ -n "$scraper" ]; then
      kill "$scraper" 2>/dev/null || true
      wait "$scraper" 2>/dev/null || true
      scraper=
      scrapes=$runtime
    fi
    iops=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["jobs"][0]["read"]["iops"])' <<<"$out")
    echo "{\"round\": $round, \"config\": \"$config\", \"jobs\": $jobs, \"iops\": $iops, \"scrapes_about\": $scrapes}" >>"$results"
    fusermount3 -u "$mnt" 2>/dev/null || umount "$mnt"
    while grep -q " $mnt " /proc/self/mountinfo; do sleep 0.1; done
  done
done

python3 - "$results" "$json" "$jobs" "$runtime" "$filesize" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
want_json = sys.argv[2] == "1"
by = {c: [r["iops"] for r in rows if r["config"] == c] for c in ("metrics", "plain")}
med = {c: statistics.median(v) for c, v in by.items()}
ratio = med["metrics"] / med["plain"] if med["plain"] else float("nan")
# Each round's two runs, one after the other: their ratio, then the median.
rounds = sorted({r["round"] for r in rows})
paired = [
    next(r["iops"] for r in rows if r["round"] == k and r["config"] == "metrics")
    / next(r["iops"] for r in rows if r["round"] == k and r["config"] == "plain")
    for k in rounds
]
doc = {
    "conditions": {"jobs": int(sys.argv[3]), "runtime_s": int(sys.argv[4]), "filesize": sys.argv[5],
                   "block_size": "8KiB", "scrape_interval_s": 1},
    "results": rows,
    "median_iops": med,
    "metrics_over_plain": ratio,
    "paired_ratios": paired,
    "paired_ratio_median": statistics.median(paired),
}
if want_json:
    print(json.dumps(doc))
else:
    print(f"{'config':<8} {'median IOPS':>12}  runs")
    for c in ("plain", "metrics"):
        print(f"{c:<8} {med[c]:>12.0f}  " + " ".join(f"{v:.0f}" for v in by[c]))
    print(f"with --metrics and a scrape a second / without: medians {ratio:.3f}; "
          f"per round {' '.join(f'{p:.2f}' for p in paired)} (median {statistics.median(paired):.3f})")
EOF
