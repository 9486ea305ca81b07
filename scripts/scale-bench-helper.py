#!/usr/bin/env python3
"""Helpers for scripts/scale-bench.sh (TPC-H at scale through multiarc and
its peers). Subcommands:

  freeport                          print a free TCP port on 127.0.0.1
  proxy LISTEN UPSTREAM MS COUNTS   forward TCP, each request first waiting MS
                                    ms; COUNTS (JSON) holds the requests and
                                    the bytes answered so far
  rtt PORT [N]                      median round trip of N requests, in ms
  passes                            the passes, in order (as PASSES below and
                                    multiarc-scale's engine::PASSES)
  engine duckdb|pyarrow ...         one pass of one engine on one row (see
                                    run_engine's arguments): a JSON line per
                                    query appended to --out
  report RESULTS.jsonl CONDITIONS.json [--json] [--plots DIR]
                                    the report: one JSON document, or a table;
                                    a PNG per pass (queries on one axis, a bar
                                    per row) in --plots; a pass run in rounds
                                    (warm) shows the medians of its rounds

The engines need duckdb and pyarrow (and matplotlib for plots), from the
virtual environment the script makes.
"""
import argparse
import hashlib
import json
import os
import statistics
import sys
import time


from latency_proxy import freeport, is_object_get, proxy, rtt


# --- the engines -------------------------------------------------------------

TABLES = ["region", "nation", "supplier", "customer", "part", "partsupp", "orders", "lineitem"]
HOT = [1, 3, 5, 6, 14]
PYARROW_QUERIES = ["q1", "q6", "q14"]


def digest(text):
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def read_counts(path):
    if not path:
        return {"requests": 0, "gets": 0, "bytes": 0}
    time.sleep(0.06)  # the proxy saves its counts every 50 ms
    for _ in range(20):
        try:
            with open(path) as f:
                return json.load(f)
        except (OSError, ValueError):
            time.sleep(0.01)
    return {"requests": 0, "gets": 0, "bytes": 0}


def peak_rss(pid):
    if not pid:
        return 0
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def arcstats(mnt):
    try:
        out = {}
        with open(os.path.join(mnt, ".multiarc", "arcstats")) as f:
            for line in f:
                k, v = line.split()
                out.setdefault(k, int(v))
        return out
    except OSError:
        return None


def duckdb_queries(data, queries_dir, pass_name, queries, threads):
    import duckdb

    con = duckdb.connect()
    con.execute(f"set threads = {threads}")
    for t in TABLES:
        con.execute(f"create view {t} as select * from read_parquet('{data}/{t}/*.parquet')")
    if pass_name == "scan":
        wanted = ["scan"]
    elif pass_name in ("before_scan", "after_scan"):
        wanted = [f"q{q}" for q in HOT if q in queries]
    else:
        wanted = [f"q{q}" for q in queries]
    for name in wanted:
        if name == "scan":
            sql = ("select count(*), sum(l_quantity), sum(l_extendedprice), sum(l_discount), sum(l_tax), "
                   "max(l_returnflag), max(l_linestatus), max(l_shipdate), max(l_commitdate), "
                   "max(l_receiptdate), max(l_shipinstruct), max(l_shipmode), max(l_comment), "
                   "sum(l_orderkey), sum(l_partkey), sum(l_suppkey), sum(l_linenumber) from lineitem")
        else:
            with open(os.path.join(queries_dir, f"{name}.sql")) as f:
                sql = f.read()

        def run(sql=sql):
            rows = con.execute(sql).fetchall()
            return "\n".join(repr(r) for r in rows)

        yield name, run


def pyarrow_queries(data, pass_name):
    import datetime
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    import pyarrow as pa

    def plain(path):
        # tpchgen-arrow writes strings as string_view and money as
        # decimals, which pyarrow's filters, joins and sums do not all
        # take: read them as string and float64.
        fields = []
        for f in ds.dataset(path, format="parquet").schema:
            t = f.type
            if pa.types.is_string_view(t) or pa.types.is_large_string(t):
                t = pa.string()
            elif pa.types.is_decimal(t):
                t = pa.float64()
            fields.append(pa.field(f.name, t))
        return ds.dataset(path, format="parquet", schema=pa.schema(fields))

    lineitem = plain(f"{data}/lineitem")
    part = plain(f"{data}/part")
    d = datetime.date

    def sig(v):
        # Sums of floats depend on the order threads add them in: 9
        # significant digits are the same whatever the order.
        return f"{v:.9g}"

    def rounded(rows):
        return repr([{k: sig(v) if isinstance(v, float) else v for k, v in r.items()} for r in rows])

    def q1():
        t = lineitem.to_table(
            columns=["l_returnflag", "l_linestatus", "l_quantity", "l_extendedprice", "l_discount", "l_tax"],
            filter=ds.field("l_shipdate") <= d(1998, 9, 2))
        disc = pc.multiply(t["l_extendedprice"], pc.subtract(1, t["l_discount"]))
        charge = pc.multiply(disc, pc.add(1, t["l_tax"]))
        t = t.append_column("disc_price", disc).append_column("charge", charge)
        g = t.group_by(["l_returnflag", "l_linestatus"]).aggregate([
            ("l_quantity", "sum"), ("l_extendedprice", "sum"), ("disc_price", "sum"), ("charge", "sum"),
            ("l_quantity", "mean"), ("l_extendedprice", "mean"), ("l_discount", "mean"), ("l_quantity", "count")])
        g = g.sort_by([("l_returnflag", "ascending"), ("l_linestatus", "ascending")])
        return rounded(g.to_pylist())

    def q6():
        f = ((ds.field("l_shipdate") >= d(1994, 1, 1)) & (ds.field("l_shipdate") < d(1995, 1, 1))
             & (ds.field("l_discount") >= 0.05) & (ds.field("l_discount") <= 0.07)
             & (ds.field("l_quantity") < 24))
        t = lineitem.to_table(columns=["l_extendedprice", "l_discount"], filter=f)
        rev = pc.sum(pc.multiply(t["l_extendedprice"], t["l_discount"]))
        return sig(rev.as_py())

    def q14():
        f = (ds.field("l_shipdate") >= d(1995, 9, 1)) & (ds.field("l_shipdate") < d(1995, 10, 1))
        li = lineitem.to_table(columns=["l_partkey", "l_extendedprice", "l_discount"], filter=f)
        p = part.to_table(columns=["p_partkey", "p_type"])
        j = li.join(p, keys="l_partkey", right_keys="p_partkey")
        rev = pc.multiply(j["l_extendedprice"], pc.subtract(1, j["l_discount"]))
        promo = pc.if_else(pc.starts_with(j["p_type"], "PROMO"), rev, 0.0)
        return sig(100.0 * pc.sum(promo).as_py() / pc.sum(rev).as_py())

    def scan():
        t = lineitem.to_table()
        return f"{t.num_rows} {pc.sum(t['l_linenumber']).as_py()}"

    named = {"q1": q1, "q6": q6, "q14": q14, "scan": scan}
    if pass_name == "scan":
        wanted = ["scan"]
    else:
        wanted = PYARROW_QUERIES
    for name in wanted:
        yield name, named[name]


def run_engine(a):
    reference = {}
    if a.reference and os.path.exists(a.reference):
        with open(a.reference) as f:
            reference = json.load(f)
    queries = [int(q) for q in a.queries.split(",")]
    if a.engine == "duckdb":
        work = duckdb_queries(a.data, a.queries_dir, a.pass_name, queries, a.threads)
    else:
        work = pyarrow_queries(a.data, a.pass_name)
    out = open(a.out, "a")
    for name, fn in work:
        before = read_counts(a.counts)
        stats_before = arcstats(a.mnt) if a.mnt else None
        started = time.time()
        t = time.perf_counter()
        error = None
        try:
            answer = digest(fn())
        except Exception as e:  # a failed query is a row of the report, not the end of the run
            answer, error = "", f"{type(e).__name__}: {e}"
        latency = (time.perf_counter() - t) * 1000
        after = read_counts(a.counts)
        stats_after = arcstats(a.mnt) if a.mnt else None
        hit_ratio = None
        if stats_before and stats_after:
            h = stats_after["hits"] - stats_before["hits"]
            m = stats_after["misses"] - stats_before["misses"]
            hit_ratio = h / (h + m) if h + m else None
        key = f"{a.engine} {name}"
        if a.write_reference:
            reference[key] = answer
        r = {
            "engine": a.engine, "row": a.row, "pass": a.pass_name, "round": a.round, "query": name,
            "latency_ms": round(latency, 3),
            # Unix time in ms, to match the proxy's request log (COUNTS.log).
            "started_unix_ms": round(started * 1000, 1),
            "store_requests": after["requests"] - before["requests"],
            "store_gets": after.get("gets", 0) - before.get("gets", 0),
            "store_bytes": after["bytes"] - before["bytes"],
            "peak_rss_bytes": peak_rss(a.pid),
            "hit_ratio": hit_ratio,
            "answer": answer,
            "answer_ok": (error is None and reference.get(key) == answer) if key in reference else None,
        }
        if error:
            r["error"] = error
        out.write(json.dumps(r) + "\n")
        out.flush()
        print(f"scale-bench: {a.engine} {a.row} {a.pass_name} {name}: {latency:.0f} ms, "
              f"{r['store_requests']} requests{' ERROR ' + error if error else ''}", file=sys.stderr)
    if a.write_reference:
        with open(a.reference, "w") as f:
            json.dump(reference, f)


# --- the report --------------------------------------------------------------

PASSES = ["cold", "warm", "before_scan", "scan", "after_scan", "remount"]


def report(results_path, conditions_path, as_json, plots):
    rows = [json.loads(l) for l in open(results_path) if l.strip()]
    conditions = json.load(open(conditions_path))
    suites = suites_of(rows)
    logs = request_logs(os.path.join(os.path.dirname(results_path), "requests"))
    doc = {"conditions": conditions, "results": rows, "suites": list(suites.values()),
           "targets": targets(rows, suites, conditions, logs)}
    if plots:
        os.makedirs(plots, exist_ok=True)
        doc["plots"] = draw(rows, plots)
    if as_json:
        print(json.dumps(doc))
        return
    print(f"{'engine':<10} {'row':<13} {'pass':<10} {'rounds':>6} {'queries':>7} {'suite s':>9} {'requests':>9} "
          f"{'MB':>9} {'peak RSS MiB':>12} answers")
    for s in doc["suites"]:
        print(f"{s['engine']:<10} {s['row']:<13} {s['pass']:<10} {s['rounds']:>6} {s['queries']:>7} "
              f"{s['latency_ms'] / 1000:>9.2f} {s['store_requests']:>9} {s['store_bytes'] / 1e6:>9.1f} "
              f"{s['peak_rss_bytes'] / 2**20:>12.0f} {'ok' if s['answers_ok'] else 'WRONG'}")
    for c in conditions.get("rows_not_run", []):
        print(f"not run: {c['row']}: {c['reason']}")
    print()
    print("targets (issue 39):")
    for t in doc["targets"]:
        print(f"  {'met   ' if t['met'] else 'MISSED' if t['met'] is False else 'report'} {t['target']}: "
              f"{t['engine']} {t['row']}: {t['value']} (limit {t['limit']})")


def suites_of(rows):
    """The suite per pass and row: the sum of its queries' figures in each
    round, then, over the rounds (the warm pass runs several), the median
    time (`latency_ms`; every round's in `latency_ms_rounds`) and the most
    requests and bytes any round sent."""
    per_round = {}
    for r in rows:
        k = (r["engine"], r["row"], r["pass"], r.get("round", 0))
        s = per_round.setdefault(k, {"latency_ms": 0.0, "store_requests": 0, "store_bytes": 0,
                                     "store_gets": None, "queries": 0, "answers_ok": True,
                                     "peak_rss_bytes": 0})
        s["latency_ms"] += r["latency_ms"]
        s["store_requests"] += r["store_requests"]
        s["store_bytes"] += r["store_bytes"]
        if "store_gets" in r:
            s["store_gets"] = (s["store_gets"] or 0) + r["store_gets"]
        s["queries"] += 1
        s["answers_ok"] = s["answers_ok"] and r.get("answer_ok") is not False and "error" not in r
        s["peak_rss_bytes"] = max(s["peak_rss_bytes"], r.get("peak_rss_bytes") or 0)
    suites = {}
    for (engine, row, pass_name, _), s in sorted(per_round.items(), key=lambda kv: kv[0][3]):
        k = (engine, row, pass_name)
        t = suites.setdefault(k, {"engine": engine, "row": row, "pass": pass_name, "rounds": 0,
                                  "latency_ms_rounds": [], "store_requests": 0, "store_bytes": 0,
                                  "store_gets": None, "queries": s["queries"], "answers_ok": True,
                                  "peak_rss_bytes": 0})
        t["rounds"] += 1
        t["latency_ms_rounds"].append(s["latency_ms"])
        t["store_requests"] = max(t["store_requests"], s["store_requests"])
        t["store_bytes"] = max(t["store_bytes"], s["store_bytes"])
        if s["store_gets"] is not None:
            t["store_gets"] = max(t["store_gets"] or 0, s["store_gets"])
        t["answers_ok"] = t["answers_ok"] and s["answers_ok"]
        t["peak_rss_bytes"] = max(t["peak_rss_bytes"], s["peak_rss_bytes"])
    for t in suites.values():
        t["latency_ms"] = statistics.median(t["latency_ms_rounds"])
    # In the order engines and rows first ran, passes in theirs (the rows'
    # order turns from pass to pass).
    engines = list(dict.fromkeys(r["engine"] for r in rows))
    names = list(dict.fromkeys(r["row"] for r in rows))
    order = {p: i for i, p in enumerate(PASSES)}
    return dict(sorted(suites.items(), key=lambda kv: (engines.index(kv[0][0]), order.get(kv[0][2], len(order)),
                                                       names.index(kv[0][1]))))


def request_logs(directory):
    """Each mount's object GETs from its proxy's request log
    (DIR/requests/mount-NAME.counts.log, copied there by scale-bench.sh):
    {NAME: [(unix ms, path, first byte, last byte)]}; a GET without a
    Range covers its whole object. Empty where there are none (runs before
    the log carried times)."""
    logs = {}
    if not os.path.isdir(directory):
        return logs
    for name in os.listdir(directory):
        if not (name.startswith("mount-") and name.endswith(".counts.log")):
            continue
        gets = []
        with open(os.path.join(directory, name)) as f:
            for line in f:
                p = line.split()
                # NUMBER UNIX_MS METHOD TARGET VERSION [bytes=A-B]
                if len(p) < 5 or not is_object_get(p[2], p[3]):
                    continue
                try:
                    ts = float(p[1])
                except ValueError:
                    continue
                first, last = 0, float("inf")
                if p[-1].startswith("bytes="):
                    a, _, b = p[-1][len("bytes="):].partition("-")
                    first, last = int(a or 0), int(b) if b else float("inf")
                gets.append((ts, p[3], first, last))
        logs[name[len("mount-"):-len(".counts.log")]] = gets
    return logs


def fetched_again(rows, engine, row, gets):
    """The remount pass's GETs of `row` (from its first query's start to a
    second past its last query's end: a read ahead may still be in flight)
    and how many of them ask for bytes that a GET of the same engine's
    earlier passes fetched (from its first query to the remount): only
    those can be blocks the L2 holds."""
    mine = [r for r in rows if r["engine"] == engine and r["row"] == row and "started_unix_ms" in r]
    remount = [r for r in mine if r["pass"] == "remount"]
    if not mine or not remount:
        return None
    start = min(r["started_unix_ms"] for r in mine)
    re_start = min(r["started_unix_ms"] for r in remount)
    re_end = max(r["started_unix_ms"] + r["latency_ms"] for r in remount) + 1000
    before = [g for g in gets if start <= g[0] < re_start]
    after = [g for g in gets if re_start <= g[0] <= re_end]
    again = [g for g in after
             if any(b[1] == g[1] and b[2] <= g[3] and g[2] <= b[3] for b in before)]
    return len(after), len(again)


def targets(rows, suites, conditions, logs=None):
    """The issue's targets, each row's figure against its limit. `met` is
    None for figures only reported (the peers')."""
    logs = logs or {}
    out = []

    def add(target, engine, row, value, limit, met):
        out.append({"target": target, "engine": engine, "row": row, "value": value,
                    "limit": limit, "met": met})

    def suite(engine, row, p):
        return suites.get((engine, row, p))

    engines = sorted({r["engine"] for r in rows})
    for engine in engines:
        names = list(dict.fromkeys(r["row"] for r in rows if r["engine"] == engine))
        ours = [n for n in names if n.startswith("multiarc")]
        others = [n for n in names if not n.startswith("multiarc")]
        for n in ours:
            wrong = [f"{r['pass']} {r['query']}" for r in rows
                     if r["engine"] == engine and r["row"] == n
                     and (r.get("answer_ok") is not True or "error" in r)]
            add("every answer equals the uncached one", engine, n,
                f"{len(wrong)} wrong" + (f" ({', '.join(wrong[:5])})" if wrong else ""), "0 wrong", not wrong)
        # Warm suite: at least as fast as every other row (multiarc-l2 for
        # DataFusion; every multiarc row through the mounts).
        warm_ours = ["multiarc-l2"] if engine == "datafusion" else ours
        for n in warm_ours:
            mine = suite(engine, n, "warm")
            if not mine:
                continue
            rivals = [suite(engine, o, "warm") for o in names if o != n and suite(engine, o, "warm")]
            if engine == "datafusion":
                rivals = [r for r in rivals if r["row"] != "multiarc"]
            else:
                rivals = [r for r in rivals if not r["row"].startswith("multiarc")]
            best = min(rivals, key=lambda r: r["latency_ms"], default=None)
            if best:
                add("warm suite at least as fast as every other row", engine, n,
                    f"{mine['latency_ms'] / 1000:.2f} s", f"{best['row']} {best['latency_ms'] / 1000:.2f} s",
                    mine["latency_ms"] <= best["latency_ms"])
            if engine == "datafusion":
                add("warm suite sends no data request", engine, n,
                    f"{mine['store_requests']} requests, {mine['store_bytes']} bytes", "0 bytes",
                    mine["store_bytes"] == 0)
        # Cold suite: within 10% of the fastest row, no more bytes than it.
        colds = [suite(engine, n, "cold") for n in names if suite(engine, n, "cold")]
        if colds:
            fastest = min(colds, key=lambda r: r["latency_ms"])
            for c in colds:
                ours_row = c["row"].startswith("multiarc")
                add("cold suite within 10% of the fastest row", engine, c["row"],
                    f"{c['latency_ms'] / 1000:.2f} s ({c['latency_ms'] / fastest['latency_ms']:.2f}x)",
                    f"{fastest['row']} {fastest['latency_ms'] / 1000:.2f} s x 1.1",
                    c["latency_ms"] <= 1.1 * fastest["latency_ms"] if ours_row else None)
                add("cold suite: no more store bytes than the fastest row", engine, c["row"],
                    f"{c['store_bytes'] / 1e6:.1f} MB", f"{fastest['row']} {fastest['store_bytes'] / 1e6:.1f} MB",
                    c["store_bytes"] <= fastest["store_bytes"] if ours_row else None)
        # After the scan: the hot queries' requests against their cold ones.
        for n in names:
            def of_pass(p):
                return [r for r in rows if r["engine"] == engine and r["row"] == n and r["pass"] == p]
            after = of_pass("after_scan")
            hot = {r["query"] for r in after}
            cold_rows = [r for r in of_pass("cold") if r["query"] in hot]
            cold = sum(r["store_requests"] for r in cold_rows)
            sent = sum(r["store_requests"] for r in after)
            # Bytes beside requests: a few small blocks missed after the scan
            # cost a request each, as a cold column chunk of tens of MB does.
            cold_bytes = sum(r["store_bytes"] for r in cold_rows)
            sent_bytes = sum(r["store_bytes"] for r in after)
            # The same queries right before the scan: what the cache held
            # of them then (the scan's own cost is the difference).
            before = of_pass("before_scan")
            before_note = ""
            if before:
                before_note = (f"; before the scan {sum(r['store_requests'] for r in before)} requests, "
                               f"{sum(r['store_bytes'] for r in before) / 1e6:.1f} MB")
            if after:
                share = sent / cold if cold else 0.0
                byte_share = sent_bytes / cold_bytes if cold_bytes else 0.0
                add("hot queries after the scan: at most 10% of their cold requests", engine, n,
                    f"{sent} of {cold} ({share:.0%}); bytes {sent_bytes / 1e6:.1f} of {cold_bytes / 1e6:.1f} MB"
                    f" ({byte_share:.0%}){before_note}", "10% of requests",
                    share <= 0.10 if n.startswith("multiarc") else None)
        # Memory: peak RSS against the budget plus 25% (the mount daemons').
        budget = conditions.get("memory_budget_bytes") or 0
        for n in names:
            peak = max((r.get("peak_rss_bytes") or 0 for r in rows if r["engine"] == engine and r["row"] == n),
                       default=0)
            if peak and budget:
                daemon = engine != "datafusion"
                add("peak RSS within the memory budget plus 25%" if daemon else "peak RSS (the process, reported)",
                    engine, n, f"{peak / 2**20:.0f} MiB", f"{1.25 * budget / 2**20:.0f} MiB",
                    peak <= 1.25 * budget if daemon and n.startswith("multiarc") else None)
        # Restart: the first suite after a remount, over the L2.
        for n in names:
            re = suite(engine, n, "remount")
            if re and (n == "multiarc-l2" or not n.startswith("multiarc")):
                # Data requests: object GETs through a mount (a listing or
                # a HEAD after the restart is metadata); every read the
                # DataFusion rows count is one.
                data = re["store_gets"] if re.get("store_gets") is not None else re["store_requests"]
                value = f"{data} data requests of {re['store_requests']}, {re['store_bytes'] / 1e6:.1f} MB"
                met = data == 0
                # Through a mount, with its request log: a GET for bytes no
                # earlier pass fetched (a read ahead past them) asks for
                # nothing the L2 can hold; only the others count.
                seen = fetched_again(rows, engine, n, logs[n]) if engine != "datafusion" and n in logs else None
                if seen is not None:
                    value += f"; {seen[1]} of its {seen[0]} GETs for bytes fetched before the remount"
                    met = seen[1] == 0
                add("after a remount, no data request for what the L2 holds", engine, n,
                    value, "0 data requests" if seen is None else "0 GETs for bytes fetched before",
                    met if n == "multiarc-l2" else None)
    return out


def draw(rows, plots):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    made = []
    for engine in sorted({r["engine"] for r in rows}):
        for p in PASSES:
            sel = [r for r in rows if r["engine"] == engine and r["pass"] == p]
            if not sel:
                continue
            queries = list(dict.fromkeys(r["query"] for r in sel))
            names = list(dict.fromkeys(r["row"] for r in sel))
            fig, ax = plt.subplots(figsize=(max(6, len(queries) * 0.7), 4))
            width = 0.8 / len(names)
            for i, name in enumerate(names):
                # The median of the rounds (the warm pass runs several).
                ys = [statistics.median([r["latency_ms"] for r in sel if r["row"] == name and r["query"] == q]
                                        or [0]) for q in queries]
                ax.bar([x + i * width for x in range(len(queries))], ys, width, label=name)
            ax.set_xticks([x + width * (len(names) - 1) / 2 for x in range(len(queries))])
            ax.set_xticklabels(queries)
            ax.set_ylabel("latency, ms")
            ax.set_title(f"{engine}, pass {p}")
            ax.legend(fontsize="small")
            fig.tight_layout()
            path = os.path.join(plots, f"{engine}-{p}.png")
            fig.savefig(path, dpi=100)
            plt.close(fig)
            made.append(path)
    return made


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    cmd = sys.argv[1]
    if cmd == "freeport":
        freeport()
    elif cmd == "proxy":
        proxy(int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), sys.argv[5])
    elif cmd == "rtt":
        rtt(int(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 50)
    elif cmd == "passes":
        print(" ".join(PASSES))
    elif cmd == "engine":
        p = argparse.ArgumentParser(prog="scale-bench-helper.py engine")
        p.add_argument("engine", choices=["duckdb", "pyarrow"])
        p.add_argument("--data", required=True, help="the directory holding the tables")
        p.add_argument("--queries-dir", required=True)
        p.add_argument("--queries", default=",".join(str(q) for q in range(1, 23)))
        p.add_argument("--pass", dest="pass_name", required=True, choices=PASSES)
        p.add_argument("--round", type=int, default=0, help="the round of the pass (the warm pass runs several)")
        p.add_argument("--row", required=True)
        p.add_argument("--counts", help="the proxy's counts file")
        p.add_argument("--mnt", help="a multiarc mount (its arcstats give the hit ratio)")
        p.add_argument("--pid", type=int, help="the mount daemon (its peak RSS)")
        p.add_argument("--threads", type=int, default=os.cpu_count())
        p.add_argument("--reference", help="reference answers (JSON)")
        p.add_argument("--write-reference", action="store_true")
        p.add_argument("--out", required=True)
        run_engine(p.parse_args(sys.argv[2:]))
    elif cmd == "report":
        p = argparse.ArgumentParser(prog="scale-bench-helper.py report")
        p.add_argument("results")
        p.add_argument("conditions")
        p.add_argument("--json", action="store_true")
        p.add_argument("--plots")
        a = p.parse_args(sys.argv[2:])
        report(a.results, a.conditions, a.json, a.plots)
    else:
        sys.exit(f"unknown subcommand {cmd}\n{__doc__}")


if __name__ == "__main__":
    main()
