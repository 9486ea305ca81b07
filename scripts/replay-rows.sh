#!/usr/bin/env bash
# Prints the hits of every replay row that work on replay's speed must keep equal
# (multiarc's rows and the page ARC, on P6, OLTP and CloudPhysics), one line
# per row: trace, policy, capacity in blocks, hits. Compare two builds with
#   scripts/replay-rows.sh BEFORE_BINARY > before.txt
#   scripts/replay-rows.sh AFTER_BINARY > after.txt; diff before.txt after.txt
# Traces come from ../shared/traces (or $TRACES).
set -euo pipefail
bin=${1:?usage: replay-rows.sh MULTIARC_BINARY}
here=$(cd "$(dirname "$0")/.." && pwd)
traces=${TRACES:-$here/../shared/traces}
[ -d "$traces" ] || { echo "replay-rows.sh: no traces at $traces (set TRACES)" >&2; exit 1; }
policies=multiarc,multiarc-eager,multiarc-s3arc,arc
rows() {
    local trace=$1
    shift
    "$bin" replay "$trace" --policy "$policies" "$@" --json 2>/dev/null |
        python3 -c 'import json, sys
d = json.load(sys.stdin)
for r in d["results"]:
    print(sys.argv[1], r["policy"], r["capacity_blocks"], r["hits"])' "$(basename "$trace")"
}
rows "$traces/arc/P6.lis.zst" --capacity 32768,131072
rows "$traces/arc/OLTP.lis.zst" --capacity 1000,2000,10000
rows "$traces/cloudphysics_io.csv"
