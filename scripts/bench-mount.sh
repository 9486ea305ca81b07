#!/usr/bin/env bash
# The FUSE mount benchmark: the OpenZFS 5497 report's fio job
# (psync, 8 KiB random reads, every job reading its own fully cached file)
# through `multiarc mount`, next to the same job on the backing directory
# (the kernel's page cache) and on tmpfs, at several job counts; with
# multiarc's lock statistics for each mount run and a CPU profile of one.
#
#   scripts/bench-mount.sh [--jobs 1,2,32] [--runtime 10] [--filesize 32m] [--out DIR]
#
# Needs root (or fuse3's fusermount3), fio and perf. Writes DIR/results.json,
# DIR/lockstat-N.txt and DIR/profile.txt (default DIR: target/bench-mount)
# and prints a table. Progress goes to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."

jobs="1,2,32"
runtime=10
filesize=32m
out=target/bench-mount
while [ $# -gt 0 ]; do
  case "$1" in
    --jobs) jobs="$2"; shift 2 ;;
    --runtime) runtime="$2"; shift 2 ;;
    --filesize) filesize="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) echo "bench-mount: unknown argument $1" >&2; exit 2 ;;
  esac
done
for tool in fio perf python3; do
  command -v "$tool" >/dev/null || { echo "bench-mount: $tool is not installed" >&2; exit 1; }
done
[ -e /dev/fuse ] || { echo "bench-mount: no /dev/fuse on this machine" >&2; exit 1; }

say() { printf 'bench-mount: %s\n' "$*" >&2; }

say "building the release binary"
cargo build --release -q -p multiarc-cli
bin=$PWD/target/release/multiarc

work=$(mktemp -d "${TMPDIR:-/var/tmp}/multiarc-bench-mount.XXXXXX")
tmpfs=$(mktemp -d /dev/shm/multiarc-bench-mount.XXXXXX)
mnt=$work/mnt
backing=$work/backing
mkdir -p "$mnt" "$backing" "$out"
cleanup() {
  fusermount3 -u "$mnt" 2>/dev/null || umount "$mnt" 2>/dev/null || true
  rm -rf "$work" "$tmpfs"
}
trap cleanup EXIT

max_jobs=$(tr ',' '\n' <<<"$jobs" | sort -n | tail -1)
size_mib=$(python3 -c "import sys; s='$filesize'.lower(); m={'k':1/1024,'m':1,'g':1024}; print(int(float(s[:-1])*m[s[-1]]) if s[-1] in m else int(s)>>20)")
cache_mib=$(( max_jobs * size_mib * 5 / 4 + 64 ))

fio_job() { # DIR NUMJOBS RW RUNTIME
  fio --name=randread --directory="$1" --rw="$3" --bs=8k --ioengine=psync \
    --numjobs="$2" --filesize="$filesize" --invalidate=0 --group_reporting --output-format=json \
    ${4:+--time_based --runtime=$4}
}

say "mounting $backing on $mnt (cache ${cache_mib} MiB)"
"$bin" mount "$backing" "$mnt" --max-bytes "${cache_mib}MiB" --threads 4
pid=$(pgrep -n -f "multiarc mount $backing") || { echo "bench-mount: mount process not found" >&2; exit 1; }

results=$out/results.jsonl
: >"$results"
for target in mount pagecache tmpfs; do
  case $target in
    mount) dir=$mnt ;;
    pagecache) dir=$backing ;;
    tmpfs) dir=$tmpfs ;;
  esac
  say "$target: laying out and reading $max_jobs x $filesize once (fully cached afterwards)"
  fio_job "$dir" "$max_jobs" read "" >/dev/null
  for n in ${jobs//,/ }; do
    say "$target: randread, $n jobs, ${runtime}s"
    if [ "$target" = mount ]; then
      "$bin" set "$mnt" lockstat=1 >/dev/null
    fi
    if [ "$target" = mount ] && [ "$n" = "$max_jobs" ]; then
      perf record -q -g -o "$out/perf.data" -p "$pid" -- sleep "$((runtime - 2))" 2>/dev/null &
      perf_pid=$!
      fio_job "$dir" "$n" randread "$runtime" >"$out/fio.json"
      wait "$perf_pid" || true
    else
      fio_job "$dir" "$n" randread "$runtime" >"$out/fio.json"
    fi
    if [ "$target" = mount ]; then
      cp "$mnt/.multiarc/lockstat" "$out/lockstat-$n.txt"
      "$bin" set "$mnt" lockstat=0 >/dev/null
    fi
    python3 - "$target" "$n" "$out/fio.json" >>"$results" <<'EOF'
import json, sys
target, n, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
text = open(path).read()
doc = json.loads(text[text.index('{'):])
job = doc["jobs"][0]
assert job["error"] == 0, job["error"]
r = job["read"]
print(json.dumps({"target": target, "numjobs": n, "iops": r["iops"],
                  "mib_per_sec": r["bw_bytes"] / 2**20,
                  "lat_usec_mean": r["clat_ns"]["mean"] / 1000}))
EOF
  done
done
"$bin" stats "$mnt" >"$out/arcstats.txt"

say "profile of the mount process during the ${max_jobs}-job run"
perf report -i "$out/perf.data" --no-children --sort dso,symbol --stdio 2>/dev/null \
  | grep -E '^ +[0-9]' | head -40 >"$out/profile.txt" || true
python3 - "$out/perf.data" >"$out/profile-summary.txt" <<'EOF' || true
# Where the mount process's CPU time goes, by kind of code.
import subprocess, sys, collections
out = subprocess.run(["perf", "report", "-i", sys.argv[1], "--no-children", "--sort", "dso,symbol",
                      "--stdio", "-g", "none"], capture_output=True, text=True).stdout
buckets = collections.Counter()
for line in out.splitlines():
    parts = line.split()
    if len(parts) < 4 or not parts[0].endswith('%'):
        continue
    pct = float(parts[0].rstrip('%'))
    sym = " ".join(parts[3:])
    if "[k]" in line:
        if "fuse" in sym:
            kind = "kernel: FUSE device (request and reply copies, queueing)"
        elif any(s in sym for s in ("finish_task_switch", "schedule", "spin_unlock_irq", "wake", "futex", "queued_spin", "switch_to", "idle")):
            kind = "kernel: context switches and wake-ups (one FUSE round trip per read)"
        elif any(s in sym for s in ("copy", "memcpy", "gup_", "iov_iter", "pages")):
            kind = "kernel: copying and pinning user buffers"
        else:
            kind = "kernel: other (syscall entry/exit, interrupts)"
    elif "mount::" in sym or "fuser" in sym:
        kind = "FUSE request handling in user space (fuser, our dispatch)"
    elif "multiarc::" in sym:
        kind = "multiarc cache and file layer (incl. lockstat recording)"
    elif "memcpy" in sym or "memmove" in sym:
        kind = "user space memcpy (cache buffer to reply)"
    else:
        kind = "other user space (allocator, libc, syscall stubs)"
    buckets[kind] += pct
for kind, pct in buckets.most_common():
    print(f"{pct:6.1f}%  {kind}")
EOF

python3 - "$results" "$out" "$jobs" "$runtime" "$filesize" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
out, jobs, runtime, filesize = sys.argv[2:6]
json.dump({"jobs": jobs, "runtime_s": int(runtime), "filesize": filesize, "results": rows},
          open(f"{out}/results.json", "w"), indent=2)
print(f"fio randread, psync, bs=8k, filesize={filesize} per job, {runtime} s; IOPS (thousands) and MiB/s")
print(f"{'jobs':>5} {'mount':>16} {'pagecache':>16} {'tmpfs':>16} {'mount/pagecache':>16}")
for n in sorted({r['numjobs'] for r in rows}):
    get = lambda t: next(r for r in rows if r['target'] == t and r['numjobs'] == n)
    cells = [f"{get(t)['iops']/1e3:7.1f} {get(t)['mib_per_sec']:7.0f}" for t in ("mount", "pagecache", "tmpfs")]
    print(f"{n:>5} " + " ".join(f"{c:>16}" for c in cells) + f" {get('mount')['iops']/get('pagecache')['iops']:>15.2f}x")
EOF
say "profile summary ($out/profile-summary.txt):"
cat "$out/profile-summary.txt" >&2
