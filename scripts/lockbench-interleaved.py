#!/usr/bin/env python3
# Interleaved lockbench (issue 42): the locks (and builds) of the command line run
# one invocation per sample, their order rotated each round, so that load drift
# on a shared machine falls on every row alike. With GATE=S in the environment a
# sample first waits up to S seconds for a quiet machine (under 0.3 CPUs busy);
# each sample records the CPUs it used. Prints medians (min-max) [CPUs].
# A config's fifth field sets the counter's layout (`--layout beside|apart`,
# lockbench's default when absent), e.g. target/release/multiarc:pthread:::apart.
# Example: GATE=30 scripts/lockbench-interleaved.py 5 0.5 1,2,4 out.jsonl \
#   target/release/multiarc:multiarc target/release/multiarc:multiarc:0 \
#   target/release/multiarc:pthread target/release/multiarc:std target/release/multiarc:parking_lot
"""Interleaved lockbench: rounds x configs x threadcounts, each a separate invocation, order rotated per round.
Records per invocation the CPUs utilised (children rusage / wall) and load avg.
usage: lockbench-interleaved.py ROUNDS SECONDS THREADS out.jsonl config...   config = bin:lock[:spins[:ENV=V,...[:layout]]]"""
import json, subprocess, sys, statistics, time, os, resource
rounds, secs, threads, out = int(sys.argv[1]), sys.argv[2], sys.argv[3].split(","), sys.argv[4]
cfgs = sys.argv[5:]
res = {}; util = {}
def busy(dt=0.3):
    def rd():
        v = list(map(int, open("/proc/stat").readline().split()[1:]))
        return sum(v), v[3] + v[4]
    t0, i0 = rd(); time.sleep(dt); t1, i1 = rd()
    return 2.0 * (1 - (i1 - i0) / max(1, t1 - t0))  # CPUs busy (2-CPU machine)
def wait_quiet(maxwait):
    t = time.time()
    while True:
        b = busy()
        if b < 0.3 or time.time() - t > maxwait: return b
GATE = float(os.environ.get("GATE", "0"))
def cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN); return r.ru_utime + r.ru_stime
with open(out, "a") as f:
    for r in range(rounds):
        order = cfgs[r % len(cfgs):] + cfgs[:r % len(cfgs)]
        for t in threads:
          for c in order:
            parts = c.split(":")
            binp, lock = parts[0], parts[1]
            cmd = [binp, "lockbench", "--threads", t, "--seconds", secs, "--locks", lock, "--json"]
            if len(parts) > 2 and parts[2]: cmd += ["--spins", parts[2]]
            if len(parts) > 4 and parts[4]: cmd += ["--layout", parts[4]]
            other = wait_quiet(GATE) if GATE else -1
            ts = time.strftime("%H:%M:%S", time.gmtime()); load = os.getloadavg()[0]
            c0, w0 = cpu(), time.time()
            env = dict(os.environ)
            if len(parts) > 3 and parts[3]:
                for kv in parts[3].split(","):
                    k, v = kv.split("="); env[k] = v
            doc = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True, env=env).stdout)
            u = (cpu() - c0) / (time.time() - w0)
            for m in doc["results"]:
                res.setdefault((c, m["threads"]), []).append(m["mops"])
                util.setdefault((c, m["threads"]), []).append(u)
                f.write(json.dumps({"round": r, "cfg": c, "ts": ts, "load1": load, "cpus_used": u, "busy_before": other, **m}) + "\n")
            f.flush()
ths = sorted({t for (_, t) in res})
print("config".ljust(34) + "".join(f"{t:>3}thr: med (min-max) [cpus]    " for t in ths))
for c in cfgs:
    row = c.ljust(34)
    for t in ths:
        v = res.get((c, t), []); u = util.get((c, t), [])
        row += f"{statistics.median(v):8.1f} ({min(v):5.1f}-{max(v):5.1f}) [{statistics.median(u):.2f}]  " if v else "-"
    print(row)
