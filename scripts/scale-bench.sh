#!/usr/bin/env bash
# TPC-H at the scale users run, through multiarc and its peers: tpchgen's
# tables as Parquet on a three-node Garage (replication 3) on loopback,
# every client behind its own proxy that adds the same first-byte latency
# to every request and counts requests and bytes; then, pass by pass
# (cold, warm, the hot queries, a full scan of lineitem, the hot queries
# after it, a restart over the caches), rows interleaved within a pass:
#
#   - DataFusion 55 (the 22 queries) over CachedStore (memory; memory and
#     an L2), the plain S3 client with DataFusion's own caches, and foyer's
#     hybrid cache in CachedStore's shape (crates/multiarc-scale);
#   - DuckDB (the 22 queries) and pyarrow (Q1, Q6, Q14, the scan) reading the
#     tables as files through each bucket mount: multiarc mount (memory;
#     with an L2), mountpoint-s3 with its disk cache (--mountpoint-bin),
#     rclone mount --vfs-cache-mode full, s3fs -o use_cache.
#
#   scripts/scale-bench.sh [--quick | --sf N] [--latency MS] [--queries 1,6,...]
#       [--engines datafusion,duckdb,pyarrow] [--mounts multiarc,multiarc-l2,mountpoint,rclone,s3fs]
#       [--rows datafusion,multiarc,multiarc-l2,foyer-hybrid] [--mountpoint-bin PATH]
#       [--warm-rounds N] [--reclaim-after-scan] [--json] [--keep] [--out DIR]
#
# The warm pass runs --warm-rounds times (default 5), rows interleaved
# within each round; its figures are the medians of the rounds. The rows'
# order turns by one at each pass and round, so no row always runs first:
# with a fixed order, pyarrow's cold Q1 on this VM was 1.4-1.7x slower on
# the second row than on the first in 4 of 5 runs, whichever mount it was
# (its extra time mostly the kernel zeroing the engine's fresh pages).
#
# --quick is scale factor 0.1 with the budgets scaled alike (under 15
# minutes here). Budgets, the same for every cache: memory 160 MiB per
# unit of scale factor (at least 16 MiB: the hot queries' columns fit, a
# lineitem scan does not), local disk four times that. Each answer is
# compared with the uncached one (DataFusion: its plain-store row; DuckDB
# and pyarrow: a local copy of the tables). Writes DIR/results.jsonl,
# DIR/conditions.json, DIR/report.json, DIR/requests/ (each mount's
# request log: request, Unix time in ms, Range) and DIR/plots/*.png (default DIR:
# target/scale-bench); prints a table, or with --json the report. Needs
# garage (2.5.0), fuse3, rclone, s3fs, python3 (a venv with duckdb, pyarrow
# and matplotlib is made in target/scale-venv from PyPI). Progress on
# stderr.
#
# --reclaim-after-scan (root): before the mounts' hot queries after the
# scan, the kernel drops every clean page it caches (drop_caches), as
# memory pressure or a host's proactive reclaim would (this VM's host runs
# DAMON's pageout of file pages idle for about a minute, which does it at
# its own times: conditions.host_reclaim). The hot queries then show what
# each mount's own cache kept, not what the kernel's page cache did.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
helper=$root/scripts/scale-bench-helper.py

sf=1
latency=20
queries=$(seq -s, 1 22)
warm_rounds=5
engines=datafusion,duckdb,pyarrow
mounts=multiarc,multiarc-l2,mountpoint,rclone,s3fs
rows=datafusion,multiarc,multiarc-l2,foyer-hybrid
mountpoint_bin=${MOUNTPOINT_BIN:-}
# The wrapper built by hand (see bench/mountpoint-wrapper/Cargo.toml).
[ -z "$mountpoint_bin" ] && [ -x bench/mountpoint-wrapper/target/release/mountpoint-wrapper ] &&
  mountpoint_bin=$PWD/bench/mountpoint-wrapper/target/release/mountpoint-wrapper
json=0
keep=0
reclaim_after_scan=0
out=target/scale-bench
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) sf=0.1; shift ;;
    --sf) sf=$2; shift 2 ;;
    --latency) latency=$2; shift 2 ;;
    --queries) queries=$2; shift 2 ;;
    --engines) engines=$2; shift 2 ;;
    --mounts) mounts=$2; shift 2 ;;
    --rows) rows=$2; shift 2 ;;
    --mountpoint-bin) mountpoint_bin=$2; shift 2 ;;
    --warm-rounds) warm_rounds=$2; shift 2 ;;
    --json) json=1; shift ;;
    --reclaim-after-scan) reclaim_after_scan=1; shift ;;
    --keep) keep=1; shift ;;
    --out) out=$2; shift 2 ;;
    *) echo "scale-bench: unknown argument $1" >&2; exit 2 ;;
  esac
done
say() { printf 'scale-bench: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }
has() { [[ ",$1," == *,"$2",* ]]; }
# The host's proactive reclaim, if DAMON runs one: its action, and the
# least age (in aggregation intervals) of the regions it acts on.
host_reclaim() {
  local d=/sys/kernel/mm/damon/admin/kdamonds out=()
  for k in "$d"/[0-9]*; do
    [ "$(cat "$k/state" 2>/dev/null)" = on ] || continue
    for s in "$k"/contexts/*/schemes/[0-9]*; do
      # The scheme's own context's aggregation interval.
      local ctx=${s%/schemes/*}
      out+=("DAMON $(cat "$s/action") of regions aged >= $(cat "$s/access_pattern/age/min") x $(($(cat "$ctx/monitoring_attrs/intervals/aggr_us") / 1000)) ms")
    done
  done
  [ ${#out[@]} -gt 0 ] && (IFS=';'; echo "${out[*]}") || echo none
}
# rclone refuses a custom CA bundle variable it cannot apply to plain HTTP.
rclone() { env -u AWS_CA_BUNDLE rclone "$@"; }
python3 -c "import sys; f=float('$sf'); sys.exit(0 if 0 < f <= 100 else 1)" || die "--sf $sf: from above 0 to 100"
[[ "$latency" =~ ^[0-9]+$ ]] || die "--latency $latency: whole milliseconds"
[[ "$warm_rounds" =~ ^[0-9]+$ ]] && [ "$warm_rounds" -ge 1 ] && [ "$warm_rounds" -le 100 ] ||
  die "--warm-rounds $warm_rounds: a whole number from 1 to 100"
[ "$reclaim_after_scan" = 0 ] || [ -w /proc/sys/vm/drop_caches ] ||
  die "--reclaim-after-scan: needs root (writes /proc/sys/vm/drop_caches)"

mib=$(python3 -c "print(max(16, int(160 * float('$sf'))))")
memory=$((mib << 20))
disk=$((4 * memory))
mkdir -p "$out"
out=$(realpath "$out")
work=$(mktemp -d "$root/target/scale-bench-work.XXXXXX")
results=$out/results.jsonl
: >"$results"
not_run=()
pids=()
mnts=()
cleanup() {
  for m in "${mnts[@]}"; do fusermount3 -uz "$m" 2>/dev/null || true; done
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  [ -n "${GARAGE_PIDS:-}" ] && kill $GARAGE_PIDS 2>/dev/null || true
  if [ "$keep" = 0 ]; then rm -rf "$work"; else say "kept $work"; fi
}
trap cleanup EXIT

say "building multiarc and multiarc-scale (release)"
cargo build --release -q -p multiarc-cli -p multiarc-scale
bin=$root/target/release/multiarc
scale=$root/target/release/multiarc-scale

py=python3
if has "$engines" duckdb || has "$engines" pyarrow; then
  venv=$root/target/scale-venv
  if ! "$venv/bin/python" -c "import duckdb, pyarrow, matplotlib" 2>/dev/null; then
    say "making the Python environment $venv (duckdb, pyarrow, matplotlib from PyPI)"
    python3 -m venv "$venv"
    # `python -m pip`: the venv's own pip script names the directory it was
    # made in, and breaks when the checkout (or target/) moves.
    "$venv/bin/python" -m pip install -q "duckdb==2.0.1" "pyarrow==26.0.1" matplotlib
  fi
  py=$venv/bin/python
fi

say "starting a three-node Garage (replication 3)"
eval "$(scripts/garage-up.sh --nodes 3 "$work/garage" tpch)"
prefix=tpch/sf$sf
say "generating TPC-H at scale factor $sf into s3://tpch/$prefix"
"$scale" gen --endpoint "$GARAGE_ENDPOINT" --bucket tpch --prefix "$prefix" --sf "$sf" \
  --tmp "$work/gen" --json >"$work/gen.json"

# A proxy per client: its own counts, the same latency. `start_proxy NAME`
# sets proxy_port.
start_proxy() {
  proxy_port=$("$py" "$helper" freeport)
  "$py" "$helper" proxy "$proxy_port" "${GARAGE_ENDPOINT##*:}" "$latency" "$work/$1.counts" \
    >"$work/proxy-$1.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 50); do [ -s "$work/$1.counts" ] && break; sleep 0.1; done
}
direct_port=${GARAGE_ENDPOINT##*:}
rtt_direct=$("$py" "$helper" rtt "$direct_port" 20)
rtt_proxy=

if has "$engines" datafusion; then
  start_proxy datafusion
  port=$proxy_port
  rtt_proxy=$("$py" "$helper" rtt "$port" 10)
  say "DataFusion rows $rows: round trip ${rtt_direct} ms direct, ${rtt_proxy} ms through the proxy"
  "$scale" datafusion --endpoint "http://127.0.0.1:$port" --bucket tpch --prefix "$prefix" \
    --memory "$memory" --disk "$disk" --disk-dir "$work/disks" --rows "$rows" --queries "$queries" \
    --warm-rounds "$warm_rounds" --json >"$work/datafusion.json" || say "DataFusion: some answers were wrong (see the report)"
  "$py" -c "
import json,sys
for r in json.load(open('$work/datafusion.json'))['results']:
    print(json.dumps(r))" >>"$results"
  rm -rf "$work/disks"   # the rows' L2 and disk caches (reserved at full size)
fi

# --- the mounts ---------------------------------------------------------------
mount_names=()
for m in ${mounts//,/ }; do
  case $m in
    multiarc|multiarc-l2) mount_names+=("$m") ;;
    mountpoint)
      if [ -n "$mountpoint_bin" ] && [ -x "$mountpoint_bin" ]; then mount_names+=("$m")
      else not_run+=("{\"row\":\"mountpoint\",\"reason\":\"no mountpoint-s3 wrapper binary (--mountpoint-bin; build bench/mountpoint-wrapper)\"}"); fi ;;
    rclone) command -v rclone >/dev/null && mount_names+=("$m") || not_run+=("{\"row\":\"rclone\",\"reason\":\"rclone not installed\"}") ;;
    s3fs) command -v s3fs >/dev/null && mount_names+=("$m") || not_run+=("{\"row\":\"s3fs\",\"reason\":\"s3fs not installed\"}") ;;
    *) die "unknown mount $m" ;;
  esac
done
printf '%s:%s\n' "$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY" >"$work/s3fs.passwd"
chmod 600 "$work/s3fs.passwd"
declare -A port_of pid_of flags_of
for m in "${mount_names[@]}"; do
  start_proxy "mount-$m"
  port_of[$m]=$proxy_port
  [ -n "$rtt_proxy" ] || rtt_proxy=$("$py" "$helper" rtt "$proxy_port" 10)
done

mount_one() { # NAME
  local m=$1 mnt=$work/mnt-$1 ep="http://127.0.0.1:${port_of[$1]}"
  mkdir -p "$mnt" "$work/cache-$m"
  case $m in
    multiarc)
      flags_of[$m]="--max-bytes $memory --read-only --metadata-ttl 60s --threads 8"
      "$bin" mount "s3://tpch/$prefix" "$mnt" --endpoint "$ep" ${flags_of[$m]} --log "$work/$m.log" ;;
    multiarc-l2)
      flags_of[$m]="--max-bytes $memory --l2 $work/cache-$m/l2 --l2-bytes $disk --read-only --metadata-ttl 60s --threads 8"
      "$bin" mount "s3://tpch/$prefix" "$mnt" --endpoint "$ep" ${flags_of[$m]} --log "$work/$m.log" ;;
    rclone)
      flags_of[$m]="--vfs-cache-mode full --vfs-cache-max-size ${disk}B --read-only --dir-cache-time 60s"
      rclone mount ":s3:tpch/$prefix" "$mnt" --s3-provider Other --s3-env-auth --s3-region garage \
        --s3-endpoint "$ep" --cache-dir "$work/cache-$m" ${flags_of[$m]} --daemon \
        --log-file "$work/$m.log" ;;
    s3fs)
      flags_of[$m]="-o ro -o use_cache=$work/cache-$m -o use_path_request_style -o endpoint=garage"
      s3fs "tpch:/$prefix" "$mnt" -o passwd_file="$work/s3fs.passwd" -o url="$ep" ${flags_of[$m]} \
        -o logfile="$work/$m.log" ;;
    mountpoint)
      # mountpoint's memory target cannot go below 512 MiB (its minimum).
      flags_of[$m]="--cache-dir $work/cache-$m --cache-bytes $disk --metadata-ttl-secs 60 --read-only --memory-target-bytes $((memory > 512 << 20 ? memory : 512 << 20))"
      "$mountpoint_bin" --endpoint "$ep" --bucket tpch --prefix "$prefix/" --mountpoint "$mnt" \
        ${flags_of[$m]} >"$work/$m.log" 2>&1 ;;
  esac
  for _ in $(seq 200); do
    [ -d "$mnt/lineitem" ] && break
    sleep 0.1
  done
  [ -d "$mnt/lineitem" ] || die "$m did not mount: $(tail -3 "$work/$m.log")"
  mnts+=("$mnt")
  # The oldest process naming the mount point is its daemon: anything
  # newer that names it (a shell watching the mount, a reader) is not.
  # The name must end there: mnt-multiarc is a prefix of mnt-multiarc-l2,
  # whose older daemon a remount of the memory-only mount would find.
  pid_of[$m]=$(pgrep -o -f -- "$mnt( |\$)" || echo 0)
}
unmount_one() {
  fusermount3 -u "$work/mnt-$1" 2>/dev/null || fusermount3 -uz "$work/mnt-$1" 2>/dev/null || true
  for _ in $(seq 100); do grep -q " $work/mnt-$1 " /proc/self/mountinfo || break; sleep 0.1; done
  # The daemon may still be at work once the mount point is gone (multiarc
  # writes what its memory held to its L2: seconds at scale factor 10): a
  # remount waits for it to exit, as a service manager's restart does.
  local pid=${pid_of[$1]:-0} tenths=0
  while [ "$pid" != 0 ] && kill -0 "$pid" 2>/dev/null; do
    if [ "$tenths" -ge 3000 ]; then
      say "$1: its daemon ($pid) still runs 300 s after the unmount; going on"
      break
    fi
    [ "$tenths" = 50 ] && say "$1: waiting for its daemon ($pid) to exit"
    sleep 0.1
    tenths=$((tenths + 1))
  done
}

if [ ${#mount_names[@]} -gt 0 ] && { has "$engines" duckdb || has "$engines" pyarrow; }; then
  say "a local copy of the tables for the reference answers"
  mkdir -p "$work/local"
  rclone copy ":s3:tpch/$prefix" "$work/local" --s3-provider Other --s3-env-auth \
    --s3-region garage --s3-endpoint "$GARAGE_ENDPOINT" 2>"$work/rclone-copy.log"
  for engine in duckdb pyarrow; do
    has "$engines" "$engine" || continue
    "$py" "$helper" engine "$engine" --data "$work/local" --queries-dir crates/multiarc-scale/queries \
      --queries "$queries" --pass cold --row local --reference "$work/reference.json" \
      --write-reference --out "$work/reference.jsonl"
    "$py" "$helper" engine "$engine" --data "$work/local" --queries-dir crates/multiarc-scale/queries \
      --queries "$queries" --pass scan --row local --reference "$work/reference.json" \
      --write-reference --out "$work/reference.jsonl"
    for m in "${mount_names[@]}"; do rm -rf "$work/cache-$m"; mount_one "$m"; done
    turn=0   # which row runs first: turns by one at each pass and round
    for pass in $("$py" "$helper" passes); do
      if [ "$pass" = remount ]; then
        for m in "${mount_names[@]}"; do unmount_one "$m"; mount_one "$m"; done
      fi
      if [ "$pass" = after_scan ] && [ "$reclaim_after_scan" = 1 ]; then
        say "$engine: the kernel drops its clean pages (--reclaim-after-scan)"
        sync
        echo 1 >/proc/sys/vm/drop_caches
      fi
      rounds=1
      [ "$pass" = warm ] && rounds=$warm_rounds
      for ((round = 0; round < rounds; round++)); do
        n=${#mount_names[@]}
        for ((i = 0; i < n; i++)); do
          m=${mount_names[$(((turn + i) % n))]}
          say "$engine, pass $pass$([ "$rounds" -gt 1 ] && echo ", round $((round + 1))"): $m"
          extra=()
          [[ $m == multiarc* ]] && extra=(--mnt "$work/mnt-$m")
          "$py" "$helper" engine "$engine" --data "$work/mnt-$m" --queries-dir crates/multiarc-scale/queries \
            --queries "$queries" --pass "$pass" --round "$round" --row "$m" --counts "$work/mount-$m.counts" \
            --pid "${pid_of[$m]}" --reference "$work/reference.json" --out "$results" "${extra[@]}"
        done
        turn=$((turn + 1))
      done
    done
    for m in "${mount_names[@]}"; do unmount_one "$m"; rm -rf "$work/cache-$m"; done
  done
fi

# --- the report ---------------------------------------------------------------
{
  printf '{"scale_factor": %s, "latency_ms": %s, "rtt_direct_ms": %s, "rtt_proxy_ms": %s,' "$sf" "$latency" "$rtt_direct" "${rtt_proxy:-null}"
  printf ' "memory_budget_bytes": %s, "disk_budget_bytes": %s, "warm_rounds": %s,' "$memory" "$disk" "$warm_rounds"
  printf ' "reclaim_after_scan": %s, "host_reclaim": "%s",' \
    "$([ "$reclaim_after_scan" = 1 ] && echo true || echo false)" "$(host_reclaim)"
  printf ' "garage": "%s", "garage_nodes": 3, "replication": 3,' "$(garage --version 2>/dev/null | head -1 || echo unknown)"
  printf ' "data": %s,' "$(cat "$work/gen.json")"
  printf ' "peers": {"rclone": "%s", "s3fs": "%s", "mountpoint": "%s", "duckdb": "%s", "pyarrow": "%s"},' \
    "$(rclone version 2>/dev/null | head -1 | awk '{print $2}')" \
    "$(s3fs --version 2>/dev/null | head -1 | grep -o 'V[0-9][0-9.]*' | head -1)" \
    "$([ -n "$mountpoint_bin" ] && echo "mountpoint-s3-fs 0.11.0 (bench/mountpoint-wrapper)" || echo none)" \
    "$("$py" -c 'import duckdb; print(duckdb.__version__)' 2>/dev/null || echo none)" \
    "$("$py" -c 'import pyarrow; print(pyarrow.__version__)' 2>/dev/null || echo none)"
  printf ' "flags": {'
  first=1
  for m in "${!flags_of[@]}"; do
    [ $first = 1 ] || printf ','
    first=0
    printf '"%s": "%s"' "$m" "${flags_of[$m]}"
  done
  printf '}, "rows_not_run": [%s]}\n' "$(IFS=,; echo "${not_run[*]}")"
} >"$out/conditions.json"

# Each mount's request log (what the restart target checks GETs against).
rm -rf "$out/requests"
mkdir -p "$out/requests"
for f in "$work"/mount-*.counts.log; do [ -e "$f" ] && cp "$f" "$out/requests/"; done
"$py" "$helper" report "$out/results.jsonl" "$out/conditions.json" --json --plots "$out/plots" >"$out/report.json"
if [ "$json" = 1 ]; then
  cat "$out/report.json"
else
  "$py" "$helper" report "$out/results.jsonl" "$out/conditions.json"
  say "report: $out/report.json, plots in $out/plots"
fi
