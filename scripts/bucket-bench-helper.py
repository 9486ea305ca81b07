#!/usr/bin/env python3
"""Helpers for scripts/bucket-bench.sh (the bucket mounts side by side).

  proxy LISTEN_PORT UPSTREAM_PORT DELAY_MS COUNT_FILE
      A TCP proxy for HTTP/1.1 on loopback that waits DELAY_MS before
      passing on each request, counting requests, object GETs and bytes in
      COUNT_FILE (JSON); see latency_proxy.py.
  rtt PORT [N]           median milliseconds of N HTTP round trips (any answer)
  freeport               prints a free TCP port on 127.0.0.1
  parquet DIR ROWS_HOT ROWS_BIG
                         writes DIR/hot.parquet (hot columns a, b; cold
                         payload) and DIR/big.parquet (payload only)
  query FILE [COLS]      reads the columns (comma list, or all) with pyarrow;
                         prints seconds
  dontneed FILE...       drops the kernel's page cache of each file (fadvise)
"""
import os
import sys
import time


from latency_proxy import freeport, proxy, rtt


def parquet(out_dir, rows_hot, rows_big):
    import pyarrow as pa
    import pyarrow.parquet as pq

    def ints(n):
        return pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(os.urandom(8 * n))])

    def payload(n):
        return pa.FixedSizeBinaryArray.from_buffers(
            pa.binary(256), n, [None, pa.py_buffer(os.urandom(256 * n))])

    hot = pa.table({"a": ints(rows_hot), "b": ints(rows_hot), "payload": payload(rows_hot)})
    pq.write_table(hot, os.path.join(out_dir, "hot.parquet"), compression="none",
                   row_group_size=1 << 20)
    big = pa.table({"id": ints(rows_big), "payload": payload(rows_big)})
    pq.write_table(big, os.path.join(out_dir, "big.parquet"), compression="none",
                   row_group_size=1 << 18)


def query(path, cols=None):
    import pyarrow.parquet as pq
    t = time.perf_counter()
    columns = cols.split(",") if cols else None
    table = pq.read_table(path, columns=columns, use_threads=True, memory_map=False)
    if table.num_rows == 0:
        sys.exit(f"query: {path} has no rows")
    print(f"{time.perf_counter() - t:.3f}")


def dontneed(paths):
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "proxy":
        proxy(int(args[0]), int(args[1]), float(args[2]), args[3])
    elif cmd == "rtt":
        rtt(int(args[0]), int(args[1]) if len(args) > 1 else 50)
    elif cmd == "freeport":
        freeport()
    elif cmd == "parquet":
        parquet(args[0], int(args[1]), int(args[2]))
    elif cmd == "query":
        query(args[0], args[1] if len(args) > 1 else None)
    elif cmd == "dontneed":
        dontneed(args)
    else:
        sys.exit(f"bucket-bench-helper: unknown command {cmd}")
