#!/usr/bin/env python3
"""Compares two runs of scripts/every-workload.sh: whether each workload
gave the same rows in the same order, and each row's main figure after
over before (the median over the rows, and the extremes).

    scripts/compare-workloads.py OUT_BEFORE OUT_AFTER
"""
import json, sys, os
A, B = sys.argv[1], sys.argv[2]
main_fig = {'async-hit':'ns_per_op','l2':'ops_per_sec','lockbench':'mops','main':'ops_per_sec','object':'queries_per_sec',
 'randread':'ops_per_sec','randrw':'ops_per_sec','rangelock':'ops_per_sec','replay':'hit_ratio','scan':'after','poison':'hit_ratio'}
ident_skip = set(main_fig.values()) | {'mb_per_sec','runs','samples_ns','ratio_to_sync','fairness','p50_ms','p99_ms','cold_p50_ms','cold_p99_ms',
  'cold_requests_per_query','cold_store_bytes_per_query','warm_requests_per_query','warm_store_bytes_per_query','warm_pass_hit_ratio',
  'warm_memory_hit_ratio','hit_ratio','memory_hit_ratio','l2_hit_ratio','backing_reads','l2_hit_p50_us','l2_hit_p99_us','misses',
  'reads','reads_per_sec','final_window_hit_ratio','c','p','before','during','after','protected_share','hits','l2_hits','l2_write_bytes','l2_kept','size_bytes'}
def rows(d):
    r = d.get('results') or d.get('phases')
    return r
out=[]
for name in sorted(main_fig):
    fa, fb = f"{A}/{name}.json", f"{B}/{name}.json"
    if not (os.path.exists(fa) and os.path.exists(fb)):
        out.append(f"{name}: missing"); continue
    ra, rb = rows(json.load(open(fa))), rows(json.load(open(fb)))
    key = lambda r: tuple((k, r[k]) for k in sorted(r) if k not in ident_skip)
    ka, kb = [key(r) for r in ra], [key(r) for r in rb]
    same = ka == kb
    fig = main_fig[name]
    ratios = [rb[i][fig]/ra[i][fig] for i in range(min(len(ra),len(rb))) if isinstance(ra[i].get(fig),(int,float)) and ra[i][fig]]
    ratios.sort()
    med = ratios[len(ratios)//2] if ratios else float('nan')
    out.append(f"{name}: rows {len(ra)} -> {len(rb)}, same row set and order: {same}; {fig} after/before median {med:.3f} (min {ratios[0] if ratios else 0:.2f}, max {ratios[-1] if ratios else 0:.2f})")
print("\n".join(out))
