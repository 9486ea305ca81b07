#!/usr/bin/env bash
# The bucket mounts side by side: one bucket on a one-node Garage on
# loopback, behind a proxy that adds the same latency to every request,
# mounted in turn by multiarc (memory only), multiarc with an L2 file,
# `rclone mount --vfs-cache-mode full` and s3fs (use_cache), each measured
# alike:
#   - sequential read of the large objects, cold (MB/s);
#   - fio random reads (8 KiB and 1 MiB; 1, 2 and 8 jobs), cold (a fresh
#     mount and empty caches) and warm (the file read whole first);
#   - a Parquet query with pyarrow (hot columns of hot.parquet): cold, warm,
#     then a full scan of big.parquet (larger than the cache), then the hot
#     query again, with the store requests each sent (the proxy's count;
#     for multiarc also the blocks read that memory did not hold and the
#     blocks read ahead, from its arcstats); 3 s pass after the scan, so
#     that rclone's cleaner (every 1 s here) enforces its cache size, and
#     then what each cache holds is read (multiarc's memory and L2 from
#     its arcstats, rclone's and s3fs's cache directories with du);
#     for multiarc + L2 also after a remount over the same L2;
#   - `ls -l` of a directory of many small objects (cold);
#   - the daemon's RSS (VmHWM and VmRSS from /proc at the end).
# Before every measured read the kernel's page cache of the file is dropped
# (fadvise DONTNEED, no root needed), so a warm figure is the daemon's cache.
#
#   scripts/bucket-bench.sh [--quick] [--latency MS] [--runtime S]
#       [--mounts multiarc,multiarc-l2,rclone,s3fs] [--metadata-ttl 60s]
#       [--json] [--keep] [--seq-only] [--random-only] [--buffered]
#       [--object-size SIZE] [--objects N] [--cache-bytes SIZE]
#       [--memory-cgroup]
#
# Needs garage (2.5.0; ~/.cargo/bin), rclone, s3fs, fio, python3 with pyarrow,
# fusermount3 and /dev/fuse. Builds the release multiarc. Prints a table on
# stdout (or with --json one JSON document); progress on stderr. The work
# directory (Garage's data, the caches, the L2) is under target/ on the
# checkout's disk, not tmpfs; it is removed at exit unless --keep.
# --seq-only measures only the cold sequential read (the other rows print -),
# over the large objects only (no small objects or Parquet files written).
# --random-only measures only the fio 8 KiB random reads (cold and warm).
# --object-size (e.g. 1GiB) and --objects set the large objects' size and
# count (default 2 x 16 MiB with --quick, else 4 x 256 MiB); fio reads the
# last one. Cold rows report the bytes the store sent per read.
# --memory-cgroup holds each mount daemon to the memory budget in a memory
# cgroup of its own (cgroup v2's memory.max or v1's memory.limit_in_bytes,
# under this script's own cgroup; needs root): the limit counts the page
# cache the daemon fills as well as its RSS, so a peer that serves its disk
# cache through the kernel's pages (s3fs, rclone) keeps no more of it in
# memory than multiarc may hold in its own. The limit is the budget plus
# 25% (the issue's allowance for RSS) and is in the JSON's conditions.
# --cache-bytes sets the memory budget (multiarc's --max-bytes, rclone's
# cache size; default 40 MiB with --quick, else 384 MiB).
# --buffered runs fio without O_DIRECT and keeps the file's pages between
# the whole read and the warm run: a warm figure is then the kernel's page
# cache wherever the mount keeps it, as an application that read the file
# before would find it (the page cache is multiarc's default; a binary
# from before, whose help lists --page-cache, is given that flag).
# MULTIARC_BIN=PATH uses that binary instead of building one. RCLONE=PATH
# uses that rclone instead of the one on PATH; its version is in the JSON's
# conditions. (rclone reads a size with no suffix as KiB: the budget is
# given in bytes with a B suffix.)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
helper=$root/scripts/bucket-bench-helper.py

quick=0
latency=20
runtime=""
mounts="multiarc,multiarc-l2,rclone,s3fs"
ttl=60s
json=0
keep=0
seq_only=0
random_only=0
buffered=0
object_size=""
objects=""
cache_arg=""
memory_cgroup=0
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1; shift ;;
    --latency) latency="$2"; shift 2 ;;
    --runtime) runtime="$2"; shift 2 ;;
    --mounts) mounts="$2"; shift 2 ;;
    --metadata-ttl) ttl="$2"; shift 2 ;;
    --json) json=1; shift ;;
    --keep) keep=1; shift ;;
    --seq-only) seq_only=1; shift ;;
    --random-only) random_only=1; shift ;;
    --buffered) buffered=1; shift ;;
    --object-size) object_size="$2"; shift 2 ;;
    --cache-bytes) cache_arg="$2"; shift 2 ;;
    --objects) objects="$2"; shift 2 ;;
    --memory-cgroup) memory_cgroup=1; shift ;;
    -h|--help) sed -n '2,58p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bucket-bench: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ "$latency" =~ ^[0-9]+$ ]] || { echo "bucket-bench: --latency wants whole milliseconds, got $latency" >&2; exit 2; }
for m in ${mounts//,/ }; do
  case "$m" in multiarc|multiarc-l2|rclone|s3fs) ;; *) echo "bucket-bench: unknown mount $m (multiarc, multiarc-l2, rclone, s3fs)" >&2; exit 2 ;; esac
done

if [ $quick = 1 ]; then
  large_n=2; large_size=$((16 << 20)); small_n=500
  hot_rows=50000; big_rows=200000          # hot.parquet ~14 MiB, big.parquet ~51 MiB
  cache_bytes=$((40 << 20)); l2_bytes=$((256 << 20))
  fio_jobs="1,2,8"; runtime=${runtime:-2}
else
  large_n=4; large_size=$((256 << 20)); small_n=10000
  hot_rows=400000; big_rows=2000000        # hot.parquet ~110 MiB, big.parquet ~530 MiB
  cache_bytes=$((384 << 20)); l2_bytes=$((2 << 30))
  fio_jobs="1,2,8"; runtime=${runtime:-10}
fi
# size FLAG VALUE: VALUE (like 16MiB or 1GiB) in bytes, or one line and exit 2.
size() {
  python3 -c '
import re, sys
m = re.fullmatch(r"(\d+)(B|KiB|MiB|GiB)?", sys.argv[2])
if not m or int(m[1]) == 0:
    sys.exit("bucket-bench: " + sys.argv[1] + " wants a size like 16MiB or 1GiB, got " + sys.argv[2])
print(int(m[1]) << {None: 0, "B": 0, "KiB": 10, "MiB": 20, "GiB": 30}[m[2]])' "$1" "$2"
}
if [ -n "$object_size" ]; then large_size=$(size --object-size "$object_size") || exit 2; fi
if [ -n "$cache_arg" ]; then cache_bytes=$(size --cache-bytes "$cache_arg") || exit 2; fi
if [ -n "$objects" ]; then
  [[ "$objects" =~ ^[1-9][0-9]*$ ]] || { echo "bucket-bench: --objects wants a count of 1 or more, got $objects" >&2; exit 2; }
  large_n=$objects
fi
cg_limit_bytes=$((cache_bytes + cache_bytes / 4))

say() { printf 'bucket-bench: %s\n' "$*" >&2; }
die() { printf 'bucket-bench: %s\n' "$*" >&2; exit 1; }

# --memory-cgroup: where the daemons' cgroups go, and the file that takes
# a limit and the one that takes a process, in this hierarchy.
cg_base="" cg_limit_file="" cg_procs_file=""
if [ $memory_cgroup = 1 ]; then
  if grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
    cg_base=/sys/fs/cgroup$(awk -F: '$1 == "0" { print $3 }' /proc/self/cgroup)
    cg_limit_file=memory.max cg_procs_file=cgroup.procs
    grep -qw memory "$cg_base/cgroup.subtree_control" 2>/dev/null ||
      echo +memory > "$cg_base/cgroup.subtree_control" 2>/dev/null ||
      die "--memory-cgroup: cannot enable the memory controller under $cg_base (a cgroup v2 with processes of its own cannot; run from a leaf's parent or as root)"
  elif [ -d /sys/fs/cgroup/memory ]; then
    cg_base=/sys/fs/cgroup/memory$(awk -F: '$2 == "memory" { print $3 }' /proc/self/cgroup)
    cg_limit_file=memory.limit_in_bytes cg_procs_file=cgroup.procs
  else
    die "--memory-cgroup: this machine has no memory cgroup (neither /sys/fs/cgroup/cgroup.controllers with memory nor /sys/fs/cgroup/memory)"
  fi
  [ -w "$cg_base" ] || die "--memory-cgroup: cannot make a cgroup under $cg_base (needs root)"
fi

garage=$(command -v garage || echo "${CARGO_HOME:-$HOME/.cargo}/bin/garage")
[ -x "$garage" ] || die "garage is not installed (cargo install --locked garage@2.5.0 --no-default-features --features bundled-libs,sqlite; .ci/run does it)"
for tool in fio python3 fusermount3; do
  command -v "$tool" >/dev/null || die "$tool is not installed"
done
rclone=${RCLONE:-rclone}
[[ ",$mounts," == *,rclone,* ]] && { command -v "$rclone" >/dev/null || die "rclone is not installed (apt-get install rclone; or RCLONE=PATH)"; }
rclone_version=$("$rclone" version 2>/dev/null | head -1 | awk '{print $2}' || true)
[[ ",$mounts," == *,s3fs,* ]] && { command -v s3fs >/dev/null || die "s3fs is not installed (apt-get install s3fs)"; }
python3 -c 'import pyarrow' 2>/dev/null || die "python3 has no pyarrow (pip install pyarrow)"
[ -e /dev/fuse ] || die "no /dev/fuse on this machine"

if [ -n "${MULTIARC_BIN:-}" ]; then
  bin=$MULTIARC_BIN
else
  say "building the release binary"
  cargo build --release -q -p multiarc-cli
  bin=$root/target/release/multiarc
fi

mkdir -p "$root/target"
work=$(mktemp -d "$root/target/bucket-bench.XXXXXX")
mnt=$work/mnt
mkdir -p "$mnt" "$work/data"
pids=()
daemon_pid=""
cleanup() {
  set +e
  fusermount3 -u "$mnt" 2>/dev/null || fusermount3 -uz "$mnt" 2>/dev/null
  [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
  [ -n "$cg_base" ] && rmdir "$cg_base"/bucket-bench-$$-* 2>/dev/null
  if [ $keep = 0 ]; then rm -rf "$work"; else say "kept $work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- Garage, one node (scripts/garage-up.sh: a bucket and a key) ---------
proxy_port=$(python3 "$helper" freeport)
say "starting garage"
garage_env=$("$root/scripts/garage-up.sh" "$work/garage" bench) || die "garage did not start (scripts/garage-up.sh above)"
eval "$garage_env"
pids+=("$GARAGE_PID")
s3_port=${GARAGE_ENDPOINT##*:}
key_id=$AWS_ACCESS_KEY_ID secret=$AWS_SECRET_ACCESS_KEY
unset AWS_CA_BUNDLE AWS_PROFILE AWS_SESSION_TOKEN || true
printf '%s:%s\n' "$key_id" "$secret" > "$work/s3fs.passwd"; chmod 600 "$work/s3fs.passwd"

# --- the data set (uploaded straight to Garage, not through the proxy) --
[ $seq_only = 1 ] && small_n=0
say "writing the data set: $large_n x $((large_size >> 20)) MiB, $small_n small objects, two Parquet files"
mkdir -p "$work/data/large" "$work/data/small" "$work/data/parquet"
for i in $(seq 0 $((large_n - 1))); do
  head -c "$large_size" /dev/urandom > "$work/data/large/obj$i"
done
python3 - "$work/data/small" "$small_n" <<'EOF'
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    with open(os.path.join(d, f"f{i:05d}"), "wb") as f:
        f.write(os.urandom(1024))
EOF
[ $seq_only = 1 ] || python3 "$helper" parquet "$work/data/parquet" "$hot_rows" "$big_rows"
rc() { env -u AWS_CA_BUNDLE "$rclone" --s3-provider Other --s3-env-auth --s3-region garage "$@"; }
say "uploading with rclone"
rc --s3-endpoint "http://127.0.0.1:$s3_port" copy --transfers 16 --checkers 16 \
  "$work/data" :s3:bench/ 2>"$work/rclone-upload.log" || die "upload failed: $(tail -3 "$work/rclone-upload.log")"
hot_size=$(stat -c %s "$work/data/parquet/hot.parquet" 2>/dev/null || echo 0)
big_size=$(stat -c %s "$work/data/parquet/big.parquet" 2>/dev/null || echo 0)
rm -rf "$work/data"

# --- the latency proxy ---------------------------------------------------
# It counts the requests in $count_file and logs each one's request line
# and Range in $count_file.log (with the Parquet steps marked: see --keep).
count_file=$work/requests
python3 "$helper" proxy "$proxy_port" "$s3_port" "$latency" "$count_file" &
pids+=($!)
for _ in $(seq 50); do [ -s "$count_file" ] && break; sleep 0.1; done
rtt_direct=$(python3 "$helper" rtt "$s3_port" 30)
rtt_proxy=$(python3 "$helper" rtt "$proxy_port" 10)
say "round trip: ${rtt_direct} ms to Garage, ${rtt_proxy} ms through the proxy (+${latency} ms a request)"
endpoint=http://127.0.0.1:$proxy_port
# the requests and bytes so far (the proxy saves its counts every 50 ms)
requests() { sleep 0.1; python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["requests"])' "$count_file"; }
store_bytes() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["bytes"])' "$count_file"; }

# --- mounting --------------------------------------------------------------
mounted() { grep -q " $mnt " /proc/mounts; }
unmount() {
  if mounted; then fusermount3 -u "$mnt" 2>/dev/null || { sleep 1; fusermount3 -uz "$mnt"; }; fi
  if [ -n "$daemon_pid" ]; then
    for _ in $(seq 50); do kill -0 "$daemon_pid" 2>/dev/null || break; sleep 0.1; done
    kill "$daemon_pid" 2>/dev/null || true
    wait "$daemon_pid" 2>/dev/null || true
    daemon_pid=""
  fi
}
# a directory every mount shows once it serves the bucket
ready_dir=parquet; [ $seq_only = 1 ] && ready_dir=large
page_cache=()
[ $buffered = 1 ] && "$bin" mount --help 2>/dev/null | grep -q -- --page-cache && page_cache=(--page-cache)
# in_budget KIND CMD... &: becomes CMD (the same process, so $! is the
# daemon's pid), in KIND's memory cgroup with --memory-cgroup. Only for a
# background job: it execs.
in_budget() {
  local kind=$1; shift
  [ -n "$cg_base" ] || exec "$@"
  local cg=$cg_base/bucket-bench-$$-$kind
  if [ ! -d "$cg" ]; then
    mkdir "$cg" || die "--memory-cgroup: cannot make $cg"
    echo "$cg_limit_bytes" > "$cg/$cg_limit_file" || die "--memory-cgroup: cannot set $cg/$cg_limit_file"
  fi
  echo "$BASHPID" > "$cg/$cg_procs_file" || die "--memory-cgroup: cannot move a process into $cg"
  exec "$@"
}
# mount KIND [keep]: a fresh mount (caches emptied unless "keep")
mount_it() {
  local kind=$1 keepcache=${2:-}
  unmount
  case "$kind" in
    multiarc)
      in_budget "$kind" "$bin" mount s3://bench "$mnt" --endpoint "$endpoint" --region garage --read-only \
        --max-bytes "$cache_bytes" --metadata-ttl "$ttl" "${page_cache[@]}" --foreground >>"$work/$kind.log" 2>&1 &
      ;;
    multiarc-l2)
      [ -z "$keepcache" ] && rm -f "$work/l2"
      in_budget "$kind" "$bin" mount s3://bench "$mnt" --endpoint "$endpoint" --region garage --read-only \
        --max-bytes "$cache_bytes" --metadata-ttl "$ttl" --l2 "$work/l2" --l2-bytes "$l2_bytes" \
        "${page_cache[@]}" --foreground >>"$work/$kind.log" 2>&1 &
      ;;
    rclone)
      [ -z "$keepcache" ] && rm -rf "$work/rclone-cache"
      in_budget "$kind" env -u AWS_CA_BUNDLE "$rclone" mount :s3:bench "$mnt" --s3-provider Other --s3-env-auth \
        --s3-region garage --s3-endpoint "$endpoint" --read-only --vfs-cache-mode full \
        --cache-dir "$work/rclone-cache" --vfs-cache-max-size "${cache_bytes}B" \
        --vfs-cache-poll-interval 1s --log-level INFO >>"$work/$kind.log" 2>&1 &
      ;;
    s3fs)
      [ -z "$keepcache" ] && rm -rf "$work/s3fs-cache"
      mkdir -p "$work/s3fs-cache"
      in_budget "$kind" s3fs bench "$mnt" -f -o ro -o passwd_file="$work/s3fs.passwd" -o url="$endpoint" \
        -o use_path_request_style -o endpoint=garage -o use_cache="$work/s3fs-cache" \
        -o logfile="$work/s3fs-daemon.log" \
        >>"$work/$kind.log" 2>&1 &
      ;;
  esac
  daemon_pid=$!
  for _ in $(seq 300); do
    mounted && [ -e "$mnt/$ready_dir" ] && return 0
    kill -0 "$daemon_pid" 2>/dev/null || die "$kind exited at mount: $(tail -3 "$work/$kind.log")"
    sleep 0.1
  done
  die "$kind did not mount within 30 s: $(tail -3 "$work/$kind.log")"
}
dontneed() { python3 "$helper" dontneed "$@" 2>/dev/null || true; }
rss_kib() { awk -v k="$2" '$1 == k":" { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0; }

# fio job on FILE: prints "IOPS MB/s"; direct I/O where the mount takes it
fio_direct=1
fio_run() {
  local file=$1 bs=$2 jobs=$3 out
  out=$(fio --name=r --filename="$file" --rw=randread --bs="$bs" --numjobs="$jobs" \
    --direct="$fio_direct" --invalidate=0 --ioengine=psync --time_based --runtime="$runtime" \
    --group_reporting --output-format=json 2>>"$work/fio.log") || return 1
  python3 -c 'import json,sys; r=json.load(sys.stdin)["jobs"][0]["read"]; print("%.0f %.1f" % (r["iops"], r["bw_bytes"]/1e6))' <<<"$out"
}

results=$work/results.jsonl
: > "$results"
emit() { printf '%s\n' "$1" >> "$results"; }

for kind in ${mounts//,/ }; do
  say "== $kind"
  # sequential read, cold
  if [ $random_only = 0 ]; then
  mount_it "$kind"
  files=()
  for i in $(seq 0 $((large_n - 1))); do files+=("$mnt/large/obj$i"); done
  r0=$(requests); t0=$(date +%s.%N)
  cat "${files[@]}" > /dev/null
  t1=$(date +%s.%N); r1=$(requests)
  seq_mbs=$(python3 -c "print(round($large_n*$large_size/1e6/($t1-$t0),1))")
  say "$kind: sequential cold $seq_mbs MB/s ($((r1 - r0)) requests)"
  emit "{\"mount\":\"$kind\",\"test\":\"seq_cold\",\"mb_s\":$seq_mbs,\"requests\":$((r1 - r0))}"
  fi
  if [ $seq_only = 1 ]; then unmount; continue; fi

  # does the mount take O_DIRECT?
  fio_direct=$((1 - buffered))
  mount_it "$kind"
  if [ $buffered = 0 ] && ! fio --name=probe --filename="$mnt/large/obj0" --rw=read --bs=4k --size=64k --direct=1 \
      --invalidate=0 --output-format=json >/dev/null 2>&1; then
    fio_direct=0
    say "$kind: O_DIRECT refused; fio runs buffered, page cache dropped before each run"
  fi
  emit "{\"mount\":\"$kind\",\"test\":\"direct_io\",\"direct\":$fio_direct}"

  # fio: cold (fresh mount, a file not read yet) and warm (read whole first)
  sizes="8k 1m"; [ $random_only = 1 ] && sizes=8k
  for bs in $sizes; do
    for j in ${fio_jobs//,/ }; do
      mount_it "$kind"
      f=$mnt/large/obj$((large_n - 1))
      r0=$(requests); b0=$(store_bytes)
      read -r iops mbs < <(fio_run "$f" "$bs" "$j" || echo "0 0")
      r1=$(requests); b1=$(store_bytes)
      per_read=$(python3 -c "print(round(($b1 - $b0) / max(1, $iops * $runtime)))")
      emit "{\"mount\":\"$kind\",\"test\":\"fio_cold\",\"bs\":\"$bs\",\"jobs\":$j,\"iops\":$iops,\"mb_s\":$mbs,\"requests\":$((r1 - r0)),\"store_bytes\":$((b1 - b0)),\"store_bytes_per_read\":$per_read}"
      say "$kind: fio $bs x$j cold: $((b1 - b0)) bytes from the store, $per_read a read"
      cat "$f" > /dev/null
      [ $buffered = 1 ] || dontneed "$f"
      r0=$(requests)
      read -r iops2 mbs2 < <(fio_run "$f" "$bs" "$j" || echo "0 0")
      r1=$(requests)
      emit "{\"mount\":\"$kind\",\"test\":\"fio_warm\",\"bs\":\"$bs\",\"jobs\":$j,\"iops\":$iops2,\"mb_s\":$mbs2,\"requests\":$((r1 - r0))}"
      say "$kind: fio $bs x$j cold $iops IOPS, warm $iops2 IOPS ($((r1 - r0)) requests warm)"
    done
  done

  if [ $random_only = 1 ]; then unmount; continue; fi
  # Parquet: hot query cold, warm, full scan of big, hot query again
  mount_it "$kind"
  hot=$mnt/parquet/hot.parquet big=$mnt/parquet/big.parquet
  # a counter of multiarc's arcstats ("" on other mounts)
  arcstat() { [ -r "$mnt/.multiarc/arcstats" ] && awk -v k="$1" '$1 == k { print $2 }' "$mnt/.multiarc/arcstats" || true; }
  pq_step() { # NAME FILE [COLS]
    local name=$1 file=$2 cols=${3:-} r0 r1 secs m0 m1 a0 a1 split=""
    dontneed "$file"
    printf '== %s %s\n' "$kind" "$name" >> "$count_file.log"
    m0=$(arcstat misses); a0=$(arcstat read_ahead_inserts)
    r0=$(requests); secs=$(python3 "$helper" query "$file" $cols); r1=$(requests)
    m1=$(arcstat misses); a1=$(arcstat read_ahead_inserts)
    # multiarc tells the blocks the query read that memory did not hold
    # (misses: from the store, or the L2) from the blocks its readahead
    # fetched ahead of any read (read_ahead_inserts); its statistics after
    # each step are kept in the work directory
    if [ -n "$m1" ]; then
      split=",\"memory_misses\":$((m1 - m0)),\"read_ahead_blocks\":$((a1 - a0))"
      cat "$mnt/.multiarc/arcstats" > "$work/arcstats.$kind.$name"
    fi
    emit "{\"mount\":\"$kind\",\"test\":\"parquet\",\"step\":\"$name\",\"seconds\":$secs,\"requests\":$((r1 - r0))$split}"
    say "$kind: parquet $name ${secs}s, $((r1 - r0)) requests${m1:+ ($((m1 - m0)) blocks read that memory did not hold, $((a1 - a0)) read ahead)}"
  }
  pq_step hot_cold "$hot" a,b
  pq_step hot_warm "$hot" a,b
  pq_step big_scan "$big"
  # rclone enforces --vfs-cache-max-size when its cleaner runs (every
  # --vfs-cache-poll-interval, 1 s here: below); give it that time, as a
  # mount in service has between queries. The other mounts evict as they go.
  sleep 3
  # what each cache holds after the scan, against its budget: multiarc's
  # memory (and L2), rclone's and s3fs's cache directories (allocated)
  case "$kind" in
    multiarc*) held=$(( $(arcstat size) + $(arcstat l2_size) )) ;;
    rclone) held=$(( $(du -sk "$work/rclone-cache/vfs" | cut -f1) * 1024 )) ;;
    s3fs) held=$(( $(du -sk "$work/s3fs-cache" | cut -f1) * 1024 )) ;;
  esac
  budget=$cache_bytes; [ "$kind" = multiarc-l2 ] && budget=$((cache_bytes + l2_bytes))
  [ "$kind" = s3fs ] && budget=0   # s3fs: no size limit set (use_cache only)
  emit "{\"mount\":\"$kind\",\"test\":\"cache_after_scan\",\"bytes\":$held,\"budget\":$budget}"
  say "$kind: the cache holds $((held >> 20)) MiB after the scan (budget $((budget >> 20)) MiB; 0: none set)"
  pq_step hot_after_scan "$hot" a,b
  if [ "$kind" = multiarc-l2 ]; then
    mount_it "$kind" keep
    pq_step hot_after_remount "$hot" a,b
  fi
  emit "{\"mount\":\"$kind\",\"test\":\"rss\",\"hwm_kib\":$(rss_kib "$daemon_pid" VmHWM),\"rss_kib\":$(rss_kib "$daemon_pid" VmRSS)}"

  # ls -l of the small objects, cold
  mount_it "$kind"
  r0=$(requests); t0=$(date +%s.%N)
  n=$(ls -l "$mnt/small" | tail -n +2 | wc -l)
  t1=$(date +%s.%N); r1=$(requests)
  [ "$n" = "$small_n" ] || say "$kind: ls -l listed $n entries, not $small_n"
  secs=$(python3 -c "print(round($t1-$t0,3))")
  emit "{\"mount\":\"$kind\",\"test\":\"ls\",\"seconds\":$secs,\"entries\":$n,\"requests\":$((r1 - r0))}"
  say "$kind: ls -l of $n objects ${secs}s ($((r1 - r0)) requests)"
  unmount
done

meta=$(printf '{"quick":%s,"latency_ms":%s,"rtt_direct_ms":%s,"rtt_proxy_ms":%s,"large":[%s,%s],"small":%s,"hot_parquet_bytes":%s,"big_parquet_bytes":%s,"cache_bytes":%s,"l2_bytes":%s,"runtime_s":%s,"metadata_ttl":"%s","buffered":%s,"memory_cgroup_limit_bytes":%s,"cpus":%s,"loadavg":"%s","rclone":"%s"}' \
  "$quick" "$latency" "$rtt_direct" "$rtt_proxy" "$large_n" "$large_size" "$small_n" "$hot_size" "$big_size" \
  "$cache_bytes" "$l2_bytes" "$runtime" "$ttl" "$buffered" "$([ -n "$cg_base" ] && echo "$cg_limit_bytes" || echo null)" "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)" "$rclone_version")
python3 - "$results" "$json" "$meta" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
meta = json.loads(sys.argv[3])
if sys.argv[2] == "1":
    print(json.dumps({"conditions": meta, "results": rows}))
    sys.exit(0)
mounts = list(dict.fromkeys(r["mount"] for r in rows))
def get(m, **k):
    for r in rows:
        if r["mount"] == m and all(r.get(a) == b for a, b in k.items()):
            return r
    return None
lines = []
def row(label, f):
    cells = []
    for m in mounts:
        try:
            cells.append(f(m))
        except (TypeError, KeyError):
            cells.append("-")
    lines.append("| " + label + " | " + " | ".join(cells) + " |")
print(f"latency {meta['latency_ms']} ms a request (round trip {meta['rtt_direct_ms']} ms direct, "
      f"{meta['rtt_proxy_ms']} ms through the proxy); large {meta['large'][0]} x {meta['large'][1] >> 20} MiB; "
      f"cache {meta['cache_bytes'] >> 20} MiB; fio {meta['runtime_s']} s a run; quick={meta['quick']}")
print()
print("| | " + " | ".join(mounts) + " |")
print("|---|" + "---|" * len(mounts))
row("sequential cold, MB/s", lambda m: f"{get(m, test='seq_cold')['mb_s']:.1f}")
row("fio O_DIRECT", lambda m: "yes" if get(m, test="direct_io")["direct"] else "no (buffered)")
for t in ("fio_cold", "fio_warm"):
    for bs in ("8k", "1m"):
        for j in (1, 2, 8):
            unit = "IOPS" if bs == "8k" else "MB/s"
            key = "iops" if bs == "8k" else "mb_s"
            row(f"{t.split('_')[1]} random {bs} x{j}, {unit}",
                lambda m, t=t, bs=bs, j=j, key=key: f"{get(m, test=t, bs=bs, jobs=j)[key]:.0f}"
                if key == "iops" else f"{get(m, test=t, bs=bs, jobs=j)[key]:.1f}")
for bs in ("8k", "1m"):
    for j in (1, 2, 8):
        row(f"cold random {bs} x{j}: store bytes a read",
            lambda m, bs=bs, j=j: f"{get(m, test='fio_cold', bs=bs, jobs=j)['store_bytes_per_read']:,}")
for step in ("hot_cold", "hot_warm", "big_scan", "hot_after_scan", "hot_after_remount"):
    row(f"parquet {step.replace('_', ' ')}: s (requests)",
        lambda m, step=step: "%.3f (%d)" % (get(m, test="parquet", step=step)["seconds"],
                                            get(m, test="parquet", step=step)["requests"]))
    row(f"parquet {step.replace('_', ' ')}: multiarc blocks read not in memory / read ahead",
        lambda m, step=step: "%d / %d" % (get(m, test="parquet", step=step)["memory_misses"],
                                          get(m, test="parquet", step=step)["read_ahead_blocks"]))
row("cache after the scan / its budget, MiB", lambda m: "%.1f / %s" % (get(m, test="cache_after_scan")["bytes"] / 2**20,
    ("%.0f" % (get(m, test="cache_after_scan")["budget"] / 2**20)) if get(m, test="cache_after_scan")["budget"] else "none"))
row("ls -l cold, s (requests)", lambda m: "%.2f (%d)" % (get(m, test="ls")["seconds"], get(m, test="ls")["requests"]))
row("daemon RSS peak / end, MiB", lambda m: "%.0f / %.0f" % (get(m, test="rss")["hwm_kib"] / 1024, get(m, test="rss")["rss_kib"] / 1024))
print("\n".join(lines))
EOF
