#!/usr/bin/env python3
"""Alternates two builds of multiarc on one `--json` bench command, so that
load drift on a shared machine falls on both alike: round r runs NEW then
OLD when r is even, OLD then NEW when odd. Prints, per result row (the row's
non-numeric fields and its thread count), both builds' median ops/s and the
median of the per-round NEW/OLD ratios with their range.

    scripts/alternate-builds.py ROUNDS NEW_BIN OLD_BIN bench rangelock --threads 2,32 --seconds 0.5
"""
import json, statistics, subprocess, sys

if len(sys.argv) < 5:
    sys.exit(__doc__)
rounds, new, old, args = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:]
res = {}
for r in range(rounds):
    pair = [("new", new), ("old", old)]
    for name, binary in pair if r % 2 == 0 else pair[::-1]:
        out = subprocess.run([binary, *args, "--json"], capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"{binary} {' '.join(args)}: exit {out.returncode}: {out.stderr.strip()[-400:]}")
        for row in json.loads(out.stdout)["results"]:
            key = tuple(f"{k}={v}" for k, v in sorted(row.items()) if isinstance(v, str)) + (f"threads={row['threads']}",)
            res.setdefault(key, {}).setdefault(name, []).append(row["ops_per_sec"])
        print(f"round {r + 1}/{rounds}: {name} done", file=sys.stderr)
for key, runs in sorted(res.items()):
    ratios = [a / b for a, b in zip(runs["new"], runs["old"])]
    print(f"{' '.join(key):60} new {statistics.median(runs['new']) / 1e6:8.3f} old {statistics.median(runs['old']) / 1e6:8.3f} "
          f"Mops/s  new/old {statistics.median(ratios):.3f} ({min(ratios):.2f}-{max(ratios):.2f})")
