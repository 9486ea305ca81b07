#!/usr/bin/env bash
# One short run of every bench workload and tool with the binary BIN, each
# one JSON document in OUT/NAME.json (its stderr in OUT/NAME.err): a
# before/after of a change that must keep every row (compare two runs with
# scripts/compare-workloads.py OUT_BEFORE OUT_AFTER).
#
#   scripts/every-workload.sh BIN OUT
#
# The replay row reads ../shared/traces/arc/P6.lis.zst (beside the
# checkout); the l2 workload puts its files in OUT (a disk filesystem).
set -u
cd "$(dirname "$0")/.."
[ $# -eq 2 ] || { echo "usage: scripts/every-workload.sh BIN OUT" >&2; exit 2; }
BIN=$(realpath "$1"); OUT=$(realpath -m "$2"); mkdir -p "$OUT"
SH=$PWD/../shared/traces
run() {
  local name=$1 start=$SECONDS rc=0
  shift
  echo "every-workload: $name: multiarc $*" >&2
  "$BIN" "$@" --json >"$OUT/$name.json" 2>"$OUT/$name.err" || rc=$?
  echo "every-workload: $name: exit $rc after $((SECONDS - start)) s" >&2
}
run main bench
run randrw bench randrw --threads 1,2 --repeat 1
run randread bench randread --threads 1,2 --repeat 1
run rangelock bench rangelock --threads 1,2 --repeat 1
run l2 bench l2 --threads 1,2 --repeat 1 --dir "$OUT"
run async-hit bench async-hit --repeat 3
run object bench object --tasks 1,2 --reps 1
run lockbench lockbench --threads 1,2,4 --seconds 1
run replay replay $SH/arc/P6.lis.zst --policy multiarc,arc,lru --capacity 8192
run poison poison
run scan scan
